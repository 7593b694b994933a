// Package wire frames the Ansible endpoint's protocol (PROTOCOL.md,
// "Ansible endpoint"): one request and one response per Unix-socket
// connection, each a big-endian u32 length, a JSON object of that length,
// then raw bytes whose lengths the object gives: stdin_len bytes after a
// request, stdout_len then stderr_len bytes after a response. A client in
// any language with JSON and sockets speaks it in one round trip, and
// file or command bytes are never base64.
//
// Readers take untrusted bytes: every length is checked against its
// bound before anything is allocated, and a body grows with the bytes
// that arrive, not with the length claimed.
package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Bounds of a request and a response.
const (
	MaxHeader = 1 << 20  // the JSON object
	MaxStdin  = 64 << 20 // a request's body
)

// ErrBadRequest is wrapped by every error about the bytes themselves (as
// opposed to the connection's failing).
var ErrBadRequest = errors.New("bad request")

// Request is one request as it arrived.
type Request struct {
	// Header is the JSON object, for the op's own fields (Decode).
	Header []byte
	// V, Spindle and Op are the fields every request has.
	V       int
	Spindle string
	Op      string
	// Stdin is the body: exactly stdin_len bytes.
	Stdin []byte
}

// common are the fields ReadRequest reads itself.
type common struct {
	V        int    `json:"v"`
	Spindle  string `json:"spindle"`
	Op       string `json:"op"`
	StdinLen int64  `json:"stdin_len"`
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// readHeader reads a length and a JSON object of at most MaxHeader bytes.
func readHeader(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size == 0 || size > MaxHeader {
		return nil, bad("header length %d (want 1 to %d)", size, MaxHeader)
	}
	h, err := readN(r, int64(size))
	if err != nil {
		return nil, err
	}
	// Its validity is checked by the decoding that follows: a scan of
	// its own here would be a third of the daemon's JSON work.
	if t := bytes.TrimSpace(h); len(t) == 0 || t[0] != '{' {
		return nil, bad("the header is not a JSON object")
	}
	return h, nil
}

// readN reads exactly n bytes, allocating as they arrive: a forged
// length costs what was sent, not what was claimed.
func readN(r io.Reader, n int64) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	var buf bytes.Buffer
	if n <= 64<<10 {
		buf.Grow(int(n))
	}
	got, err := io.Copy(&buf, io.LimitReader(r, n))
	if err == nil && got < n {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("after %d of %d bytes: %w", got, n, err)
	}
	return buf.Bytes(), nil
}

// ReadRequest reads one request. An error wrapping ErrBadRequest means
// the bytes were wrong (answer "bad_request"); any other, the connection
// failed.
func ReadRequest(r io.Reader) (*Request, error) {
	h, err := readHeader(r)
	if err != nil {
		return nil, err
	}
	var c common
	if err := json.Unmarshal(h, &c); err != nil {
		return nil, bad("%v", err)
	}
	if c.StdinLen < 0 || c.StdinLen > MaxStdin {
		return nil, bad("stdin_len %d (want 0 to %d)", c.StdinLen, MaxStdin)
	}
	body, err := readN(r, c.StdinLen)
	if err != nil {
		return nil, fmt.Errorf("reading stdin: %w", err)
	}
	return &Request{Header: h, V: c.V, Spindle: c.Spindle, Op: c.Op, Stdin: body}, nil
}

// Decode reads the op's fields from the header into v. A field of the
// wrong type wraps ErrBadRequest; unknown fields are ignored.
func (r *Request) Decode(v any) error {
	if err := json.Unmarshal(r.Header, v); err != nil {
		return bad("%v", err)
	}
	return nil
}

// WriteRequest writes a request: header (a JSON-encodable object, which
// must carry stdin_len when stdin is not empty) and stdin. For clients
// written in Go (tests, a fleet runner).
func WriteRequest(w io.Writer, header any, stdin []byte) error {
	return writeFrame(w, header, stdin)
}

// Response is one response as it arrived.
type Response struct {
	Header         []byte
	Stdout, Stderr []byte
}

// Decode reads the response's fields into v.
func (r *Response) Decode(v any) error {
	if err := json.Unmarshal(r.Header, v); err != nil {
		return bad("%v", err)
	}
	return nil
}

// WriteResponse writes a response: header, a JSON-encodable object
// (which must carry stdout_len and stderr_len when the bytes are not
// empty), then stdout and stderr.
func WriteResponse(w io.Writer, header any, stdout, stderr []byte) error {
	return writeFrame(w, header, stdout, stderr)
}

func writeFrame(w io.Writer, header any, bodies ...[]byte) error {
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	if len(h) > MaxHeader {
		return fmt.Errorf("header of %d bytes: over the %d-byte bound", len(h), MaxHeader)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(h)))
	// One write for the small parts: a response is often a few bytes.
	buf := make([]byte, 0, 4+len(h))
	buf = append(append(buf, n[:]...), h...)
	if _, err := w.Write(buf); err != nil {
		return err
	}
	for _, b := range bodies {
		if len(b) == 0 {
			continue
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// ReadResponse reads one response whose output is at most maxOutput
// bytes per stream.
func ReadResponse(r io.Reader, maxOutput int64) (*Response, error) {
	h, err := readHeader(r)
	if err != nil {
		return nil, err
	}
	var lens struct {
		Stdout int64 `json:"stdout_len"`
		Stderr int64 `json:"stderr_len"`
	}
	if err := json.Unmarshal(h, &lens); err != nil {
		return nil, bad("%v", err)
	}
	res := &Response{Header: h}
	for _, s := range []struct {
		n    int64
		name string
		dst  *[]byte
	}{{lens.Stdout, "stdout", &res.Stdout}, {lens.Stderr, "stderr", &res.Stderr}} {
		if s.n < 0 || s.n > maxOutput {
			return nil, bad("%s_len %d (want 0 to %d)", s.name, s.n, maxOutput)
		}
		if *s.dst, err = readN(r, s.n); err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.name, err)
		}
	}
	return res, nil
}
