package tunnel_test

import (
	stdctx "context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/internal/testkit/localtest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/services/tunnel"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(peerClientEnv); path != "" {
		os.Exit(peerClient(path))
	}
	if _, err := testagent.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// echoServer answers each connection with what it read, upper-cased
// once the client half-closes, then closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
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
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// roundTrip sends msg through a tunnel, half-closes, and returns what
// comes back until the far end closes.
func roundTrip(t *testing.T, ctx stdctx.Context, cx *spindle.Context, addr, msg string) string {
	t.Helper()
	c, err := tunnel.Dial(ctx, cx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDial(t *testing.T) {
	addr := echoServer(t)
	ctx, cx := localtest.Dial(t)
	if got := roundTrip(t, ctx, cx, addr, "through the agent"); got != "THROUGH THE AGENT" {
		t.Fatalf("got %q", got)
	}
	// A megabyte each way, then several tunnels at once.
	big := strings.Repeat("x", 1<<20)
	if got := roundTrip(t, ctx, cx, addr, big); got != strings.ToUpper(big) {
		t.Fatalf("1 MiB: got %d bytes", len(got))
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := fmt.Sprintf("tunnel %d", i)
			if got := roundTrip(t, ctx, cx, addr, msg); got != strings.ToUpper(msg) {
				t.Errorf("concurrent tunnel %d: %q", i, got)
			}
		}()
	}
	wg.Wait()

	// Through an intermediary: the second agent dials.
	second, err := cx.Connect(ctx, local.Options{ContextName: "second"})
	if err != nil {
		t.Fatal(err)
	}
	if got := roundTrip(t, ctx, second, addr, "two hops"); got != "TWO HOPS" {
		t.Fatalf("through a hop: %q", got)
	}
}

func TestDialFails(t *testing.T) {
	ctx, cx := localtest.Dial(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, err = tunnel.Dial(ctx, cx, "tcp", closed)
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), closed) {
		t.Fatalf("a closed port: %v; want it refused, naming %s", err, closed)
	}
	if _, err := tunnel.Dial(ctx, cx, "udp", closed); err == nil || !strings.Contains(err.Error(), "udp") {
		t.Fatalf("udp: %v", err)
	}
}

// Close ends the tunnel both ways even when the far end goes on talking
// after the client's half-close: the agent closes its TCP connection, so
// the firehose's writes fail and its handler returns (its cleanup waits
// for that, and would hang otherwise).
func TestCloseEndsBothWays(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c)
		buf := make([]byte, 32<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-handled
	})
	ctx, cx := localtest.Dial(t)
	c, err := tunnel.Dial(ctx, cx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "a request"); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("the firehose: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// With the agent still running, the firehose must stop.
	select {
	case <-handled:
	case <-time.After(30 * time.Second):
		t.Fatal("the far end still writes 30 s after Close: the agent kept the connection")
	}
}

// Close is a TCP close, not a reset: what was written before it reaches
// the far end whole, although the agent may still be writing it out when
// the cancellation arrives.
func TestCloseDeliversWhatWasSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- int(n)
	}()
	ctx, cx := localtest.Dial(t)
	c, err := tunnel.Dial(ctx, cx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	const size = 8 << 20
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := <-got; n != size {
		t.Fatalf("the far end read %d bytes of %d written before Close", n, size)
	}
}

// DialEarly: data written at once arrives once the agent has connected;
// a failed connect is the first Read's error, with the agent's reason.
func TestDialEarly(t *testing.T) {
	addr := echoServer(t)
	ctx, cx := localtest.Dial(t)
	c, err := tunnel.DialEarly(ctx, cx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "sent before the connect")
	c.CloseWrite()
	b, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(b) != "SENT BEFORE THE CONNECT" || c.Connected() != nil {
		t.Fatalf("early data: %q, %v (connected: %v)", b, err, c.Connected())
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	c, err = tunnel.DialEarly(ctx, cx, "tcp", closed)
	if err != nil {
		t.Fatalf("DialEarly returns before the connect: %v", err)
	}
	defer c.Close()
	io.WriteString(c, "into the void")
	if _, err := c.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("first Read after a refused connect: %v", err)
	}
	if err := c.Connected(); err == nil || !strings.Contains(err.Error(), closed) {
		t.Fatalf("Connected: %v; want the refusal naming %s", err, closed)
	}
}
