package tunnel_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit"
	"github.com/spindle-rpc/spindle/services/tunnel"
)

// A socket left by a killed run (nothing listens on it) is replaced; a
// live socket and a regular file are not touched.
func TestListenUnixPrivateStale(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays, as after a SIGKILL
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("no stale socket to test with: %v", err)
	}
	again, err := tunnel.ListenUnixPrivate(stale)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	c, err := net.Dial("unix", stale)
	if err != nil {
		t.Fatalf("the new listener does not answer: %v", err)
	}
	c.Close()

	// again is live: a second listener must not take its place.
	if _, err := tunnel.ListenUnixPrivate(stale); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("over a live socket: %v; want address in use", err)
	}
	again.Close()

	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("data"), 0o600)
	if _, err := tunnel.ListenUnixPrivate(plain); err == nil {
		t.Fatal("a regular file was replaced by a socket")
	}
	if b, _ := os.ReadFile(plain); string(b) != "data" {
		t.Fatalf("the regular file now holds %q", b)
	}
}

// The peer check: even while the socket's mode would let another user in
// (between the bind and the chmod, here made to last), their connection
// is closed and Accept returns the next one, from this user.
func TestListenUnixPrivateRefusesOtherUsers(t *testing.T) {
	testkit.NeedRoot(t, "connecting as another user (nobody)")
	dir, err := os.MkdirTemp("", "peercred-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	// The other user's client is this test binary (see peerClient), copied
	// where nobody can run it: go test's build directory is 0700.
	client := copyTestBinary(t, dir)
	path := filepath.Join(dir, "s.sock")
	ln, err := tunnel.ListenUnixPrivate(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(path, 0o666) // as if nobody had been quicker than the chmod
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	// nobody connects, and reads until the listener closes its connection
	// (or gives up after 10 s: a listener that let it in keeps it open).
	cmd := exec.Command(client)
	cmd.Env = append(os.Environ(), peerClientEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Fatalf("nobody's connection: %q, %v; want it closed at once (0 bytes)", out, err)
	}
	mine, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	c := <-accepted
	if c == nil {
		t.Fatal("Accept failed")
	}
	defer c.Close()
	c.Write([]byte("yours"))
	b := make([]byte, 5)
	if _, err := io.ReadFull(mine, b); err != nil || string(b) != "yours" {
		t.Fatalf("Accept returned another connection than this user's: %q, %v", b, err)
	}
}

// peerClientEnv, set to a socket's path, makes the test binary (see
// TestMain) connect to that socket, read until it is closed or 10 s
// passed, and print how many bytes it read.
const peerClientEnv = "SPINDLE_TEST_PEER_CLIENT"

func peerClient(path string) int {
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer client:", err)
		return 1
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 16))
	if err != nil && err != io.EOF {
		fmt.Fprintln(os.Stderr, "peer client:", err)
		return 1
	}
	fmt.Println(n)
	return 0
}

// copyTestBinary copies this test binary into dir, executable by anyone.
func copyTestBinary(t *testing.T, dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "client")
	if err := os.WriteFile(out, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}
