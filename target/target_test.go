package target

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/docker"
	"github.com/spindle-rpc/spindle/connectors/kubectl"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/connectors/su"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/services/sys"
	"go.uber.org/goleak"
)

// The examples and the Routes tests start local agents: build one (or
// use $SPINDLE_AGENT).
func TestMain(m *testing.M) {
	if _, err := testagent.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

func TestParse(t *testing.T) {
	ok := []struct {
		in   string
		hops []Hop
	}{
		{"local", []Hop{{Kind: "local"}}},
		{" local ", []Hop{{Kind: "local"}}},
		{"web1", []Hop{{Kind: "ssh", Arg: "web1"}}},
		{"Local", []Hop{{Kind: "ssh", Arg: "Local"}}},
		{"ssh:local", []Hop{{Kind: "ssh", Arg: "local"}}},
		{"user@web1:2222", []Hop{{Kind: "ssh", Arg: "user@web1:2222"}}},
		{"web1:2222", []Hop{{Kind: "ssh", Arg: "web1:2222"}}},
		{"[::1]:22", []Hop{{Kind: "ssh", Arg: "[::1]:22"}}},
		{"ssh:user@host:22", []Hop{{Kind: "ssh", Arg: "user@host:22"}}},
		{"ssh:[fe80::1%eth0]:22", []Hop{{Kind: "ssh", Arg: "[fe80::1%eth0]:22"}}},
		{"bastion,web1", []Hop{{Kind: "ssh", Arg: "bastion"}, {Kind: "ssh", Arg: "web1"}}},
		{"docker:app1", []Hop{{Kind: "docker", Arg: "app1"}}}, // on this machine
		{"web1,docker:app@app1,sudo", []Hop{{Kind: "ssh", Arg: "web1"}, {Kind: "docker", Arg: "app@app1"}, {Kind: "sudo"}}},
		{"local,setns:1234,kubectl:ns/pod/c", []Hop{{Kind: "local"}, {Kind: "setns", Arg: "1234"}, {Kind: "kubectl", Arg: "ns/pod/c"}}},
		{"ssh:bastion,ssh:web1,sudo", []Hop{{Kind: "ssh", Arg: "bastion"}, {Kind: "ssh", Arg: "web1"}, {Kind: "sudo"}}},
	}
	for _, tc := range ok {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got.Hops, tc.hops) {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.in, got.Hops, tc.hops)
		}
	}
	if cs, err := mustParse(t, "local").Connectors(Options{}); err != nil {
		t.Errorf("local connector: %v", err)
	} else if _, ok := cs[0].(local.Options); !ok || len(cs) != 1 {
		t.Errorf("local connectors are %#v", cs)
	}
	// A become hop given first runs on this machine: local comes first.
	if cs, err := mustParse(t, "sudo:postgres").Connectors(Options{}); err != nil || len(cs) != 2 {
		t.Errorf("sudo:postgres: %#v, %v", cs, err)
	} else if s, ok := cs[1].(sudo.Options); !ok || s.User != "postgres" || cs[0].Name() != "local" {
		t.Errorf("sudo:postgres gives %#v", cs)
	}
	if cs, err := mustParse(t, "ssh:web1,sudo").Connectors(Options{}); err != nil || len(cs) != 2 {
		t.Errorf("ssh:web1,sudo: %#v, %v", cs, err)
	} else if s, ok := cs[1].(sudo.Options); !ok || s.User != "root" {
		t.Errorf("bare sudo is not root: %#v", cs[1])
	}
	if cs, err := mustParse(t, "local,local").Connectors(Options{}); err != nil || len(cs) != 2 {
		t.Errorf("local,local: %#v, %v", cs, err)
	} else if _, ok := cs[1].(connectors.Remote); !ok {
		t.Errorf("the second hop %T is not started by an agent", cs[1])
	}

	bad := []struct{ in, want string }{
		{"", "empty target"},
		{"   ", "empty target"},
		{"foo:bar", `unknown kind "foo"`},
		{"local:x", "local takes no argument"},
		{"local,", "hop 2 is empty"},
		{",local", "hop 1 is empty"},
		{"ssh:", "ssh needs an argument"},
		{"web1:0", "bad port"},
		{"web1:65536", "bad port"},
		{"ssh:web1:x", "bad port"},
		{"ssh:web1:", "empty port"},
		{"@web1", "empty user"},
		{"ssh:[::1", "missing ']'"},
		{"ssh:[::1]x", "after ']'"},
		{"ssh:[]:22", "empty address"},
		{"ssh:a:b:c", "neither host[:port] nor an IPv6"},
		{"ssh:-oProxyCommand=x", "cannot start with '-'"},
		{"ssh:user@", "no host"},
		{"ssh:we b1", "white space"},
	}
	for _, tc := range bad {
		_, err := Parse(tc.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want error containing %q", tc.in, tc.want)
			continue
		}
		if !errors.Is(err, ErrBadTarget) || !errors.Is(err, errkind.ErrBadArgs) {
			t.Errorf("Parse(%q): %v is not ErrBadTarget and errkind.ErrBadArgs", tc.in, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %q, want it to contain %q", tc.in, err, tc.want)
		}
	}
	if _, err := Parse("foo:bar"); !strings.Contains(err.Error(), "(supported kinds: doas, docker, kubectl, local, lxc, lxd, machinectl, podman, setns, ssh, su, sudo)") {
		t.Errorf("unknown kind error does not list the supported kinds: %v", err)
	}
}

func mustParse(t *testing.T, s string) Target {
	t.Helper()
	tg, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestParseSSHAddr(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want SSHAddr
	}{
		{"web1", SSHAddr{Host: "web1"}},
		{"web1.example.com", SSHAddr{Host: "web1.example.com"}},
		{"alice@web1", SSHAddr{User: "alice", Host: "web1"}},
		{"web1:2222", SSHAddr{Host: "web1", Port: 2222}},
		{"alice@web1:22", SSHAddr{User: "alice", Host: "web1", Port: 22}},
		{"a@b@web1", SSHAddr{User: "a@b", Host: "web1"}},
		{"10.0.0.1:22", SSHAddr{Host: "10.0.0.1", Port: 22}},
		{"[::1]", SSHAddr{Host: "::1"}},
		{"[::1]:22", SSHAddr{Host: "::1", Port: 22}},
		{"root@[2001:db8::1]:2222", SSHAddr{User: "root", Host: "2001:db8::1", Port: 2222}},
		{"::1", SSHAddr{Host: "::1"}},
		{"alice@2001:db8::1", SSHAddr{User: "alice", Host: "2001:db8::1"}},
	} {
		got, err := ParseSSHAddr(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSSHAddr(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		// String round-trips.
		again, err := ParseSSHAddr(got.String())
		if err != nil || again != got {
			t.Errorf("ParseSSHAddr(%q.String() = %q) = %+v, %v", tc.in, got.String(), again, err)
		}
	}
}

// TestSplitHop covers the syntax the later kinds will use.
func TestSplitHop(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Hop
	}{
		{"local", Hop{Kind: "local"}},
		{"ssh:user@host:port", Hop{Kind: "ssh", Arg: "user@host:port"}},
		{"sudo:postgres", Hop{Kind: "sudo", Arg: "postgres"}},
		{"docker:app1", Hop{Kind: "docker", Arg: "app1"}},
		{"host", Hop{Kind: "ssh", Arg: "host"}},
		{"web1.example.com", Hop{Kind: "ssh", Arg: "web1.example.com"}},
		{"user@host:22", Hop{Kind: "ssh", Arg: "user@host:22"}},
		{"web1:22", Hop{Kind: "ssh", Arg: "web1:22"}},
		{"[::1]:22", Hop{Kind: "ssh", Arg: "[::1]:22"}},
		{"sudo:", Hop{Kind: "sudo"}},
		{"sudo:22", Hop{Kind: "sudo", Arg: "22"}},
	} {
		if got := splitHop(tc.in); got != tc.want {
			t.Errorf("splitHop(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestTargetChainString(t *testing.T) {
	h := Hop{Kind: "ssh", Arg: "web1"}
	if h.String() != "ssh:web1" || (Hop{Kind: "local"}).String() != "local" {
		t.Errorf("Hop.String: %q", h.String())
	}
}

// A ParseError says where and what: the hop's position and a kind that
// errors.Is can test.
func TestParseErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		hop  int
		kind error
	}{
		{"", 0, ErrEmpty},
		{"local,,web1", 2, ErrEmpty},
		{"web1,foo:bar", 2, ErrUnknownKind},
		{"local:x", 1, ErrArgument},
		{"web1,su:", 2, ErrArgument},
		{"web1,docker:@", 2, ErrArgument},
		{"kubectl:a/b/c/d", 1, ErrArgument},
		{"bastion,ssh:web1:0", 2, ErrAddress},
	} {
		_, err := Parse(tc.in)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, not a *ParseError", tc.in, err)
			continue
		}
		if pe.Raw != tc.in || pe.Hop != tc.hop || !errors.Is(err, tc.kind) || !errors.Is(err, ErrBadTarget) {
			t.Errorf("Parse(%q): %+v (%v); want hop %d, kind %v", tc.in, pe, err, tc.hop, tc.kind)
		}
		for _, other := range []error{ErrEmpty, ErrUnknownKind, ErrArgument, ErrAddress} {
			if other != tc.kind && errors.Is(err, other) {
				t.Errorf("Parse(%q): %v also matches %v", tc.in, err, other)
			}
		}
	}
}

// The caller's Options are all an SSH or become hop gets: the base SSH
// options with the hop's host, user and port on a copy, and the password
// callback's answer.
func TestStepsOptions(t *testing.T) {
	prompt := func(string) (string, error) { return "pw", nil }
	base := ssh.Options{User: "deploy", Port: 2200, ConfigFile: "/cfg", IdentityFiles: []string{"/k1"}, PasswordPrompt: prompt}
	var asked []string
	o := Options{SSH: base, BecomePassword: func(kind, user string) (string, error) {
		asked = append(asked, kind+":"+user)
		return "secret-" + kind, nil
	}}
	steps, err := mustParse(t, "web1,alice@web2:22,sudo,su:postgres,docker:app1").Steps(o)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range steps {
		names = append(names, s.Hop.String())
	}
	if want := []string{"ssh:web1", "ssh:alice@web2:22", "sudo", "su:postgres", "docker:app1"}; !reflect.DeepEqual(names, want) {
		t.Errorf("steps %q, want %q", names, want)
	}
	w1, ok1 := steps[0].Connector.(ssh.Options)
	w2, ok2 := steps[1].Connector.(ssh.Options)
	if !ok1 || !ok2 {
		t.Fatalf("ssh steps are %T, %T", steps[0].Connector, steps[1].Connector)
	}
	if w1.Host != "web1" || w1.User != "deploy" || w1.Port != 2200 || w1.ConfigFile != "/cfg" || w1.PasswordPrompt == nil {
		t.Errorf("web1 from the base: %+v", w1)
	}
	if w2.Host != "web2" || w2.User != "alice" || w2.Port != 22 {
		t.Errorf("the hop's user and port win over the base: %+v", w2)
	}
	w1.IdentityFiles[0] = "/changed"
	if w2.IdentityFiles[0] != "/k1" || base.IdentityFiles[0] != "/k1" {
		t.Errorf("the hops share the base's lists: %v %v", w2.IdentityFiles, base.IdentityFiles)
	}
	if s, ok := steps[2].Connector.(sudo.Options); !ok || s.User != "root" || s.Password != "secret-sudo" {
		t.Errorf("sudo step %#v", steps[2].Connector)
	}
	if s, ok := steps[3].Connector.(su.Options); !ok || s.User != "postgres" || s.Password != "secret-su" {
		t.Errorf("su step %#v", steps[3].Connector)
	}
	if d, ok := steps[4].Connector.(docker.Options); !ok || d.Container != "app1" {
		t.Errorf("docker step %#v", steps[4].Connector)
	}
	if want := []string{"sudo:root", "su:postgres"}; !reflect.DeepEqual(asked, want) {
		t.Errorf("become passwords asked for %q, want %q", asked, want)
	}

	// The callback's failure is the caller's, unchanged.
	boom := errors.New("no terminal")
	o.BecomePassword = func(string, string) (string, error) { return "", boom }
	if _, err := mustParse(t, "local,sudo").Steps(o); !errors.Is(err, boom) {
		t.Errorf("a failing password callback: %v", err)
	}
	// No callback: no password.
	steps, err = mustParse(t, "doas").Steps(Options{})
	if err != nil || len(steps) != 2 || steps[0].Hop != (Hop{Kind: "local"}) {
		t.Fatalf("doas alone: %+v, %v", steps, err)
	}
	if d := steps[1].Connector; d.Name() == "" {
		t.Errorf("doas connector %#v", d)
	}
	if k, err := mustParse(t, "kubectl:ns/pod").Connectors(Options{}); err != nil || k[1].(kubectl.Options).Namespace != "ns" {
		t.Errorf("kubectl:ns/pod: %#v, %v", k, err)
	}
}

// Chains that begin with the same hops share them, and a chain asked for
// by many goroutines at once is opened once.
func TestRoutesChains(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	r := NewRoutes(ctl)
	open := func(chain string) *spindle.Context {
		steps, err := mustParse(t, chain).Steps(Options{})
		if err != nil {
			t.Fatal(err)
		}
		cx, err := r.Open(ctx, steps)
		if err != nil {
			t.Fatal(err)
		}
		return cx
	}
	var wg sync.WaitGroup
	got := make([]*spindle.Context, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = open("local,local")
		}()
	}
	wg.Wait()
	for _, cx := range got[1:] {
		if cx != got[0] {
			t.Fatalf("local,local opened %d times", len(got))
		}
	}
	first := open("local")
	if pid := got[0].Hello().PID; pid == first.Hello().PID {
		t.Errorf("local,local is local's agent itself")
	}
	if err := sys.Ping(ctx, got[0]); err != nil {
		t.Fatal(err)
	}
	// Open, without Routes, makes a chain of its own.
	steps, _ := mustParse(t, "local").Steps(Options{})
	cx, err := Open(ctx, ctl, steps)
	if err != nil {
		t.Fatal(err)
	}
	if cx == first {
		t.Errorf("Open shared a route")
	}
}
