package ssh

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/sshagenttest"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

func TestAgentSocket(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "/env/auth.sock")
	t.Setenv("OTHER_SOCK", "/env/other.sock")
	for in, want := range map[string]string{
		"":              "/env/auth.sock",
		"SSH_AUTH_SOCK": "/env/auth.sock",
		"none":          "",
		"$OTHER_SOCK":   "/env/other.sock",
		"/run/a.sock":   "/run/a.sock",
	} {
		if got := agentSocket(in); got != want {
			t.Errorf("agentSocket(%q) = %q, want %q", in, got, want)
		}
	}
}

// serveAgent serves a keyring holding key on a Unix socket until t ends.
func serveAgent(t *testing.T, path string, key any) {
	t.Helper()
	ring := agent.NewKeyring()
	if err := ring.Add(agent.AddedKey{PrivateKey: key}); err != nil {
		t.Fatal(err)
	}
	sshagenttest.Serve(t, path, ring)
}

// IdentityAgent picks the ssh-agent, as in ssh: a socket path (with ~,
// ${VAR} and tokens), "$VAR", "SSH_AUTH_SOCK" or "none"; Options override
// the config.
func TestIdentityAgent(t *testing.T) {
	isolate(t) // SSH_AUTH_SOCK is empty: only IdentityAgent finds the key
	dir := t.TempDir()
	_, priv, pub := keyFiles(t, dir, "id_agent", "")
	sock := filepath.Join(dir, "agent.sock")
	serveAgent(t, sock, priv)
	srv := newTestServer(t, &gossh.ServerConfig{
		PublicKeyCallback: func(c gossh.ConnMetadata, k gossh.PublicKey) (*gossh.Permissions, error) {
			if string(k.Marshal()) == string(pub.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("no")
		},
	}, false)
	kh := knownHosts(t, srv)
	t.Setenv("SPINDLE_TEST_AGENT_DIR", dir)
	t.Setenv("SPINDLE_TEST_AGENT_SOCK", sock)
	cfg := filepath.Join(dir, "config")
	common := "  HostName 127.0.0.1\n  Port " + strconv.Itoa(srv.port) + "\n  User tester\n  UserKnownHostsFile " + kh + "\n"
	writeFile(t, cfg, "Host path\n"+common+"  IdentityAgent ${SPINDLE_TEST_AGENT_DIR}/agent.sock\n"+
		"Host var\n"+common+"  IdentityAgent $SPINDLE_TEST_AGENT_SOCK\n"+
		"Host none\n"+common+"  IdentityAgent none\n"+
		"Host env\n"+common)
	try := func(how string, o Options, wantOK bool) {
		t.Helper()
		o.ConfigFile = cfg
		l, err := connect(context.Background(), o, zap.NewNop(), 0)
		if wantOK {
			if err != nil {
				t.Errorf("%s, %s: %v", how, o.Host, err)
				return
			}
			l.Close()
			return
		}
		if err == nil {
			l.Close()
			t.Errorf("%s, %s: connected without the agent", how, o.Host)
		} else if !errors.Is(err, errkind.ErrAuth) {
			t.Errorf("%s, %s: %v; want an authentication failure", how, o.Host, err)
		}
	}
	check := func(how string) {
		try(how, Options{Host: "path"}, true)
		try(how, Options{Host: "var"}, true)
		try(how, Options{Host: "env"}, false) // $SSH_AUTH_SOCK is empty
		t.Setenv("SSH_AUTH_SOCK", sock)
		try(how, Options{Host: "env"}, true)
		try(how, Options{Host: "none"}, false)
		try(how, Options{Host: "none", IdentityAgent: "$SPINDLE_TEST_AGENT_SOCK"}, true)
		try(how, Options{Host: "path", IdentityAgent: "none"}, false)
		t.Setenv("SSH_AUTH_SOCK", "")
	}
	check("ssh -G")
	old := sshBinary
	sshBinary = "" // ssh_config read by the fallback parser
	defer func() { sshBinary = old }()
	check("parsed")
}

// ForwardAgent resolves to the agent ssh would forward: IdentityAgent's
// (else $SSH_AUTH_SOCK's) for yes, the named one for a socket, none for
// no; Options override the config.
func TestAgentToForward(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	t.Setenv("SSH_AUTH_SOCK", "/env/auth.sock")
	t.Setenv("SPINDLE_TEST_FWD_SOCK", "/env/fwd.sock")
	cfg := filepath.Join(dir, "config")
	writeFile(t, cfg, "Host yes\n  ForwardAgent yes\n"+
		"Host yes-ia\n  ForwardAgent yes\n  IdentityAgent /run/ia.sock\n"+
		"Host path\n  ForwardAgent ${HOME}/fwd.sock\n"+
		"Host var\n  ForwardAgent $SPINDLE_TEST_FWD_SOCK\n"+
		"Host no\n  ForwardAgent no\n"+
		"Host default\n")
	home := os.Getenv("HOME")
	cases := []struct {
		o    Options
		want string
		// ssh_config's fallback parser reads ForwardAgent as yes or no
		// only, and says so rather than guess.
		parserRefuses bool
	}{
		{Options{Host: "yes"}, "/env/auth.sock", false},
		{Options{Host: "yes-ia"}, "/run/ia.sock", false},
		{Options{Host: "path"}, home + "/fwd.sock", true},
		{Options{Host: "var"}, "/env/fwd.sock", true},
		{Options{Host: "no"}, "", false},
		{Options{Host: "default"}, "", false},
		{Options{Host: "default", ForwardAgent: "yes"}, "/env/auth.sock", false},
		{Options{Host: "yes", ForwardAgent: "no"}, "", false},
		{Options{Host: "no", ForwardAgent: "$SPINDLE_TEST_FWD_SOCK"}, "/env/fwd.sock", false},
	}
	check := func(how string) {
		for _, c := range cases {
			c.o.ConfigFile, c.o.User = cfg, "u"
			got, err := c.o.AgentToForward(context.Background(), nil)
			if how == "fallback parser" && c.parserRefuses {
				if err == nil || !strings.Contains(err.Error(), "ForwardAgent") {
					t.Errorf("%s, %s: %q, %v; want an error naming ForwardAgent", how, c.o.Host, got, err)
				}
				continue
			}
			if err != nil || got != c.want {
				t.Errorf("%s, %s (ForwardAgent option %q): %q, %v; want %q", how, c.o.Host, c.o.ForwardAgent, got, err, c.want)
			}
		}
	}
	bothParsers(t, check)
}
