package router_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
	"github.com/spindle-rpc/spindle/router"
)

func frameSeeds(f *testing.F) {
	for _, b := range [][]byte{
		{0xff, 0xff, 0xff, 0xff},
		{0x00, 0x10, 0x00, 0x01},
		{0, 0, 0, 5, 0xdd, 0x0f, 0xff, 0xff, 0xff},
		{0, 0, 0, 5, 0xdd, 0x7f, 0xff, 0xff, 0xff},
		{0, 0, 0, 5, 0xdf, 0xff, 0xff, 0xff, 0xff},
		{0, 0, 0, 5, 0xc6, 0xff, 0xff, 0xff, 0xff},
		router.AppendFrame(nil, &router.Message{Dst: 2, Src: 0, Handle: router.HandleCall, ReplyTo: 1024, Flags: router.FlagLast, Data: []byte("hi")}),
		{},
	} {
		f.Add(b)
	}
}

// FuzzReadFrame: whatever the bytes, reading frames from them ends in
// EOF, a cut-short frame or one over the limit, never hands back more than
// the limit, and allocates no more than readFrameAllocs.
func FuzzReadFrame(f *testing.F) {
	frameSeeds(f)
	const max = 1 << 20
	// The frames read whole allocate what the input carries: a frame of
	// 4+n bytes takes a header slot of at most 16 bytes and a body of n
	// rounded up to its size class, at most 8 bytes per input byte. The
	// one frame cut short may allocate its announced length, which the
	// limit caps; an error's text is small (1 KiB). A length over the
	// limit allocates nothing.
	bound := allocs.Bound{Base: max + 1<<10, PerByte: 8}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		allocs.Within(t, bound, len(b), "reading frames", func() {
			for {
				if _, err := router.ReadFrame(r, nil, max); err != nil {
					return
				}
			}
		})
		r.Reset(b)
		for {
			body, err := router.ReadFrame(r, nil, max)
			if err != nil {
				if len(b) >= 4 && errors.Is(err, router.ErrFrameTooLarge) {
					return
				}
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, router.ErrFrameTooLarge) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(body) > max || cap(body) > max {
				t.Fatalf("frame of %d bytes (cap %d) over the limit", len(body), cap(body))
			}
		}
	})
}

// FuzzMessageUnmarshal: whatever the bytes, Unmarshal fails with
// ErrMalformed or decodes a message that re-encodes canonically to the
// same fields, and allocates at most an error's text: Data aliases the
// input.
func FuzzMessageUnmarshal(f *testing.F) {
	frameSeeds(f)
	for _, m := range []*router.Message{
		{},
		{Dst: 0xffffffff, Src: 0x10000, Handle: 0xff, ReplyTo: 0x80, Flags: 0xffff, Data: make([]byte, 300)},
		{Data: make([]byte, 70000)},
	} {
		f.Add(m.MarshalAppend(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m router.Message
		var err error
		allocs.Within(t, allocs.Bound{Base: 1 << 10}, len(b), "Unmarshal", func() { err = m.Unmarshal(b) })
		if err != nil {
			if !errors.Is(err, router.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(m.Data) > len(b) {
			t.Fatalf("data of %d bytes from %d", len(m.Data), len(b))
		}
		enc := m.MarshalAppend(nil)
		if len(enc) > m.EncodedSize() {
			t.Fatalf("encoding of %d bytes exceeds EncodedSize %d", len(enc), m.EncodedSize())
		}
		var m2 router.Message
		if err := m2.Unmarshal(enc); err != nil {
			t.Fatalf("re-unmarshal %x: %v", enc, err)
		}
		if m.Dst != m2.Dst || m.Src != m2.Src || m.Handle != m2.Handle || m.ReplyTo != m2.ReplyTo ||
			m.Flags != m2.Flags || !bytes.Equal(m.Data, m2.Data) {
			t.Fatalf("round trip %v → %v", &m, &m2)
		}
		// The canonical encoding is a fixed point.
		if enc2 := m2.MarshalAppend(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("not canonical: %x vs %x", enc, enc2)
		}
	})
}

// The example frame in PROTOCOL.md section 3.2.
func TestProtocolExample(t *testing.T) {
	got := router.AppendFrame(nil, &router.Message{Dst: 2, Src: 0, Handle: 2, ReplyTo: 1024, Flags: router.FlagLast, Data: []byte("hi")})
	want := []byte{0, 0, 0, 0x0c, 0x96, 0x02, 0x00, 0x02, 0xcd, 0x04, 0x00, 0x01, 0xc4, 0x02, 'h', 'i'}
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x", got)
	}
}
