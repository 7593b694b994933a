package ssh

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"go.uber.org/zap"
)

func TestExpandProxyCommand(t *testing.T) {
	s := &settings{display: "web", hostname: "10.0.0.5", port: 2222, user: "deploy"}
	for _, c := range []struct{ in, want, err string }{
		{in: "ssh -W %h:%p -q bastion", want: "ssh -W 10.0.0.5:2222 -q bastion"},
		{in: "connect %n as %r (key %k)", want: "connect web as deploy (key web-alias)"},
		{in: "printf 100%%", want: "printf 100%"},
		{in: "no tokens", want: "no tokens"},
		{in: "nc %h %x", err: "unknown token %x"},
		{in: "nc %h %", err: "lone %"},
	} {
		got, err := expandProxyCommand(c.in, s, "web-alias")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one saying %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q → %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// proxyOptions reach server through the test binary acting as netcat,
// started by ProxyCommand with the tokens for the address; mark is the
// file the netcat creates first.
func proxyOptions(t *testing.T, server *testServer) (o Options, mark string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o = Options{Host: "127.0.0.1", Port: server.port, User: "tester", Password: "pw", ConfigFile: "none",
		KnownHostsFiles: []string{knownHosts(t, server)}, ConnectTimeout: 20 * time.Second,
		ProxyCommand: "env " + netcatEnv + "=%h:%p " + netcatMarkEnv + "=" + dir + "/ran-%n-%r " + self}
	return o, filepath.Join(dir, "ran-127.0.0.1-tester")
}

func TestProxyCommand(t *testing.T) {
	isolate(t)
	server := newTestServer(t, passwordServer("pw"), false)
	o, mark := proxyOptions(t, server)
	l, err := connect(context.Background(), o, zap.NewNop(), 0)
	if err != nil {
		t.Fatalf("through ProxyCommand: %v", err)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("the proxy command did not run with the expanded tokens: %v", err)
	}
	if n := l.client.RemoteAddr().Network(); n != "proxycommand" {
		t.Errorf("the connection's network is %q, want proxycommand", n)
	}
	if _, _, err := l.client.SendRequest("keepalive@openssh.com", true, nil); err != nil {
		t.Fatalf("request over the proxied connection: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestProxyCommandFails(t *testing.T) {
	isolate(t)
	server := newTestServer(t, passwordServer("pw"), false)
	o, _ := proxyOptions(t, server)

	// A command that gives up names itself, its status and its words.
	o.ProxyCommand = "sh -c 'echo no route to %h >&2; exit 7'"
	_, err := connect(context.Background(), o, zap.NewNop(), 0)
	if err == nil {
		t.Fatal("a failing ProxyCommand connected")
	}
	for _, want := range []string{"ProxyCommand", "exited with status 7", "no route to 127.0.0.1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	// One that never connects is bounded by ConnectTimeout, and hung up.
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	o.ProxyCommand = "sh -c 'echo $$ > " + pidFile + "; exec sleep 600'"
	o.ConnectTimeout = 300 * time.Millisecond
	_, err = connect(context.Background(), o, zap.NewNop(), 0)
	if err == nil || !errors.Is(err, errkind.ErrTimeout) || !strings.Contains(err.Error(), "ProxyCommand") {
		t.Fatalf("hanging ProxyCommand: %v; want a timeout naming the ProxyCommand", err)
	}
	checkGone := func(what string) {
		t.Helper()
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("the %s proxy command (pid %d) still runs after the timeout", what, pid)
		}
	}
	checkGone("hanging")
	// One that ignores the hangup is killed.
	o.ProxyCommand = "sh -c 'echo $$ > " + pidFile + "; trap \"\" HUP; exec sleep 600'"
	if _, err = connect(context.Background(), o, zap.NewNop(), 0); err == nil {
		t.Fatal("connected through sleep")
	}
	checkGone("hangup-ignoring")

	// A bad token is refused before anything runs.
	o.ProxyCommand = "nc %h %z"
	if _, err = connect(context.Background(), o, zap.NewNop(), 0); err == nil || !strings.Contains(err.Error(), "%z") {
		t.Fatalf("bad token: %v", err)
	}
}

// ProxyJump and ProxyCommand compete as in ssh; a config file's
// ProxyCommand is read, expanded, and overridden by Options.
func TestProxyCommandSettings(t *testing.T) {
	isolate(t)
	cfg := filepath.Join(t.TempDir(), "config")
	writeFile(t, cfg, "Host pc\n  HostName 10.1.2.3\n  User deploy\n  Port 2200\n  ProxyCommand nc -X 5 -x socks:1080 %h %p\n")
	cases := []struct {
		name          string
		o             Options
		command, jump string
	}{
		{"config", Options{Host: "pc", ConfigFile: cfg}, "nc -X 5 -x socks:1080 10.1.2.3 2200", ""},
		{"option", Options{Host: "pc", ConfigFile: cfg, ProxyCommand: "ssh -W %h:%p gw"}, "ssh -W 10.1.2.3:2200 gw", ""},
		{"none", Options{Host: "pc", ConfigFile: cfg, ProxyCommand: "none"}, "", ""},
		{"jump first", Options{Host: "pc", ConfigFile: cfg, ProxyJump: "gw"}, "", "gw"},
	}
	check := func(how string) {
		for _, c := range cases {
			s, err := c.o.settle(context.Background(), zap.NewNop())
			if err != nil {
				t.Fatalf("%s, %s: %v", how, c.name, err)
			}
			if s.proxyCommand != c.command || s.proxyJump != c.jump {
				t.Errorf("%s, %s: ProxyCommand %q, ProxyJump %q; want %q, %q", how, c.name, s.proxyCommand, s.proxyJump, c.command, c.jump)
			}
		}
	}
	check("ssh -G")

	// A hop started by an agent ignores it, as it ignores ProxyJump: the
	// chain of agents is its route.
	hop, _, err := Options{Host: "pc", ConfigFile: cfg}.Delegate(context.Background(), zap.NewNop())
	if err != nil {
		t.Fatalf("delegating a hop whose config has a ProxyCommand: %v", err)
	}
	if h := hop.(*Hop); h.Addr != "10.1.2.3:2200" {
		t.Errorf("delegated hop dials %s, want 10.1.2.3:2200", h.Addr)
	}
	old := sshBinary
	sshBinary = "" // ssh_config read by the fallback parser
	defer func() { sshBinary = old }()
	check("parsed")
}
