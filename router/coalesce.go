package router

import (
	"encoding/binary"
	"io"
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
type coalescingConn struct {
	io.ReadWriteCloser
	hdr  [yamuxHeaderLen]byte
	held bool
	buf  []byte
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	if c.held {
		c.held = false
		if len(p) > maxCoalesce {
			if _, err := c.ReadWriteCloser.Write(c.hdr[:]); err != nil {
				return 0, err
			}
			return c.ReadWriteCloser.Write(p)
		}
		c.buf = append(append(c.buf[:0], c.hdr[:]...), p...)
		n, err := c.ReadWriteCloser.Write(c.buf)
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
	return c.ReadWriteCloser.Write(p)
}
