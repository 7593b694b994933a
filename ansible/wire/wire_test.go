package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
)

func frame(header string, rest string) []byte {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(header)))
	return append(append(n[:], header...), rest...)
}

func TestRequestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	stdin := []byte("\x00binary\xff")
	if err := WriteRequest(&buf, map[string]any{"v": 1, "op": "exec", "spindle": "dev", "cmd": "cat", "stdin_len": len(stdin)}, stdin); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("next")
	r, err := ReadRequest(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r.V != 1 || r.Op != "exec" || r.Spindle != "dev" || !bytes.Equal(r.Stdin, stdin) || buf.String() != "next" {
		t.Fatalf("%+v, left %q", r, buf.String())
	}
	var x struct {
		Cmd string `json:"cmd"`
	}
	if err := r.Decode(&x); err != nil || x.Cmd != "cat" {
		t.Fatal(x, err)
	}
	var wrong struct {
		Cmd int `json:"cmd"`
	}
	if err := r.Decode(&wrong); !errors.Is(err, ErrBadRequest) {
		t.Fatal(err)
	}
}

func TestResponseRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	out, errb := []byte("out\x00"), []byte("err")
	if err := WriteResponse(&buf, map[string]any{"rc": 3, "stdout_len": len(out), "stderr_len": len(errb)}, out, errb); err != nil {
		t.Fatal(err)
	}
	r, err := ReadResponse(&buf, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ RC int }
	if r.Decode(&h); h.RC != 3 || !bytes.Equal(r.Stdout, out) || !bytes.Equal(r.Stderr, errb) || buf.Len() != 0 {
		t.Fatalf("%+v %q %q", h, r.Stdout, r.Stderr)
	}
}

func TestBadRequests(t *testing.T) {
	for name, b := range map[string][]byte{
		"zero length":    {0, 0, 0, 0},
		"over the bound": {0, 0x10, 0, 1},
		"not JSON":       frame("{nope", ""),
		"not an object":  frame(`[1]`, ""),
		"wrong type":     frame(`{"v":"1"}`, ""),
		"negative stdin": frame(`{"stdin_len":-1}`, ""),
		"too much stdin": frame(`{"stdin_len":67108865}`, ""),
		"fractional len": frame(`{"stdin_len":1.5}`, "x"),
		"string instead": frame(`{"op":1}`, ""),
	} {
		if _, err := ReadRequest(bytes.NewReader(b)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", name, err)
		}
	}
	// A body shorter than claimed is the connection's failure.
	_, err := ReadRequest(bytes.NewReader(frame(`{"stdin_len":10}`, "abc")))
	if err == nil || errors.Is(err, ErrBadRequest) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short body: %v", err)
	}
	if _, err := ReadResponse(bytes.NewReader(frame(`{"stdout_len":11}`, strings.Repeat("x", 11))), 10); !errors.Is(err, ErrBadRequest) {
		t.Errorf("output over the bound: %v", err)
	}
}

// requestAllocs bounds what reading a request allocates: a header of up
// to 64 KiB is read into a buffer of its claimed size; beyond that every
// buffer grows with what arrives, and decoding the JSON costs a few times
// its size.
var requestAllocs = allocs.Bound{Base: 80 << 10, PerByte: 16}

// FuzzReadRequest: any bytes give requests or an error, never a panic or
// an allocation beyond requestAllocs, however large the lengths they
// claim; what is read is what was framed.
func FuzzReadRequest(f *testing.F) {
	var buf bytes.Buffer
	WriteRequest(&buf, map[string]any{"v": 1, "op": "exec", "cmd": "cat", "stdin_len": 3}, []byte("abc"))
	f.Add(buf.Bytes())
	f.Add(frame(`{"stdin_len":67108864}`, "abc"))
	f.Add([]byte{0, 0x10, 0, 0, '{'})
	f.Add(frame(`{"host":{"name":"a","port":"x"}}`, ""))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			var req *Request
			var err error
			before := r.Len()
			allocs.Within(t, requestAllocs, before, "ReadRequest", func() { req, err = ReadRequest(r) })
			if err != nil {
				return
			}
			if used := before - r.Len(); used != 4+len(req.Header)+len(req.Stdin) {
				t.Fatalf("read %d bytes for a header of %d and a body of %d", used, len(req.Header), len(req.Stdin))
			}
		}
	})
}

// FuzzReadResponse: the same for the client's side.
func FuzzReadResponse(f *testing.F) {
	var buf bytes.Buffer
	WriteResponse(&buf, map[string]any{"rc": 0, "stdout_len": 2, "stderr_len": 1}, []byte("ab"), []byte("c"))
	f.Add(buf.Bytes())
	f.Add(frame(`{"stdout_len":1073741824}`, "abc"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		var res *Response
		var err error
		allocs.Within(t, requestAllocs, len(b), "ReadResponse", func() { res, err = ReadResponse(r, 1<<30) })
		if err == nil && len(b)-r.Len() != 4+len(res.Header)+len(res.Stdout)+len(res.Stderr) {
			t.Fatal("read more than was framed")
		}
	})
}
