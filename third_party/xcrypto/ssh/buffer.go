// Copyright 2012 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"io"
	"sync"
)

// buffer provides a linked list buffer for data exchange
// between producer and consumer. Theoretically the buffer is
// of unlimited capacity as it does no allocation of its own.
type buffer struct {
	// protects concurrent access to head, tail and closed
	*sync.Cond

	head *element // the buffer that will be read first
	tail *element // the buffer that will be read last

	closed bool
}

// An element represents a single link in a linked list.
type element struct {
	buf  []byte
	next *element
	// pkt, if not nil, is the pooled packet that buf is part of: it goes
	// back to the pool once buf has been read (Spindle).
	pkt []byte
}

// Spindle: received packets of pooledPacketMin bytes or more are copied
// out of the cipher's buffer into pooled buffers rather than fresh ones.
// A channel's data stays in its packet until read; Read returns the packet
// to the pool when it moves past it, and no other reference to it remains
// then (handleData keeps none). Packets that are not channel data, and
// those a closed channel never reads, are left to the garbage collector
// as before.
//
// Why: every 32 KiB of data received allocated a fresh 32 KiB + 9 byte
// buffer, a large object for Go's allocator; a 100 MiB download turned
// over 100 MiB of heap that the runtime kept returning to the kernel and
// faulting back in. Measured on a 2-vCPU VM (Spindle's BENCHMARKS.md,
// "Windows and buffers"):
// the controller's CPU per 100 MiB fs.GetFile fell by a quarter.
//
// Only packets of at least half a pooled buffer are pooled: a channel
// holds up to its window of unread data, and a peer sending small packets
// could otherwise make each byte of that window cost several in buffers.
// This way the memory a channel holds is at most twice its window.
const (
	pooledPacketMin  = 16 << 10
	pooledPacketSize = 32<<10 + 64 // the largest channel data packet we accept, and its header
)

var packetPool = sync.Pool{New: func() any {
	b := make([]byte, pooledPacketSize)
	return &b
}}

// getPacketBuf returns a buffer of n bytes, pooled when n is in the pooled
// range.
func getPacketBuf(n int) []byte {
	if n < pooledPacketMin || n > pooledPacketSize {
		return make([]byte, n)
	}
	return (*packetPool.Get().(*[]byte))[:n]
}

// putPacketBuf returns b, which must be unreferenced, to the pool if it
// came from there.
func putPacketBuf(b []byte) {
	if cap(b) != pooledPacketSize {
		return
	}
	b = b[:cap(b)]
	packetPool.Put(&b)
}

// newBuffer returns an empty buffer that is not closed.
func newBuffer() *buffer {
	e := new(element)
	b := &buffer{
		Cond: newCond(),
		head: e,
		tail: e,
	}
	return b
}

// write makes buf available for Read to receive.
// buf must not be modified after the call to write.
func (b *buffer) write(buf []byte) { b.writePooled(buf, nil) }

// writePooled is write of buf, a part of pkt, which Read returns to the
// packet pool once it has read buf (Spindle).
func (b *buffer) writePooled(buf, pkt []byte) {
	b.Cond.L.Lock()
	e := &element{buf: buf, pkt: pkt}
	b.tail.next = e
	b.tail = e
	b.Cond.Signal()
	b.Cond.L.Unlock()
}

// eof closes the buffer. Reads from the buffer once all
// the data has been consumed will receive io.EOF.
func (b *buffer) eof() {
	b.Cond.L.Lock()
	b.closed = true
	b.Cond.Signal()
	b.Cond.L.Unlock()
}

// Read reads data from the internal buffer in buf.  Reads will block
// if no data is available, or until the buffer is closed.
func (b *buffer) Read(buf []byte) (n int, err error) {
	b.Cond.L.Lock()
	defer b.Cond.L.Unlock()

	for len(buf) > 0 {
		// if there is data in b.head, copy it
		if len(b.head.buf) > 0 {
			r := copy(buf, b.head.buf)
			buf, b.head.buf = buf[r:], b.head.buf[r:]
			n += r
			continue
		}
		// if there is a next buffer, make it the head
		if len(b.head.buf) == 0 && b.head != b.tail {
			if b.head.pkt != nil {
				putPacketBuf(b.head.pkt)
				b.head.pkt = nil
			}
			b.head = b.head.next
			continue
		}

		// if at least one byte has been copied, return
		if n > 0 {
			break
		}

		// if nothing was read, and there is nothing outstanding
		// check to see if the buffer is closed.
		if b.closed {
			err = io.EOF
			break
		}
		// out of buffers, wait for producer
		b.Cond.Wait()
	}
	return
}
