package podman_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
	"github.com/spindle-rpc/spindle/connectors/podman"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestArgv(t *testing.T) {
	for _, c := range []struct {
		o          podman.Options
		argv, name string
	}{
		{podman.Options{Container: "app1"}, "podman exec -i app1 sh -c S", "podman:app1"},
		{podman.Options{Container: "app1", User: "app"}, "podman exec -i -u app app1 sh -c S", "podman:app@app1"},
		{podman.Options{Container: "app1", PodmanPath: "/usr/local/bin/podman", Flags: []string{"-w", "/srv"}},
			"/usr/local/bin/podman exec -i -w /srv app1 sh -c S", "podman:app1"},
	} {
		if got := strings.Join(c.o.Argv("S"), " "); got != c.argv {
			t.Errorf("%+v: argv %q, want %q", c.o, got, c.argv)
		}
		if got := c.o.Name(); got != c.name {
			t.Errorf("%+v: name %q, want %q", c.o, got, c.name)
		}
	}
}

func TestRegistry(t *testing.T) {
	o := podman.Options{Container: "app1", User: "app", PodmanPath: "/x", Flags: []string{"-t"}, Timeout: time.Second, ContextName: "n"}
	b, _ := msgpack.Marshal(o)
	newZero, ok := connectors.Lookup("podman")
	if !ok {
		t.Fatal("podman not registered")
	}
	r := newZero()
	if err := msgpack.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	if got := *r.(*podman.Options); !reflect.DeepEqual(got, o) || r.Kind() != "podman" {
		t.Errorf("round trip: %+v", got)
	}
}

// Messages of podman 4 and 5 (from its sources and issues; the live
// tests in integration/containers_test.go meet the installed podman's).
func TestRules(t *testing.T) {
	rules := (podman.Options{Container: "app1"}).Rules()
	for out, want := range map[string]error{
		`Error: no container with name or ID "app1" found: no such container`:                                                                           container.ErrNoContainer,
		"Error: can only create exec sessions on running containers: container state improper":                                                          container.ErrNotRunning,
		"Error: crun: executable file `sh` not found in $PATH: No such file or directory: OCI runtime attempted to invoke a command that was not found": container.ErrNoShell,
		"Error: unable to find user bob: no matching entries in passwd file":                                                                            container.ErrNoSuchUser,
		"something else": nil,
	} {
		got := container.Classify(out, rules)
		if (want == nil) != (got == nil) || !errors.Is(got, want) {
			t.Errorf("%q: %v, want %v", out, got, want)
		}
	}
}
