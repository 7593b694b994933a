package agentfwd_test

import (
	stdctx "context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/internal/testkit/localtest"
	"github.com/spindle-rpc/spindle/internal/testkit/sshagenttest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/services/agentfwd"
	"github.com/spindle-rpc/spindle/services/exec"
	"go.uber.org/goleak"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

func TestMain(m *testing.M) {
	if _, err := testagent.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// keyAgent serves an ssh-agent holding one new key on a Unix socket (the
// controller's ssh-agent) until t ends.
func keyAgent(t *testing.T) (sock string, ring agent.Agent, pub gossh.PublicKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ring = agent.NewKeyring()
	if err := ring.Add(agent.AddedKey{PrivateKey: priv, Comment: "controller key"}); err != nil {
		t.Fatal(err)
	}
	sock = filepath.Join(t.TempDir(), "agent.sock")
	sshagenttest.Serve(t, sock, ring)
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return sock, ring, signer.PublicKey()
}

func authSock(t *testing.T, ctx stdctx.Context, cx *spindle.Context, cmd exec.Cmd) string {
	t.Helper()
	cmd.Shell = `printf %s "$SSH_AUTH_SOCK"`
	res, err := exec.Run(ctx, cx, cmd)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("reading SSH_AUTH_SOCK: %v %+v", err, res)
	}
	return string(res.Stdout)
}

func TestForwarding(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "") // the agent's own environment has none
	sock, ring, pub := keyAgent(t)
	ctx, cx := localtest.Dial(t)
	if got := authSock(t, ctx, cx, exec.Cmd{}); got != "" {
		t.Fatalf("SSH_AUTH_SOCK %q before forwarding", got)
	}

	f, err := agentfwd.Start(ctx, cx, sock)
	if err != nil {
		t.Fatal(err)
	}
	if got := authSock(t, ctx, cx, exec.Cmd{}); got != f.Path || got == "" {
		t.Fatalf("commands see SSH_AUTH_SOCK %q, want the forwarded %q", got, f.Path)
	}
	if got := authSock(t, ctx, cx, exec.Cmd{Unset: []string{"SSH_AUTH_SOCK"}}); got != "" {
		t.Errorf("Unset SSH_AUTH_SOCK still gives %q", got)
	}
	fi, err := os.Stat(filepath.Dir(f.Path))
	if err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Getuid()) {
		t.Fatalf("the socket's directory: %v %v; want ours, 0700", fi.Mode(), err)
	}

	// A client on the target: list and sign reach the controller's agent.
	conn, err := net.Dial("unix", f.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := agent.NewClient(conn)
	keys, err := client.List()
	if err != nil || len(keys) != 1 || keys[0].Comment != "controller key" {
		t.Fatalf("List through the forwarding: %v, %v", keys, err)
	}
	data := []byte("sign me")
	sig, err := client.Sign(pub, data)
	if err != nil {
		t.Fatalf("Sign through the forwarding: %v", err)
	}
	if err := pub.Verify(data, sig); err != nil {
		t.Fatalf("the signature does not verify: %v", err)
	}
	// Anything else is refused, whatever the target sends.
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	if err := client.Add(agent.AddedKey{PrivateKey: other}); err == nil {
		t.Error("adding a key through the forwarding succeeded")
	}
	if err := client.RemoveAll(); err == nil {
		t.Error("removing keys through the forwarding succeeded")
	}
	if err := client.Lock([]byte("pw")); err == nil {
		t.Error("locking the agent through the forwarding succeeded")
	}
	if keys, _ := ring.List(); len(keys) != 1 {
		t.Errorf("the controller's agent holds %d keys, want its one", len(keys))
	}
	if n := f.Refused(); n != 3 {
		t.Errorf("Refused() = %d, want 3", n)
	}

	// One forwarding per agent.
	if _, err := agentfwd.Start(ctx, cx, sock); err == nil || !strings.Contains(err.Error(), "already forwards") {
		t.Errorf("a second forwarding: %v", err)
	}

	// Close removes the socket; later commands have no agent.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(f.Path)); !os.IsNotExist(err) {
		t.Errorf("the socket's directory outlives the forwarding: %v", err)
	}
	if _, err := client.List(); err == nil {
		t.Error("a client still reaches the agent after Close")
	}
	if got := authSock(t, ctx, cx, exec.Cmd{}); got != "" {
		t.Errorf("SSH_AUTH_SOCK %q after Close", got)
	}

	// And forwarding can start again.
	f2, err := agentfwd.Start(ctx, cx, sock)
	if err != nil {
		t.Fatal(err)
	}
	f2.Close()
}

func TestForwardingNeedsASocket(t *testing.T) {
	ctx, cx := localtest.Dial(t)
	if _, err := agentfwd.Start(ctx, cx, ""); err == nil || !strings.Contains(err.Error(), "SSH_AUTH_SOCK") {
		t.Fatalf("no socket: %v", err)
	}
	// An agent that is not there: requests fail, the forwarding stays.
	f, err := agentfwd.Start(ctx, cx, filepath.Join(t.TempDir(), "gone.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	conn, err := net.Dial("unix", f.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := agent.NewClient(conn).List(); err == nil {
		t.Error("List succeeded with no ssh-agent behind the forwarding")
	}
}

// Through an intermediary (a second agent started by the first), the
// forwarding reaches the last hop only.
func TestForwardingThroughAHop(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	sock, _, _ := keyAgent(t)
	ctx, first := localtest.Dial(t)
	second, err := first.Connect(ctx, local.Options{ContextName: "second"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := agentfwd.Start(ctx, second, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := authSock(t, ctx, second, exec.Cmd{}); got != f.Path {
		t.Fatalf("the hop's commands see SSH_AUTH_SOCK %q, want %q", got, f.Path)
	}
	if got := authSock(t, ctx, first, exec.Cmd{}); got != "" {
		t.Errorf("the intermediary's commands see SSH_AUTH_SOCK %q, want none", got)
	}
	conn, err := net.Dial("unix", f.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if keys, err := agent.NewClient(conn).List(); err != nil || len(keys) != 1 {
		t.Fatalf("List through the hop: %v, %v", keys, err)
	}
}
