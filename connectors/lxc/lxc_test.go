package lxc_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
	"github.com/spindle-rpc/spindle/connectors/lxc"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestArgv(t *testing.T) {
	for _, c := range []struct {
		o          lxc.Options
		argv, name string
	}{
		{lxc.Options{Container: "c1"}, "lxc-attach -n c1 --clear-env -- sh -c S", "lxc:c1"},
		{lxc.Options{Container: "c1", User: "1000"}, "lxc-attach -n c1 -u 1000 --clear-env -- sh -c S", "lxc:1000@c1"},
		{lxc.Options{Container: "c1", User: "1000:100", LXCPath: "/srv/lxc", AttachPath: "/opt/lxc-attach", Flags: []string{"--keep-var", "TERM"}},
			"/opt/lxc-attach -n c1 -P /srv/lxc -u 1000 -g 100 --clear-env --keep-var TERM -- sh -c S", "lxc:1000:100@c1"},
	} {
		if got := strings.Join(c.o.Argv("S"), " "); got != c.argv {
			t.Errorf("%+v: argv %q, want %q", c.o, got, c.argv)
		}
		if got := c.o.Name(); got != c.name {
			t.Errorf("%+v: name %q, want %q", c.o, got, c.name)
		}
	}
}

func TestInfoArgv(t *testing.T) {
	for o, want := range map[*lxc.Options]string{
		{Container: "c1"}: "lxc-info -n c1 -s -H",
		{Container: "c1", LXCPath: "/srv/lxc", AttachPath: "/opt/lxc/bin/lxc-attach"}: "/opt/lxc/bin/lxc-info -n c1 -P /srv/lxc -s -H",
	} {
		if got := strings.Join(o.InfoArgv(), " "); got != want {
			t.Errorf("%+v: %q, want %q", *o, got, want)
		}
	}
}

// lxc-attach takes numeric ids only: a name is refused before anything
// runs.
func TestUserMustBeNumeric(t *testing.T) {
	_, err := (lxc.Options{Container: "c1", User: "app"}).Start(context.Background(), connectors.StartRequest{})
	if !errors.Is(err, errkind.ErrBadArgs) || !strings.Contains(err.Error(), "numeric") {
		t.Fatalf("%v", err)
	}
}

func TestRegistry(t *testing.T) {
	o := lxc.Options{Container: "c1", User: "1", LXCPath: "/p", AttachPath: "/x", Flags: []string{"-e"}, Timeout: time.Second, ContextName: "n"}
	b, _ := msgpack.Marshal(o)
	newZero, ok := connectors.Lookup("lxc")
	if !ok {
		t.Fatal("lxc not registered")
	}
	r := newZero()
	if err := msgpack.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	if got := *r.(*lxc.Options); !reflect.DeepEqual(got, o) || r.Kind() != "lxc" {
		t.Errorf("round trip: %+v", got)
	}
}

// Messages of LXC 3-5 (from its sources and issues; the live tests in
// integration/containers_test.go meet the installed lxc-attach's).
func TestRules(t *testing.T) {
	rules := (lxc.Options{Container: "c1"}).Rules()
	for out, want := range map[string]error{
		"lxc-attach: c1: attach.c: get_attach_context: 403 Failed to get init pid":                               container.ErrNotRunning,
		"Error: container c1 is not defined":                                                                     container.ErrNoContainer,
		`lxc-attach: c1: attach.c: lxc_attach_run_command: 1841 No such file or directory - Failed to exec "sh"`: container.ErrNoShell,
		"something else": nil,
	} {
		got := container.Classify(out, rules)
		if (want == nil) != (got == nil) || !errors.Is(got, want) {
			t.Errorf("%q: %v, want %v", out, got, want)
		}
	}
}
