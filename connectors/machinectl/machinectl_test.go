package machinectl_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
	"github.com/spindle-rpc/spindle/connectors/machinectl"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestArgv(t *testing.T) {
	const base = "systemd-run --machine=m1 --pipe --wait --collect --service-type=exec"
	for _, c := range []struct {
		o          machinectl.Options
		argv, name string
	}{
		{machinectl.Options{Machine: "m1"}, base + " -- /bin/sh -c S", "machinectl:m1"},
		{machinectl.Options{Machine: "m1", User: "app", Flags: []string{"-p", "MemoryMax=1G"}},
			base + " --uid=app -p MemoryMax=1G -- /bin/sh -c S", "machinectl:app@m1"},
	} {
		if got := strings.Join(c.o.Argv("S"), " "); got != c.argv {
			t.Errorf("%+v: argv %q, want %q", c.o, got, c.argv)
		}
		if got := c.o.Name(); got != c.name {
			t.Errorf("%+v: name %q, want %q", c.o, got, c.name)
		}
	}
	if argv := (machinectl.Options{Machine: "m1", SystemdRunPath: "/usr/bin/systemd-run"}).Argv("S"); argv[0] != "/usr/bin/systemd-run" {
		t.Errorf("%q", argv)
	}
}

// systemd expands $VAR and ${VAR} in a transient service's command line
// and turns $$ into $: every $ of the stage is doubled, and undoing that
// (as systemd does) gives the stage back.
func TestArgvEscapesDollars(t *testing.T) {
	script := `u=$(id -u); set -- "${HOME:+$HOME/x}" $$; echo "$1" ${h%${h#????}}`
	argv := (machinectl.Options{Machine: "m1"}).Argv(script)
	got := argv[len(argv)-1]
	if strings.Contains(strings.ReplaceAll(got, "$$", ""), "$") {
		t.Fatalf("a lone $ reaches systemd: %q", got)
	}
	if strings.ReplaceAll(got, "$$", "$") != script {
		t.Fatalf("unescaping gives %q", strings.ReplaceAll(got, "$$", "$"))
	}
}

// Messages of systemd-run 252 (from its sources: bus_log_connect_error,
// container_get_leader, bus-wait-for-jobs.c; the first is also the real
// systemd-run's answer in integration/containers_test.go, which runs the
// connector through a stand-in that prints the others).
func TestRules(t *testing.T) {
	job := "Job for run-u7.service failed because the control process exited with error code.\n" +
		"See \"systemctl status run-u7.service\" and \"journalctl -xeu run-u7.service\" for details."
	for _, c := range []struct {
		o    machinectl.Options
		out  string
		want error
	}{
		{machinectl.Options{Machine: "m1"}, "Failed to connect to bus: Host is down", container.ErrNoContainer},
		{machinectl.Options{Machine: "m1", User: "bob"}, job, container.ErrNoSuchUser},
		{machinectl.Options{Machine: "m1"}, job, container.ErrNoShell},
		{machinectl.Options{Machine: "m1"}, "Failed to connect to bus: Permission denied", container.ErrPermission},
		{machinectl.Options{Machine: "m1"}, "something else", nil},
	} {
		got := container.Classify(c.out, c.o.Rules())
		if (c.want == nil) != (got == nil) || !errors.Is(got, c.want) {
			t.Errorf("%+v %q: %v, want %v", c.o, c.out, got, c.want)
		}
	}
}

func TestRegistry(t *testing.T) {
	o := machinectl.Options{Machine: "m1", User: "app", SystemdRunPath: "/x", Flags: []string{"-E", "A=B"}, Timeout: time.Second, ContextName: "n"}
	b, _ := msgpack.Marshal(o)
	newZero, ok := connectors.Lookup("machinectl")
	if !ok {
		t.Fatal("machinectl not registered")
	}
	r := newZero()
	if err := msgpack.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	if got := *r.(*machinectl.Options); !reflect.DeepEqual(got, o) || r.Kind() != "machinectl" {
		t.Errorf("round trip: %+v", got)
	}
}
