package tunnel_test

import (
	"net"
	"os"
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
