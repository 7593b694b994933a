package latency

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer echoes every connection until the client half-closes, then
// closes. It stops when the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
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
				io.Copy(c, c) //nolint:errcheck // the test reads what came back
			}()
		}
	}()
	return ln.Addr().String()
}

func startProxy(t *testing.T, upstream string, oneWay time.Duration) *Proxy {
	t.Helper()
	p, err := Start(upstream, oneWay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// dial connects through p and checks one echo round trip.
func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 'x' {
		t.Fatalf("no echo through the proxy: %q, %v", b, err)
	}
	return c
}

// A round trip through the proxy takes at least twice the one-way delay,
// and the bytes come back as they were sent.
func TestDelaysEachDirection(t *testing.T) {
	const oneWay = 25 * time.Millisecond
	p := startProxy(t, echoServer(t), oneWay)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		msg := []byte{'p', 'i', 'n', 'g', byte('0' + i)}
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if rtt := time.Since(t0); rtt < 2*oneWay {
			t.Errorf("round trip %d took %v, less than the %v the proxy adds", i, rtt, 2*oneWay)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("echo %q, want %q", got, msg)
		}
	}
}

// Megabytes in flight both ways arrive whole and in order, a half-close
// reaches the far end (the echo server then closes), and the proxy counts
// every byte each way.
func TestStreamsWholeAndInOrder(t *testing.T) {
	p := startProxy(t, echoServer(t), time.Millisecond)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := make([]byte, 4<<20)
	rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(c) // ends when the echo server closes after our EOF
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes back, want the %d sent, in order", len(got), len(data))
	}
	if up, down := p.Forwarded(); up != int64(len(data)) || down != int64(len(data)) {
		t.Errorf("Forwarded() = %d up, %d down; want %d each way", up, down, len(data))
	}
}

// Each reply that follows a request is one turn; a big echo, whose
// bytes cross in many reads each way, counts at least one.
func TestCountsTurns(t *testing.T) {
	p := startProxy(t, echoServer(t), 0)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(msg []byte) {
		t.Helper()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, len(msg))); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		roundTrip([]byte("ping"))
	}
	if got := p.Turns(); got != 5 {
		t.Errorf("after 5 request/response pairs Turns() = %d, want 5", got)
	}
	roundTrip(make([]byte, 1<<20)) // many reads each way, one turn or more
	if got := p.Turns(); got < 6 {
		t.Errorf("after a 1 MiB echo Turns() = %d, want at least 6", got)
	}
}

// A black-holed proxy keeps the connection open and delivers nothing.
func TestBlackhole(t *testing.T) {
	p := startProxy(t, echoServer(t), time.Millisecond)
	c := dial(t, p)
	p.Blackhole()
	if _, err := c.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := c.Read(make([]byte, 8))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v through a black hole; want a timeout with the connection open", n, err)
	}
}

// Close ends open connections: the client sees EOF or a reset.
func TestCloseEndsConnections(t *testing.T) {
	p := startProxy(t, echoServer(t), time.Millisecond)
	c := dial(t, p)
	p.Close()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read through a closed proxy succeeded")
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("a closed proxy still accepts")
	}
}
