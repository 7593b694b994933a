package tunnel_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/internal/testkit/localtest"
	"github.com/spindle-rpc/spindle/services/tunnel"
)

// upperEach serves every connection ln accepts as echoServer does, until
// Accept fails; it returns the error Accept ended with.
func upperEach(ln net.Listener) <-chan error {
	done := make(chan error, 1)
	go func() {
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			c, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				b, _ := io.ReadAll(c)
				c.Write([]byte(strings.ToUpper(string(b))))
			}()
		}
	}()
	return done
}

// ask connects to addr (the agent's listener), sends msg, half-closes and
// returns the answer.
func ask(t *testing.T, addr, msg string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, msg)
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestListen(t *testing.T) {
	ctx, cx := localtest.Dial(t)
	ln, err := tunnel.Listen(ctx, cx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if strings.HasSuffix(addr, ":0") || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("listening on %q; want 127.0.0.1 and the port the agent picked", addr)
	}
	served := upperEach(ln)
	if got := ask(t, addr, "to the agent's port"); got != "TO THE AGENT'S PORT" {
		t.Fatalf("got %q", got)
	}
	// More connections at once than Accept calls wait ahead.
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := fmt.Sprintf("connection %d", i)
			if got := ask(t, addr, msg); got != strings.ToUpper(msg) {
				t.Errorf("concurrent %d: %q", i, got)
			}
		}()
	}
	wg.Wait()
	big := strings.Repeat("y", 1<<20)
	if got := ask(t, addr, big); got != strings.ToUpper(big) {
		t.Fatalf("1 MiB: got %d bytes", len(got))
	}

	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
	// Close returns once the agent has stopped listening.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Close", addr)
	}
	// The port is free for another listener.
	again, err := tunnel.Listen(ctx, cx, "tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	again.Close()
}

// A connection accepted before Close goes on after it, and its
// RemoteAddr is the peer as the agent saw it.
func TestListenAcceptedOutlivesClose(t *testing.T) {
	ctx, cx := localtest.Dial(t)
	ln, err := tunnel.Listen(ctx, cx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.RemoteAddr().String() != client.LocalAddr().String() {
		t.Errorf("RemoteAddr %s, want the client's %s", c.RemoteAddr(), client.LocalAddr())
	}
	ln.Close()
	io.WriteString(client, "still here")
	client.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "still here" {
		t.Fatalf("after Close: %q, %v", b, err)
	}
	io.WriteString(c, "and back")
	c.(interface{ CloseWrite() error }).CloseWrite()
	if b, err := io.ReadAll(client); err != nil || string(b) != "and back" {
		t.Fatalf("back: %q, %v", b, err)
	}
}

// Losing the agent fails Accept with the reason, not net.ErrClosed.
func TestListenAgentLost(t *testing.T) {
	ctx, cx := localtest.Dial(t)
	second, err := cx.Connect(ctx, local.Options{ContextName: "second"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tunnel.Listen(ctx, second, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := upperEach(ln)
	second.Close()
	if err := <-served; err == nil || errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after the agent is gone: %v; want its loss", err)
	}
	if ln.Err() == nil {
		t.Fatal("Err is nil after the agent is gone")
	}
}

func TestListenFails(t *testing.T) {
	ctx, cx := localtest.Dial(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, err = tunnel.Listen(ctx, cx, "tcp", taken.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Fatalf("a port in use: %v; want that said, naming it", err)
	}
	if _, err := tunnel.Listen(ctx, cx, "udp", "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "udp") {
		t.Fatalf("udp: %v", err)
	}
	// Accept for a listener that does not exist.
	st, err := cx.Stream(ctx, tunnel.MethodAccept, &tunnel.AcceptArgs{ID: "nope"})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := st.Wait(nil); err == nil || !strings.Contains(err.Error(), "no listener") {
		t.Fatalf("Accept of an unknown listener: %v", err)
	}
}

// Unix sockets both ways: the agent dials one, and listens on one that is
// 0600, serves its user, and is gone after Close.
func TestUnixSockets(t *testing.T) {
	ctx, cx := localtest.Dial(t)
	dir := t.TempDir()

	srvPath := filepath.Join(dir, "server.sock")
	srv, err := net.Listen("unix", srvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	done := upperEach(srv)
	c, err := tunnel.Dial(ctx, cx, "unix", srvPath)
	if err != nil {
		t.Fatalf("dialling a unix socket: %v", err)
	}
	io.WriteString(c, "over a unix socket")
	c.CloseWrite()
	if b, err := io.ReadAll(c); err != nil || string(b) != "OVER A UNIX SOCKET" {
		t.Fatalf("through the agent to %s: %q, %v", srvPath, b, err)
	}
	c.Close()
	srv.Close()
	<-done

	lnPath := filepath.Join(dir, "agent.sock")
	ln, err := tunnel.Listen(ctx, cx, "unix", lnPath)
	if err != nil {
		t.Fatalf("listening on a unix socket: %v", err)
	}
	if fi, err := os.Stat(lnPath); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the agent's socket: %v, %v; want a socket, mode 0600", fi, err)
	}
	served := upperEach(ln)
	cl, err := net.Dial("unix", lnPath)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(cl, "to the agent's socket")
	cl.(*net.UnixConn).CloseWrite()
	if b, err := io.ReadAll(cl); err != nil || string(b) != "TO THE AGENT'S SOCKET" {
		t.Fatalf("through %s: %q, %v", lnPath, b, err)
	}
	cl.Close()
	ln.Close()
	<-served
	if _, err := os.Stat(lnPath); !os.IsNotExist(err) {
		t.Fatalf("%s outlives Close: %v", lnPath, err)
	}
	// An existing file is not replaced.
	os.WriteFile(lnPath, nil, 0o600)
	if _, err := tunnel.Listen(ctx, cx, "unix", lnPath); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("listening over an existing file: %v", err)
	}
}
