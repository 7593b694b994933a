package docker_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
	"github.com/spindle-rpc/spindle/connectors/docker"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestArgv(t *testing.T) {
	for _, c := range []struct {
		o          docker.Options
		argv, name string
	}{
		{docker.Options{Container: "app1"}, "docker exec -i app1 sh -c S", "docker:app1"},
		{docker.Options{Container: "app1", User: "app"}, "docker exec -i -u app app1 sh -c S", "docker:app@app1"},
		{docker.Options{Container: "app1", User: "1000:1000", DockerPath: "/opt/bin/docker", Flags: []string{"-w", "/srv", "-e", "K=V"}},
			"/opt/bin/docker exec -i -u 1000:1000 -w /srv -e K=V app1 sh -c S", "docker:1000:1000@app1"},
		{docker.Options{Container: "app1", ContextName: "db"}, "docker exec -i app1 sh -c S", "db"},
	} {
		if got := strings.Join(c.o.Argv("S"), " "); got != c.argv {
			t.Errorf("%+v: argv %q, want %q", c.o, got, c.argv)
		}
		if got := c.o.Name(); got != c.name {
			t.Errorf("%+v: name %q, want %q", c.o, got, c.name)
		}
	}
	// The first stage is one argument, whatever it holds.
	if argv := (docker.Options{Container: "c"}).Argv("a b 'c'"); argv[len(argv)-1] != "a b 'c'" {
		t.Errorf("%q", argv)
	}
}

// The controller encodes a value; the agent decodes it into the
// registered zero value.
func TestRegistry(t *testing.T) {
	o := docker.Options{Container: "app1", User: "app", DockerPath: "/x/docker", Flags: []string{"-w", "/"}, Timeout: time.Second, ContextName: "n"}
	b, err := msgpack.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	newZero, ok := connectors.Lookup("docker")
	if !ok {
		t.Fatal("docker not registered")
	}
	r := newZero()
	if err := msgpack.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	if got := *r.(*docker.Options); !reflect.DeepEqual(got, o) || r.Kind() != "docker" {
		t.Errorf("round trip: %+v", got)
	}
}

// Messages of docker 20.10-28 (the first three seen in this repository's
// tests against a real engine).
func TestRules(t *testing.T) {
	rules := (docker.Options{Container: "app1", User: "bob"}).Rules()
	for out, want := range map[string]error{
		"Error response from daemon: No such container: app1":                                                                     container.ErrNoContainer,
		"Error response from daemon: Container 80967476ce08 is not running":                                                       container.ErrNotRunning,
		"unable to find user bob: no matching entries in passwd file":                                                             container.ErrNoSuchUser,
		"Error response from daemon: Container 80967476ce08 is paused, unpause the container before exec":                         container.ErrNotRunning,
		`OCI runtime exec failed: exec failed: unable to start container process: exec: "sh": executable file not found in $PATH`: container.ErrNoShell,
		"permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock":                    container.ErrPermission,
		"Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?":                       container.ErrNoDaemon,
		"something else": nil,
	} {
		got := container.Classify(out, rules)
		if (want == nil) != (got == nil) || !errors.Is(got, want) {
			t.Errorf("%q: %v, want %v", out, got, want)
		}
	}
}
