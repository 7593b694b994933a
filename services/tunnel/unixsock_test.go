package tunnel_test

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
	if os.Getuid() != 0 {
		t.Skip("!!! SKIPPED: needs root to connect as another user (make test runs as root)")
	}
	for _, tool := range []string{"/usr/bin/setpriv", "/usr/bin/python3"} {
		if _, err := os.Stat(tool); err != nil {
			t.Skipf("!!! SKIPPED: needs %s (util-linux, python3)", tool)
		}
	}
	dir, err := os.MkdirTemp("", "peercred-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
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
	out, err := exec.Command("/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"/usr/bin/python3", "-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1]); print(len(s.recv(16)))", path).CombinedOutput()
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
