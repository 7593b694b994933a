package router

import (
	"encoding/binary"
	"fmt"
	"io"
)

// ErrFrameTooLarge is wrapped when a frame announces more than the limit.
var ErrFrameTooLarge = fmt.Errorf("frame too large")

// frameHeaderSize is the length prefix of every frame.
const frameHeaderSize = 4

// ReadFrame reads one length-prefixed frame from r into buf (grown as
// needed) and returns the body. A length above max is rejected before any
// allocation.
func ReadFrame(r io.Reader, buf []byte, max int) ([]byte, error) {
	return readFrame(r, make([]byte, frameHeaderSize), buf, max)
}

// readFrame is ReadFrame with a caller-owned header buffer: a local array
// passed to an io.Reader escapes, so a reading loop keeps one per link
// rather than allocating it per frame.
func readFrame(r io.Reader, hdr, buf []byte, max int) ([]byte, error) {
	if _, err := io.ReadFull(r, hdr[:frameHeaderSize]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr)
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("%w: %d bytes announced, limit %d", ErrFrameTooLarge, n, max)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// AppendFrame appends m as a frame (length prefix + encoding) to b.
func AppendFrame(b []byte, m *Message) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = m.MarshalAppend(b)
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-frameHeaderSize))
	return b
}

// ReadMessage reads and decodes one framed message. The message's Data
// aliases buf's storage when buf is large enough; callers that keep Data
// must pass a nil buf.
func ReadMessage(r io.Reader, buf []byte, max int) (*Message, error) {
	return readMessage(r, make([]byte, frameHeaderSize), buf, max)
}

func readMessage(r io.Reader, hdr, buf []byte, max int) (*Message, error) {
	body, err := readFrame(r, hdr, buf, max)
	if err != nil {
		return nil, err
	}
	m := new(Message)
	if err := m.Unmarshal(body); err != nil {
		return nil, err
	}
	return m, nil
}
