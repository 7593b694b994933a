package sudo_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/become"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	"github.com/spindle-rpc/spindle/internal/testkit/becometest"
	"github.com/vmihailenco/msgpack/v5"
)

func TestMain(m *testing.M) { becometest.Main(m) }

func need(t *testing.T) { becometest.NeedRoot(t, "sudo") }

func TestArgv(t *testing.T) {
	f := false
	for _, c := range []struct {
		o    sudo.Options
		want string
	}{
		{sudo.Options{}, "sudo -n -u root -H -p P -- sh -c S"},
		{sudo.Options{User: "pg", Password: "x", PreserveEnv: true, Login: true, Flags: []string{"-g", "adm"}},
			"sudo -u pg -H -E -p P -g adm -- sh -l -c cd 2>/dev/null; S"},
		{sudo.Options{SetHome: &f}, "sudo -n -u root -p P -- sh -c S"},
		{sudo.Options{Exe: "/usr/local/bin/sudo"}, "/usr/local/bin/sudo -n -u root -H -p P -- sh -c S"},
	} {
		got := strings.Join(c.o.Argv("P"), " ")
		got = strings.ReplaceAll(got, become.Script, "S")
		if got != c.want {
			t.Errorf("%+v: %q, want %q", c.o, got, c.want)
		}
	}
	if n := (sudo.Options{}).Name(); n != "sudo:root" {
		t.Error(n)
	}
	if n := (sudo.Options{User: "pg"}).Name(); n != "sudo:pg" {
		t.Error(n)
	}
}

// The controller encodes a value; the agent decodes into the registered
// zero value. The password travels.
func TestRegistry(t *testing.T) {
	o := sudo.Options{User: "pg", Password: "pw", PreserveEnv: true, Flags: []string{"-g", "x"}, Timeout: time.Second, ContextName: "db"}
	b, err := msgpack.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	newZero, ok := connectors.Lookup("sudo")
	if !ok {
		t.Fatal("sudo not registered")
	}
	r := newZero()
	if err := msgpack.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	if got := *r.(*sudo.Options); !reflect.DeepEqual(got, o) {
		t.Errorf("round trip: %+v", got)
	}
	if r.Kind() != "sudo" || r.Name() != "db" {
		t.Error(r.Kind(), r.Name())
	}
}

func TestClassify(t *testing.T) {
	for out, want := range map[string]error{
		"sudo: a password is required":                                              become.ErrPasswordRequired,
		"Sorry, try again.\nsudo: 3 incorrect password attempts":                    become.ErrWrongPassword,
		"sudo: sorry, you must have a tty to run sudo":                              become.ErrNeedTTY,
		"bob is not in the sudoers file.  This incident will be reported.":          become.ErrNotAllowed,
		"Sorry, user bob is not allowed to execute '/bin/sh -c x' as root on host.": become.ErrNotAllowed,
		"sudo: unknown user nobody2":                                                become.ErrNoSuchUser,
		"something else":                                                            nil,
	} {
		if got := sudo.Classify(out); got != want {
			t.Errorf("%q: %v, want %v", out, got, want)
		}
	}
}

// Root needs no password: sudo -n to another user.
func TestRootToUser(t *testing.T) {
	need(t)
	u := becometest.NewUser(t, "")
	for _, o := range []sudo.Options{{User: u.Name}, {User: u.Name, Login: true}, {User: u.Name, PreserveEnv: true}} {
		res := becometest.StartHere(o)
		if res.Err != "" {
			t.Fatalf("%+v: %s", o, res.Err)
		}
		if res.UID != u.UID {
			t.Errorf("%+v: agent uid %d, want %d", o, res.UID, u.UID)
		}
	}
}

func TestUnknownUser(t *testing.T) {
	need(t)
	res := becometest.StartHere(sudo.Options{User: "spindle-nosuchuser"})
	if !res.Is["no_such_user"] || !res.Is["not_found"] {
		t.Fatalf("%+v", res)
	}
	t.Log(res.Err)
}

func TestPasswordToRoot(t *testing.T) {
	need(t)
	pw := becometest.Password()
	u := becometest.NewUser(t, pw)
	becometest.Sudoers(t, u.Name+" ALL=(ALL:ALL) ALL\n")

	t.Run("correct", func(t *testing.T) {
		res := becometest.RunAs(t, u, sudo.Options{Password: pw})
		if res.Err != "" || res.UID != 0 {
			t.Fatalf("%+v", res)
		}
		becometest.CheckNoSecret(t, res, pw)
	})
	t.Run("wrong", func(t *testing.T) {
		bad := "Wrong-" + pw
		t0 := time.Now()
		res := becometest.RunAs(t, u, sudo.Options{Password: bad})
		if !res.Is["wrong_password"] || !res.Is["auth"] {
			t.Fatalf("%+v", res)
		}
		if d := time.Since(t0); d > 15*time.Second {
			t.Errorf("took %s", d)
		}
		becometest.CheckNoSecret(t, res, bad)
		t.Log(res.Err)
	})
	t.Run("none", func(t *testing.T) {
		res := becometest.RunAs(t, u, sudo.Options{})
		if !res.Is["password_required"] || !res.Is["auth"] {
			t.Fatalf("%+v", res)
		}
		t.Log(res.Err)
	})
}

func TestNotInSudoers(t *testing.T) {
	need(t)
	pw := becometest.Password()
	u := becometest.NewUser(t, pw)
	res := becometest.RunAs(t, u, sudo.Options{Password: pw})
	if !res.Is["not_allowed"] || !res.Is["permission"] {
		t.Fatalf("%+v", res)
	}
	becometest.CheckNoSecret(t, res, pw)
	t.Log(res.Err)
}

func TestNotAllowedToExecute(t *testing.T) {
	need(t)
	pw := becometest.Password()
	u := becometest.NewUser(t, pw)
	becometest.Sudoers(t, u.Name+" ALL=(root) /bin/true\n")
	res := becometest.RunAs(t, u, sudo.Options{Password: pw})
	if !res.Is["not_allowed"] || !res.Is["permission"] {
		t.Fatalf("%+v", res)
	}
	becometest.CheckNoSecret(t, res, pw)
	t.Log(res.Err)
}

// With the hybrid terminal sudo has a tty: requiretty just works, with and
// without a password.
func TestRequiretty(t *testing.T) {
	need(t)
	pw := becometest.Password()
	u := becometest.NewUser(t, pw)
	v := becometest.NewUser(t, "")
	becometest.Sudoers(t, "Defaults:"+u.Name+" requiretty\nDefaults:"+v.Name+" requiretty\n"+
		u.Name+" ALL=(ALL:ALL) ALL\n"+v.Name+" ALL=(ALL:ALL) NOPASSWD: ALL\n")
	res := becometest.RunAs(t, u, sudo.Options{Password: pw})
	if res.Err != "" || res.UID != 0 {
		t.Fatalf("password: %+v", res)
	}
	res = becometest.RunAs(t, v, sudo.Options{})
	if res.Err != "" || res.UID != 0 {
		t.Fatalf("nopasswd: %+v", res)
	}
}

// User to another unprivileged user, NOPASSWD, through the agent path the
// registry serves.
func TestNopasswdToUser(t *testing.T) {
	need(t)
	u := becometest.NewUser(t, "")
	v := becometest.NewUser(t, "")
	becometest.Sudoers(t, u.Name+" ALL=("+v.Name+") NOPASSWD: ALL\n")
	res := becometest.RunAs(t, u, sudo.Options{User: v.Name})
	if res.Err != "" || res.UID != v.UID {
		t.Fatalf("%+v", res)
	}
}

func TestNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	res := becometest.StartHere(sudo.Options{})
	if !res.Is["not_installed"] || !strings.Contains(res.Err, `"sudo" package`) {
		t.Fatalf("%+v", res)
	}
	t.Log(res.Err)
}

// A cached agent that fails its self-check is replaced: one retry with
// fresh args.
func TestStaleAgentRetry(t *testing.T) {
	need(t)
	u := becometest.NewUser(t, "")
	if res := becometest.StartHere(sudo.Options{User: u.Name}); res.Err != "" || res.UID != u.UID {
		t.Fatalf("first start: %+v", res)
	} else if !strings.Contains(res.Logs, "MiB raw)") {
		// sudo's pipe is local: compressing would cost the parent more
		// than the bytes cost the pipe (bootstrap.OverLocalPipe).
		t.Errorf("the agent did not travel raw to the sudo child:\n%s", res.Logs)
	}
	files, _ := filepath.Glob(fmt.Sprintf("/dev/shm/spindle-%d/agent-*", u.UID))
	more, _ := filepath.Glob(u.Home + "/.cache/spindle/agent-*")
	files = append(files, more...)
	if len(files) != 1 {
		t.Fatalf("cached agents: %v", files)
	}
	f, err := os.OpenFile(files[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	f.WriteAt([]byte("tampered"), st.Size()-64)
	f.Close()
	res := becometest.StartHere(sudo.Options{User: u.Name})
	if res.Err != "" || res.UID != u.UID {
		t.Fatalf("after tampering: %+v", res)
	}
	if !strings.Contains(res.Logs, "failed its self-check") || !strings.Contains(res.Logs, "agent uploaded") {
		t.Errorf("no retry in the logs:\n%s", res.Logs)
	}
}
