package doas_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/become"
	"github.com/spindle-rpc/spindle/connectors/doas"
	"github.com/spindle-rpc/spindle/internal/testkit/becometest"
	"github.com/vmihailenco/msgpack/v5"
)

func TestMain(m *testing.M) { becometest.Main(m) }

func need(t *testing.T) { becometest.NeedRoot(t, "doas") }

func TestArgv(t *testing.T) {
	got := strings.Join((doas.Options{User: "pg"}).Argv(), " ")
	if want := "doas -n -u pg -- sh -c " + become.Script; got != want {
		t.Errorf("%q", got)
	}
	got = strings.Join((doas.Options{Password: "x"}).Argv(), " ")
	if want := "doas -u root -- sh -c " + become.Script; got != want {
		t.Errorf("%q", got)
	}
	got = strings.Join((doas.Options{Exe: "/opt/doas", Flags: []string{"-s"}}).Argv(), " ")
	if want := "/opt/doas -n -u root -s -- sh -c " + become.Script; got != want {
		t.Errorf("%q", got)
	}
	if n := (doas.Options{}).Name(); n != "doas:root" {
		t.Error(n)
	}
}

func TestRegistry(t *testing.T) {
	o := doas.Options{User: "pg", Password: "pw", Timeout: time.Second, ContextName: "x"}
	b, _ := msgpack.Marshal(o)
	newZero, ok := connectors.Lookup("doas")
	if !ok {
		t.Fatal("doas not registered")
	}
	r := newZero()
	if err := msgpack.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	if got := *r.(*doas.Options); !reflect.DeepEqual(got, o) {
		t.Errorf("%+v", got)
	}
}

func TestPrompt(t *testing.T) {
	if !doas.IsPrompt("doas (bob@web1) password: ") || doas.IsPrompt("doas: Authentication failed") {
		t.Error("prompt")
	}
}

func TestPassword(t *testing.T) {
	need(t)
	pw := becometest.Password()
	u := becometest.NewUser(t, pw)
	becometest.DoasConf(t, "permit "+u.Name+" as root\n")
	t.Run("correct", func(t *testing.T) {
		res := becometest.RunAs(t, u, doas.Options{Password: pw})
		if res.Err != "" || res.UID != 0 {
			t.Fatalf("%+v", res)
		}
		becometest.CheckNoSecret(t, res, pw)
	})
	t.Run("wrong", func(t *testing.T) {
		bad := "Wrong-" + pw
		res := becometest.RunAs(t, u, doas.Options{Password: bad})
		if !res.Is["wrong_password"] || !res.Is["auth"] {
			t.Fatalf("%+v", res)
		}
		becometest.CheckNoSecret(t, res, bad)
		t.Log(res.Err)
	})
	t.Run("none", func(t *testing.T) {
		res := becometest.RunAs(t, u, doas.Options{})
		if !res.Is["password_required"] || !res.Is["auth"] {
			t.Fatalf("%+v", res)
		}
		t.Log(res.Err)
	})
	t.Run("not permitted", func(t *testing.T) {
		v := becometest.NewUser(t, "")
		res := becometest.RunAs(t, u, doas.Options{User: v.Name, Password: pw})
		if !res.Is["not_allowed"] || !res.Is["permission"] {
			t.Fatalf("%+v", res)
		}
		becometest.CheckNoSecret(t, res, pw)
		t.Log(res.Err)
	})
}

func TestNopass(t *testing.T) {
	need(t)
	u := becometest.NewUser(t, "")
	v := becometest.NewUser(t, "")
	becometest.DoasConf(t, "permit nopass "+u.Name+" as root\npermit nopass "+u.Name+" as "+v.Name+"\n")
	res := becometest.RunAs(t, u, doas.Options{})
	if res.Err != "" || res.UID != 0 {
		t.Fatalf("%+v", res)
	}
	res = becometest.RunAs(t, u, doas.Options{User: v.Name})
	if res.Err != "" || res.UID != v.UID {
		t.Fatalf("%+v", res)
	}
}

func TestNotEnabled(t *testing.T) {
	need(t)
	u := becometest.NewUser(t, "")
	becometest.DoasConf(t, "# nothing\n")
	res := becometest.RunAs(t, u, doas.Options{})
	if !res.Is["not_allowed"] {
		t.Fatalf("%+v", res)
	}
	t.Log(res.Err)
}
