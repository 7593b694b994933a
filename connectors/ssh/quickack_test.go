package ssh

import (
	"io"
	"net"
	"testing"
)

// A TCP connection asks for quick ACKs after every read until started is
// called; other connections pass through untouched.
func TestQuickAck(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if c, _ := withQuickAck(a); c != a {
		t.Fatalf("a pipe was wrapped: %T", c)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		s.Write([]byte("xy"))
		s.Close()
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	c, started := withQuickAck(raw)
	q, ok := c.(*quickAckConn)
	if !ok {
		t.Fatalf("a TCP connection was not wrapped: %T", c)
	}
	if n := q.sets.Load(); n != 1 {
		t.Fatalf("%d quick-ACK requests when wrapped, want 1", n)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	if n := q.sets.Load(); n != 2 {
		t.Fatalf("%d quick-ACK requests after a read, want 2 (renewed after each read)", n)
	}
	started()
	if q.on.Load() > 0 {
		t.Fatal("still asking for quick ACKs after the agent started")
	}
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'y' {
		t.Fatalf("read after started: %q, %v", buf, err)
	}
	if n := q.sets.Load(); n != 2 {
		t.Fatalf("%d quick-ACK requests after started, want still 2", n)
	}
}
