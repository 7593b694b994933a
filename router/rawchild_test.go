package router_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"

	"github.com/spindle-rpc/spindle/router"
)

// yamux frame types and flags (yamux's spec.md), for a child that speaks
// frames by hand.
const (
	yData         = 0
	yWindowUpdate = 1
	yPing         = 2
	yGoAway       = 3

	ySYN = 1
	yACK = 2
	yFIN = 4
	yRST = 8

	// yamuxSendQueue is the capacity of a yamux session's send queue
	// (sendCh in third_party/yamux/session.go).
	yamuxSendQueue = 64
)

// yframe encodes a yamux frame header followed by body.
func yframe(typ uint8, flags uint16, id uint32, body []byte) []byte {
	b := make([]byte, 12, 12+len(body))
	b[1] = typ
	binary.BigEndian.PutUint16(b[2:], flags)
	binary.BigEndian.PutUint32(b[4:], id)
	binary.BigEndian.PutUint32(b[8:], uint32(len(body)))
	return append(b, body...)
}

// yheader encodes a frame header whose length field is n, without a body
// (a window update's delta, a ping's id, a go away's code).
func yheader(typ uint8, flags uint16, id, n uint32) []byte {
	b := yframe(typ, flags, id, nil)
	binary.BigEndian.PutUint32(b[8:], n)
	return b
}

// busFrame is a data frame on the bus (stream 1) carrying m.
func busFrame(m *router.Message) []byte {
	return yframe(yData, 0, 1, router.AppendFrame(nil, m))
}

// rawChild is a hostile child that speaks yamux frames by hand on a
// net.Pipe, which has no buffer: it reads nothing after the parent's
// first frame, so every reply of the parent's stays unsent.
type rawChild struct {
	t    testing.TB
	conn net.Conn
	link *router.Link // the parent's end
}

// attachRaw links a raw child with id below parent.
func attachRaw(t testing.TB, parent *router.Router, id uint32, name string) *rawChild {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { b.Close() })
	// The parent's first frame opens the bus; AddChild waits until it is
	// written, so it must be read.
	first := make(chan []byte, 1)
	go func() {
		h := make([]byte, 12)
		io.ReadFull(b, h)
		first <- h
	}()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	l, err := parent.AddChild(ctx, a, id, name)
	if err != nil {
		t.Fatal(err)
	}
	if h := recv(t, first, "the bus to open"); h[1] != yWindowUpdate || binary.BigEndian.Uint16(h[2:]) != ySYN || binary.BigEndian.Uint32(h[4:]) != 1 {
		t.Fatalf("the parent's first frame is % x, not the bus's SYN", h)
	}
	return &rawChild{t: t, conn: b, link: l}
}

func (c *rawChild) write(b []byte) {
	c.t.Helper()
	if _, err := c.conn.Write(b); err != nil {
		<-c.link.Done()
		c.t.Fatalf("write to the parent: %v (the link: %v)", err, c.link.Err())
	}
}

// usage is what this process holds: goroutines, and heap and stack bytes
// in use after a collection (the stacks of parked goroutines are most of
// what a flood of them costs).
type usage struct {
	goroutines int
	bytes      uint64
}

func measure() usage {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{runtime.NumGoroutine(), ms.HeapAlloc + ms.StackInuse}
}

// What one link to a hostile child may cost its parent, whatever the
// child sends.
const (
	// linkGoroutines: a child link's read loop, session watcher, and
	// yamux's receive, send and ping-reply loops (router/const.go), plus
	// slack for goroutines of earlier tests still exiting.
	linkGoroutines = 5 + 3
	// linkBytes: a link's buffers and maps, a few KiB, with slack for the
	// test's own logs and collectors. A goroutine per ping cost 3.4 KiB
	// (650 MiB for 200,000).
	linkBytes = 1 << 20
)

// within fails t if u has grown past one link's bounds since base.
func (u usage) within(t testing.TB, base usage, what string) {
	t.Helper()
	if d := u.goroutines - base.goroutines; d > linkGoroutines {
		t.Errorf("%s: %d more goroutines (bound %d)", what, d, linkGoroutines)
	}
	if u.bytes > base.bytes && u.bytes-base.bytes > linkBytes {
		t.Errorf("%s: %d more bytes of heap and stacks (bound %d)", what, u.bytes-base.bytes, linkBytes)
	}
}
