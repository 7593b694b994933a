package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
)

// FloodArgs says what hostile.Flood sends its parent: Frames yamux frames
// of Kind "ping" (ping requests) or "open" (stream opens).
type FloodArgs struct {
	Kind   string `msgpack:"kind"`
	Frames int    `msgpack:"frames"`
}

// FloodResult says how many frames went out before the parent dropped the
// link (the reply only arrives if it did not).
type FloodResult struct {
	Written int    `msgpack:"written"`
	Err     string `msgpack:"err"`
}

// Usage is what an agent holds: goroutines, and heap and stack bytes in
// use after a collection.
type Usage struct {
	Goroutines int    `msgpack:"goroutines"`
	Bytes      uint64 `msgpack:"bytes"`
}

func usage() *Usage {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &Usage{Goroutines: runtime.NumGoroutine(), Bytes: ms.HeapAlloc + ms.StackInuse}
}

// floodConn is the agent's byte stream to its parent, through which
// hostile.Flood stops reading (so the parent's replies pile up on its
// side) and writes raw yamux frames behind the agent's own session.
type floodConn struct {
	io.ReadWriteCloser
	wmu    sync.Mutex // a flood's writes and the session's do not interleave
	deaf   atomic.Bool
	closed chan struct{}
	once   sync.Once
}

func newFloodConn(c io.ReadWriteCloser) *floodConn {
	return &floodConn{ReadWriteCloser: c, closed: make(chan struct{})}
}

func (c *floodConn) Read(p []byte) (int, error) {
	if c.deaf.Load() {
		<-c.closed
		return 0, io.EOF
	}
	return c.ReadWriteCloser.Read(p)
}

func (c *floodConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ReadWriteCloser.Write(p)
}

func (c *floodConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.ReadWriteCloser.Close()
}

// yamux frame header fields (yamux's spec.md).
const (
	typeWindowUpdate = 1
	typePing         = 2
	flagSYN          = 1
)

// flood stops reading from the parent and writes it a.Frames frames, in
// batches, until they are all out or the parent drops the link.
func (c *floodConn) flood(a FloodArgs) (*FloodResult, error) {
	var typ byte
	switch a.Kind {
	case "ping":
		typ = typePing
	case "open":
		typ = typeWindowUpdate
	default:
		return nil, fmt.Errorf("flood kind %q: want ping or open", a.Kind)
	}
	c.deaf.Store(true)
	const batch = 341 // frames of 12 bytes in one pipe buffer page
	buf := make([]byte, batch*12)
	res := &FloodResult{}
	for res.Written < a.Frames {
		n := min(batch, a.Frames-res.Written)
		for j := 0; j < n; j++ {
			f := buf[12*j : 12*j+12]
			f[0], f[1] = 0, typ
			binary.BigEndian.PutUint16(f[2:], flagSYN)
			i := uint32(res.Written + j)
			if typ == typePing {
				binary.BigEndian.PutUint32(f[4:], 0)
				binary.BigEndian.PutUint32(f[8:], i) // the ping's id
			} else {
				binary.BigEndian.PutUint32(f[4:], 2+2*i) // a server's stream ids are even
				binary.BigEndian.PutUint32(f[8:], 0)
			}
		}
		if _, err := c.Write(buf[:12*n]); err != nil {
			res.Err = err.Error() // the parent dropped the link
			break
		}
		res.Written += n
	}
	return res, nil
}
