package tunnel

import (
	"bytes"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
)

// headerAllocs bounds what reading a header allocates: the length byte
// caps it at 255 bytes, read into a buffer and copied into a string,
// whatever the agent sends after it.
var headerAllocs = allocs.Bound{Base: 1 << 10}

// FuzzHeader: the header an agent sends first on a Listen or Accept
// circuit is untrusted; reading it never panics, never reads past its
// declared length, allocates at most headerAllocs whatever the input,
// and gives back what writeHeader wrote.
func FuzzHeader(f *testing.F) {
	f.Add([]byte("\x0712345678 127.0.0.1:80"))
	f.Add([]byte{})
	f.Add([]byte{255})
	f.Add([]byte{3, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		var s string
		var err error
		allocs.Within(t, headerAllocs, len(b), "readHeader", func() { s, err = readHeader(r) })
		if err != nil {
			return
		}
		if len(b) == 0 || len(s) != int(b[0]) || r.Len() != len(b)-1-len(s) {
			t.Fatalf("read %q from %q, leaving %d bytes", s, b, r.Len())
		}
		var w bytes.Buffer
		if err := writeHeader(&w, s); err != nil || !bytes.Equal(w.Bytes(), b[:1+len(s)]) {
			t.Fatalf("round trip of %q: %q, %v", s, w.Bytes(), err)
		}
	})
}
