package integration_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
)

// privateKeysUnder lists the files below dir that hold a private key.
func privateKeysUnder(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err != nil || fi.Size() > 1<<20 {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "PRIVATE KEY") {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// TestSSHHopThroughAgent: the agent on one host makes the SSH connection
// to the next with the controller's key (signed over the bus) and the
// controller's known_hosts; no private key ever lands on either host.
func TestSSHHopThroughAgent(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/bash")
	ctx, cx := throughFirst(t, first)

	hop, err := cx.Connect(ctx, second.opts())
	if err != nil {
		t.Fatalf("ssh hop through %s: %v", cx.Name(), err)
	}
	if want := "ssh:127.0.0.1 → ssh:127.0.0.1"; hop.Name() != want {
		t.Errorf("hop name %q, want %q", hop.Name(), want)
	}
	info, err := sys.Info(ctx, hop)
	if err != nil || info.UID != second.u.UID {
		t.Fatalf("behind the hop: %+v, %v; want uid %d", info, err, second.u.UID)
	}
	// The far agent's parent is an sshd session, not the first agent:
	// the first agent really made an SSH connection.
	if got := run(t, hop, "sh", "-c", `p=$(cut -d" " -f4 /proc/$PPID/stat); cat /proc/$p/comm`); !strings.HasPrefix(got, "sshd") {
		t.Errorf("far agent's parent is %q, want sshd", got)
	}
	for _, u := range []string{first.u.Home, second.u.Home} {
		if keys := privateKeysUnder(t, u); len(keys) > 0 {
			t.Errorf("private key files on a target: %v", keys)
		}
	}
	if !strings.Contains(logText(first.logs), "signing for an ssh hop") {
		t.Errorf("the controller never signed for the hop; logs:\n%s", logText(first.logs))
	}
	// The same hop again is the running child.
	again, err := cx.Connect(ctx, second.opts())
	if err != nil || again != hop {
		t.Errorf("second Connect: %v, %v; want the running hop", again, err)
	}
}

// TestSSHHopHostKeys: the hop's host key is checked against the
// controller's known_hosts, under the controller's policy.
func TestSSHHopHostKeys(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/sh")
	ctx, cx := throughFirst(t, first)

	empty := filepath.Join(t.TempDir(), "known_hosts")
	o := second.opts()
	o.KnownHostsFiles = []string{empty}
	_, err := cx.Connect(ctx, o)
	if !errors.Is(err, spindle.ErrHostKey) || !strings.Contains(err.Error(), "not known") {
		t.Fatalf("unknown host key through a hop: %v, want ErrHostKey naming it", err)
	}
	if !strings.Contains(err.Error(), "ssh:127.0.0.1 → ssh:127.0.0.1") {
		t.Errorf("error does not name the chain: %v", err)
	}
	o.HostKeyPolicy = ssh.HostKeyAcceptNew
	hop, err := cx.Connect(ctx, o)
	if err != nil {
		t.Fatalf("accept-new through a hop: %v", err)
	}
	b, _ := os.ReadFile(empty)
	if !strings.Contains(string(b), "[127.0.0.1]:"+strconv.Itoa(second.s.Port)) {
		t.Fatalf("accept-new did not record the key in the controller's file: %q", b)
	}
	hop.Close()

	// A changed key is refused whatever the policy.
	second.s.RestartWithNewHostKey(t)
	_, err = cx.Connect(ctx, o)
	if !errors.Is(err, spindle.ErrHostKey) || !strings.Contains(err.Error(), "CHANGED") {
		t.Fatalf("changed host key through a hop: %v", err)
	}
}

// TestSSHHopAsks: a hop started by an agent puts the controller's
// questions (an unknown host key under ssh's default "ask", a password)
// to the controller's user, and the user's time does not count against
// the ConnectTimeout whose timer runs on the agent.
func TestSSHHopAsks(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/sh")
	ctx, cx := throughFirst(t, first)

	kh := filepath.Join(t.TempDir(), "known_hosts")
	o := second.opts()
	o.KnownHostsFiles = []string{kh}
	o.HostKeyPolicy = ssh.HostKeyAsk
	o.IdentityFiles = nil
	o.PreferredAuthentications = []string{"password"}
	o.ConnectTimeout = time.Second
	// A user slower than ConnectTimeout at each question. The sleeps are
	// the user's, not synchronisation: the test is that they are allowed.
	var questions []string
	var mu sync.Mutex
	o.HostKeyPrompt = func(q string) (string, error) {
		mu.Lock()
		questions = append(questions, q)
		mu.Unlock()
		time.Sleep(1500 * time.Millisecond)
		return "yes", nil
	}
	o.PasswordPrompt = func(p string) (string, error) {
		mu.Lock()
		questions = append(questions, p)
		mu.Unlock()
		time.Sleep(1500 * time.Millisecond)
		return second.u.Password, nil
	}
	hop, err := cx.Connect(ctx, o)
	if err != nil {
		t.Fatalf("hop with a host-key question and a password, each slower than ConnectTimeout: %v", err)
	}
	if info, err := sys.Info(ctx, hop); err != nil || info.UID != second.u.UID {
		t.Fatalf("behind the hop: %+v, %v", info, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(questions) != 2 || !strings.Contains(questions[0], "authenticity of host") || !strings.Contains(questions[1], "password") {
		t.Fatalf("questions %q; want the host key, then the password", questions)
	}
	if b, _ := os.ReadFile(kh); !strings.Contains(string(b), "[127.0.0.1]:"+strconv.Itoa(second.s.Port)) {
		t.Fatalf("the accepted key is not in the controller's known_hosts: %q", b)
	}

	// A third host, and the user says no: refused, nothing recorded.
	third := newTarget(t, "/bin/sh")
	o3 := third.opts()
	o3.KnownHostsFiles = []string{kh}
	o3.HostKeyPolicy = ssh.HostKeyAsk
	o3.HostKeyPrompt = func(string) (string, error) { return "no", nil }
	if _, err := cx.Connect(ctx, o3); !errors.Is(err, spindle.ErrHostKey) || !strings.Contains(err.Error(), "not accepted") {
		t.Fatalf("host key refused by the user: %v; want ErrHostKey, not accepted", err)
	}
	if b, _ := os.ReadFile(kh); strings.Contains(string(b), "[127.0.0.1]:"+strconv.Itoa(third.s.Port)) {
		t.Fatalf("a refused key was recorded: %q", b)
	}
}

// TestSSHHopAuthFailure: a key the far host does not accept fails the hop
// with ErrAuth naming it, and the first agent stays usable.
func TestSSHHopAuthFailure(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/sh")
	ctx, cx := throughFirst(t, first)
	o := second.opts()
	o.IdentityFiles = []string{first.key.Path} // not authorized on second
	_, err := cx.Connect(ctx, o)
	if !errors.Is(err, spindle.ErrAuth) {
		t.Fatalf("wrong key through a hop: %v, want ErrAuth", err)
	}
	if _, err := sys.Info(ctx, cx); err != nil {
		t.Fatalf("first agent after a failed hop: %v", err)
	}
}

// sshdOf names the sshd process that serves a hop's connection: the
// parent of its agent.
func sshdOf(t *testing.T, hop *spindle.Context) string {
	t.Helper()
	return strings.TrimSpace(run(t, hop, "sh", "-c", `cut -d" " -f4 /proc/$PPID/stat`))
}

// TestSSHHopsShareConnections: hops that one agent starts to the same
// user@host:port share SSH connections, each hop a session and an agent of
// its own; a server's MaxSessions makes the agent dial another
// connection; OwnConnection opts out; and once the last hop on a
// connection is closed, so is the connection.
func TestSSHHopsShareConnections(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTargetWith(t, "/bin/sh", sshtest.Options{Extra: []string{"MaxSessions 2"}})
	ctx, cx := throughFirst(t, first)

	const n = 5
	hops := make([]*spindle.Context, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := second.opts()
			o.ContextName = fmt.Sprintf("web%d", i)
			hops[i], errs[i] = cx.Connect(ctx, o)
		}()
	}
	wg.Wait()
	perConn := map[string]int{}
	for i, hop := range hops {
		if errs[i] != nil {
			t.Fatalf("hop %d: %v\nsshd log:\n%s", i, errs[i], second.s.Log())
		}
		perConn[sshdOf(t, hop)]++
	}
	// MaxSessions 2: five hops need three connections, and sharing
	// means no more than that.
	if len(perConn) != 3 {
		t.Errorf("5 hops used %d connections %v, want 3 (2 sessions each under MaxSessions 2)", len(perConn), perConn)
	}
	for c, k := range perConn {
		if k > 2 {
			t.Errorf("connection %s carries %d hops, above MaxSessions 2", c, k)
		}
	}

	o := second.opts()
	o.ContextName = "own"
	o.OwnConnection = true
	own, err := cx.Connect(ctx, o)
	if err != nil {
		t.Fatalf("hop with OwnConnection: %v", err)
	}
	ownConn := sshdOf(t, own)
	if perConn[ownConn] != 0 {
		t.Errorf("OwnConnection hop shares connection %s with the others", ownConn)
	}

	// Closing every hop closes their connections: the server is left
	// with the own hop's only.
	for _, hop := range hops {
		if err := hop.Close(); err != nil {
			t.Fatalf("close %s: %v", hop.Name(), err)
		}
	}
	for c := range perConn {
		pid, err := strconv.Atoi(c)
		if err != nil {
			t.Fatal(err)
		}
		waitGone(t, pid) // the sshd process of a connection whose hops are all closed
	}
	if got := sshdOf(t, own); got != ownConn {
		t.Errorf("the own hop moved from %s to %s", ownConn, got)
	}
}

// TestSSHHopSharedConnectionDies: when the connection that two hops
// share dies, both fail at once with ErrDisconnected naming their own
// hop, and the next hop to that host dials a new connection.
func TestSSHHopSharedConnectionDies(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/sh")
	ctx, cx := throughFirst(t, first)

	var hops []*spindle.Context
	for _, name := range []string{"web-a", "web-b"} {
		o := second.opts()
		o.ContextName = name
		hop, err := cx.Connect(ctx, o)
		if err != nil {
			t.Fatalf("hop %s: %v", name, err)
		}
		hops = append(hops, hop)
	}
	conn := sshdOf(t, hops[0])
	if other := sshdOf(t, hops[1]); other != conn {
		t.Fatalf("the hops use connections %s and %s, want one shared", conn, other)
	}
	// Both hops wait in a call when the server's end of their connection
	// is killed.
	pid, err := strconv.Atoi(conn)
	if err != nil {
		t.Fatal(err)
	}
	// Each call says it is running through a FIFO that this test reads.
	dir := sshtest.TempDir(t, "fifo")
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "running")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fifo, 0o666); err != nil { // whatever the umask
		t.Fatal(err)
	}
	errs := make(chan error, len(hops))
	for _, hop := range hops {
		go func() {
			_, err := exec.Run(ctx, hop, exec.Cmd{Shell: "echo x > " + fifo + "; exec sleep 60"})
			errs <- err
		}()
	}
	ready, err := os.OpenFile(fifo, os.O_RDWR, 0) // RDWR: never EOF between writers
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	if _, err := io.ReadFull(ready, make([]byte, 2*len("x\n"))); err != nil {
		t.Fatalf("waiting for both calls to start: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the connection's sshd %d: %v", pid, err)
	}
	for range hops {
		err := <-errs
		if !errors.Is(err, spindle.ErrDisconnected) || !strings.Contains(err.Error(), "web-") {
			t.Errorf("call on a hop whose connection died: %v; want ErrDisconnected naming the hop", err)
		}
	}
	o := second.opts()
	o.ContextName = "web-c"
	hop, err := cx.Connect(ctx, o)
	if err != nil {
		t.Fatalf("a hop after the shared connection died: %v", err)
	}
	if got := sshdOf(t, hop); got == conn {
		t.Fatalf("the new hop runs on the dead connection's process %s", got)
	}
}
