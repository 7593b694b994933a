package lxd_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
	"github.com/spindle-rpc/spindle/connectors/lxd"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestArgv(t *testing.T) {
	for _, c := range []struct {
		o          lxd.Options
		argv, name string
	}{
		{lxd.Options{Container: "c1"}, "lxc exec --mode=non-interactive c1 -- sh -c S", "lxd:c1"},
		{lxd.Options{Container: "remote:c1", User: "1000:1000", Project: "dev", LXCPath: "/snap/bin/lxc", Flags: []string{"--cwd", "/srv"}},
			"/snap/bin/lxc exec --mode=non-interactive --project=dev --user=1000 --group=1000 --cwd /srv remote:c1 -- sh -c S", "lxd:1000:1000@remote:c1"},
	} {
		if got := strings.Join(c.o.Argv("S"), " "); got != c.argv {
			t.Errorf("%+v: argv %q, want %q", c.o, got, c.argv)
		}
		if got := c.o.Name(); got != c.name {
			t.Errorf("%+v: name %q, want %q", c.o, got, c.name)
		}
	}
}

func TestUserMustBeNumeric(t *testing.T) {
	_, err := (lxd.Options{Container: "c1", User: "app"}).Start(context.Background(), connectors.StartRequest{})
	if !errors.Is(err, errkind.ErrBadArgs) || !strings.Contains(err.Error(), "numeric") {
		t.Fatalf("%v", err)
	}
}

func TestRegistry(t *testing.T) {
	o := lxd.Options{Container: "c1", User: "1", Project: "p", LXCPath: "/x", Flags: []string{"-T"}, Timeout: time.Second, ContextName: "n"}
	b, _ := msgpack.Marshal(o)
	newZero, ok := connectors.Lookup("lxd")
	if !ok {
		t.Fatal("lxd not registered")
	}
	r := newZero()
	if err := msgpack.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	if got := *r.(*lxd.Options); !reflect.DeepEqual(got, o) || r.Kind() != "lxd" {
		t.Errorf("round trip: %+v", got)
	}
}

// Messages of LXD 5 (from its sources: lxc/exec.go, lxd/instance_exec.go,
// client/connection.go; LXD is not installed where these tests run:
// integration/containers_test.go runs the connector through a stand-in
// that prints them).
func TestRules(t *testing.T) {
	rules := (lxd.Options{Container: "c1"}).Rules()
	for out, want := range map[string]error{
		"Error: Instance not found":      container.ErrNoContainer,
		"Error: not found":               container.ErrNoContainer,
		"Error: Instance is not running": container.ErrNotRunning,
		"Error: Instance is frozen":      container.ErrNotRunning,
		`Error: LXD unix socket "/var/snap/lxd/common/lxd/unix.socket" not found: Please check LXD is running`: container.ErrNoDaemon,
		"something else": nil,
	} {
		got := container.Classify(out, rules)
		if (want == nil) != (got == nil) || !errors.Is(got, want) {
			t.Errorf("%q: %v, want %v", out, got, want)
		}
	}
}
