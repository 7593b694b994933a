package ssh

import (
	"io"
	"net"
	"testing"

	"golang.org/x/sys/unix"
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
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	var v int
	q.rc.Control(func(fd uintptr) { v, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK) })
	if err != nil || v != 1 {
		t.Fatalf("TCP_QUICKACK after a read: %d, %v; want 1", v, err)
	}
	started()
	if q.on.Load() {
		t.Fatal("still asking for quick ACKs after the agent started")
	}
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'y' {
		t.Fatalf("read after started: %q, %v", buf, err)
	}
}
