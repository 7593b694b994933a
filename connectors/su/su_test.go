package su_test

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/become"
	"github.com/spindle-rpc/spindle/connectors/su"
	"github.com/spindle-rpc/spindle/internal/testkit/becometest"
	"github.com/vmihailenco/msgpack/v5"
)

func TestMain(m *testing.M) { becometest.Main(m) }

func need(t *testing.T) { becometest.NeedRoot(t, "su") }

func TestArgv(t *testing.T) {
	got := strings.Join((su.Options{User: "pg", Login: true}).Argv(), " ")
	if want := "su -l -c " + become.Command + " -- pg"; got != want {
		t.Errorf("%q", got)
	}
	got = strings.Join((su.Options{Exe: "/usr/local/bin/su", Flags: []string{"-m"}}).Argv(), " ")
	if want := "/usr/local/bin/su -m -c " + become.Command + " -- root"; got != want {
		t.Errorf("%q", got)
	}
	if n := (su.Options{}).Name(); n != "su:root" {
		t.Error(n)
	}
}

func TestRegistry(t *testing.T) {
	o := su.Options{User: "pg", Password: "pw", Login: true, Timeout: time.Second, ContextName: "x"}
	b, _ := msgpack.Marshal(o)
	newZero, ok := connectors.Lookup("su")
	if !ok {
		t.Fatal("su not registered")
	}
	r := newZero()
	if err := msgpack.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	if got := *r.(*su.Options); !reflect.DeepEqual(got, o) {
		t.Errorf("%+v", got)
	}
}

func TestPrompt(t *testing.T) {
	for out, want := range map[string]bool{
		"Password: ":         true,
		"motd\npassword:":    true,
		"Passwort: ":         false, // LC_ALL=C makes it English
		"Password: \nfoo":    false,
		"[sudo] password: ":  true,
		"su: Authentication": false,
	} {
		if su.IsPrompt(out) != want {
			t.Errorf("%q: %v", out, !want)
		}
	}
}

// Root needs no password for su.
func TestRootToUser(t *testing.T) {
	need(t)
	u := becometest.NewUser(t, "")
	for _, o := range []su.Options{{User: u.Name}, {User: u.Name, Login: true}} {
		res := becometest.StartHere(o)
		if res.Err != "" || res.UID != u.UID {
			t.Fatalf("%+v: %+v", o, res)
		}
	}
}

// su to a user whose login shell is not sh-like still runs the stage.
func TestOddLoginShell(t *testing.T) {
	need(t)
	u := becometest.NewUser(t, "")
	for _, sh := range []string{"/usr/bin/fish", "/usr/bin/tcsh", "/bin/csh"} {
		if _, err := exec.LookPath(sh); err != nil {
			continue
		}
		run(t, "usermod", "-s", sh, u.Name)
		res := becometest.StartHere(su.Options{User: u.Name})
		if res.Err != "" || res.UID != u.UID {
			t.Fatalf("%s: %+v", sh, res)
		}
		t.Logf("%s: ok", sh)
	}
}

func TestUserToUserPassword(t *testing.T) {
	need(t)
	u := becometest.NewUser(t, "")
	pw := becometest.Password()
	v := becometest.NewUser(t, pw)
	t.Run("correct", func(t *testing.T) {
		res := becometest.RunAs(t, u, su.Options{User: v.Name, Password: pw})
		if res.Err != "" || res.UID != v.UID {
			t.Fatalf("%+v", res)
		}
		becometest.CheckNoSecret(t, res, pw)
	})
	t.Run("wrong", func(t *testing.T) {
		bad := "Wrong-" + pw
		res := becometest.RunAs(t, u, su.Options{User: v.Name, Password: bad})
		if !res.Is["wrong_password"] || !res.Is["auth"] {
			t.Fatalf("%+v", res)
		}
		becometest.CheckNoSecret(t, res, bad)
		t.Log(res.Err)
	})
	t.Run("none", func(t *testing.T) {
		res := becometest.RunAs(t, u, su.Options{User: v.Name})
		if !res.Is["password_required"] || !res.Is["auth"] {
			t.Fatalf("%+v", res)
		}
		t.Log(res.Err)
	})
}

func TestUnknownUser(t *testing.T) {
	need(t)
	res := becometest.StartHere(su.Options{User: "spindle-nosuchuser"})
	if !res.Is["no_such_user"] {
		t.Fatalf("%+v", res)
	}
	t.Log(res.Err)
}

func TestNologin(t *testing.T) {
	need(t)
	u := becometest.NewUser(t, "")
	run(t, "usermod", "-s", "/usr/sbin/nologin", u.Name)
	res := becometest.StartHere(su.Options{User: u.Name})
	if !res.Is["not_allowed"] {
		t.Fatalf("%+v", res)
	}
	t.Log(res.Err)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}
