package router

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Message is the unit the bus carries. On the wire it is a msgpack array of
// six elements: [dst, src, handle, reply_to, flags, data] with data as msgpack
// bin. The encoder and decoder are written by hand: the envelope is on every
// hot path, and a hand-written decoder cannot be tricked into allocating more
// than the frame it was given.
type Message struct {
	Dst     uint32 // context id of the receiver
	Src     uint32 // context id of the sender
	Handle  uint32 // receiver at Dst
	ReplyTo uint32 // handle at Src for replies, 0 = none
	Flags   uint16
	Data    []byte // msgpack payload

	// Circuit is set on a message delivered as the header of a circuit: the
	// stream that followed it. Never encoded.
	Circuit Circuit
}

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed message")

// MarshalAppend appends the encoding of m to b.
func (m *Message) MarshalAppend(b []byte) []byte {
	b = append(b, 0x96) // fixarray(6)
	b = appendUint(b, uint64(m.Dst))
	b = appendUint(b, uint64(m.Src))
	b = appendUint(b, uint64(m.Handle))
	b = appendUint(b, uint64(m.ReplyTo))
	b = appendUint(b, uint64(m.Flags))
	n := len(m.Data)
	switch {
	case n <= 0xff:
		b = append(b, 0xc4, byte(n))
	case n <= 0xffff:
		b = append(b, 0xc5, byte(n>>8), byte(n))
	default:
		b = append(b, 0xc6)
		b = binary.BigEndian.AppendUint32(b, uint32(n))
	}
	return append(b, m.Data...)
}

// EncodedSize is the length of m's encoding.
func (m *Message) EncodedSize() int {
	return 1 + 5*5 + 5 + len(m.Data) // upper bound
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(b, byte(v))
	case v <= 0xff:
		return append(b, 0xcc, byte(v))
	case v <= 0xffff:
		return append(b, 0xcd, byte(v>>8), byte(v))
	case v <= 0xffffffff:
		return append(b, 0xce, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	default:
		b = append(b, 0xcf)
		return binary.BigEndian.AppendUint64(b, v)
	}
}

// Unmarshal decodes one message from exactly b. Data aliases b.
func (m *Message) Unmarshal(b []byte) error {
	d := decoder{b: b}
	if len(b) == 0 || b[0] != 0x96 {
		return fmt.Errorf("%w: want a 6-element array", ErrMalformed)
	}
	d.off = 1
	var f [5]uint64
	limits := [5]uint64{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffff}
	names := [5]string{"dst", "src", "handle", "reply_to", "flags"}
	for i := range f {
		v, err := d.uint()
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrMalformed, names[i], err)
		}
		if v > limits[i] {
			return fmt.Errorf("%w: %s %d out of range", ErrMalformed, names[i], v)
		}
		f[i] = v
	}
	data, err := d.bin()
	if err != nil {
		return fmt.Errorf("%w: data: %v", ErrMalformed, err)
	}
	if d.off != len(b) {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b)-d.off)
	}
	*m = Message{Dst: uint32(f[0]), Src: uint32(f[1]), Handle: uint32(f[2]),
		ReplyTo: uint32(f[3]), Flags: uint16(f[4]), Data: data}
	return nil
}

type decoder struct {
	b   []byte
	off int
}

func (d *decoder) need(n int) ([]byte, error) {
	if n < 0 || len(d.b)-d.off < n {
		return nil, io.ErrUnexpectedEOF
	}
	s := d.b[d.off : d.off+n]
	d.off += n
	return s, nil
}

func (d *decoder) uint() (uint64, error) {
	c, err := d.need(1)
	if err != nil {
		return 0, err
	}
	switch t := c[0]; {
	case t <= 0x7f:
		return uint64(t), nil
	case t == 0xcc:
		s, err := d.need(1)
		if err != nil {
			return 0, err
		}
		return uint64(s[0]), nil
	case t == 0xcd:
		s, err := d.need(2)
		if err != nil {
			return 0, err
		}
		return uint64(binary.BigEndian.Uint16(s)), nil
	case t == 0xce:
		s, err := d.need(4)
		if err != nil {
			return 0, err
		}
		return uint64(binary.BigEndian.Uint32(s)), nil
	case t == 0xcf:
		s, err := d.need(8)
		if err != nil {
			return 0, err
		}
		return binary.BigEndian.Uint64(s), nil
	default:
		return 0, fmt.Errorf("type byte 0x%02x is not an unsigned integer", t)
	}
}

func (d *decoder) bin() ([]byte, error) {
	c, err := d.need(1)
	if err != nil {
		return nil, err
	}
	var n int
	switch c[0] {
	case 0xc0: // nil
		return nil, nil
	case 0xc4:
		s, err := d.need(1)
		if err != nil {
			return nil, err
		}
		n = int(s[0])
	case 0xc5:
		s, err := d.need(2)
		if err != nil {
			return nil, err
		}
		n = int(binary.BigEndian.Uint16(s))
	case 0xc6:
		s, err := d.need(4)
		if err != nil {
			return nil, err
		}
		n = int(binary.BigEndian.Uint32(s))
	default:
		return nil, fmt.Errorf("type byte 0x%02x is not bin", c[0])
	}
	// need checks n against the bytes left, so a forged length never
	// allocates: the slice aliases the frame.
	return d.need(n)
}

func (m *Message) String() string {
	return fmt.Sprintf("msg{dst=%d src=%d handle=%d reply_to=%d flags=%#x len=%d}",
		m.Dst, m.Src, m.Handle, m.ReplyTo, m.Flags, len(m.Data))
}
