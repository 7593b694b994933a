package router

import (
	"encoding/binary"
	"io"
	"sync/atomic"
)

// yamuxHeaderLen is the size of a yamux frame header: version, type,
// flags, stream id, length.
const yamuxHeaderLen = 12

// maxCoalesce bounds the body copied to join its header: beyond it the copy
// costs more than the extra write saves.
const maxCoalesce = 64 << 10

// coalescingConn joins each yamux data header with the body that follows it
// into one write. yamux's send loop writes them separately, so without this
// every bus message costs two syscalls and, worse, can wake the reader on
// the far side twice. Only yamux's send loop writes to the conn, so no lock
// is needed.
//
// It also counts what reaches the transport, for the link's stall watch
// (queue.go), writing at most progressChunk bytes at a time so that a slow
// transport shows progress before a whole yamux frame has gone.
type coalescingConn struct {
	io.ReadWriteCloser
	hdr  [yamuxHeaderLen]byte
	held bool
	buf  []byte

	written atomic.Uint64 // bytes written to the transport
	read    atomic.Uint64 // bytes read from it, for the keepalive
	watch   *stallWatch   // told of every write to the transport; nil in tests
}

func (c *coalescingConn) write(p []byte) (int, error) {
	if c.watch != nil {
		c.watch.begin(&c.watch.conn)
		defer c.watch.end(&c.watch.conn)
	}
	total := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), progressChunk)]
		n, err := c.ReadWriteCloser.Write(chunk)
		total += n
		c.written.Add(uint64(n))
		if err == nil && n < len(chunk) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return total, err
		}
		p = p[n:]
	}
	return total, nil
}

func (c *coalescingConn) Read(p []byte) (int, error) {
	n, err := c.ReadWriteCloser.Read(p)
	c.read.Add(uint64(n))
	return n, err
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	if c.held {
		c.held = false
		if len(p) > maxCoalesce {
			if _, err := c.write(c.hdr[:]); err != nil {
				return 0, err
			}
			return c.write(p)
		}
		c.buf = append(append(c.buf[:0], c.hdr[:]...), p...)
		n, err := c.write(c.buf)
		n -= yamuxHeaderLen
		if n < 0 {
			n = 0
		}
		return n, err
	}
	// A data frame header (version 0, type 0) announcing a body: hold it
	// for the body, which yamux writes next.
	if len(p) == yamuxHeaderLen && p[0] == 0 && p[1] == 0 && binary.BigEndian.Uint32(p[8:]) > 0 {
		copy(c.hdr[:], p)
		c.held = true
		return len(p), nil
	}
	return c.write(p)
}
