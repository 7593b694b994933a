package exec

import (
	"bytes"
	"io"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
)

// demuxAllocs bounds what demuxFrames allocates: its chunkSize buffer,
// grown for a larger frame to that frame's length, which MaxFrameData
// caps. Every growth but the last was followed by that many input bytes,
// so all of them together cost at most the input plus one MaxFrameData
// buffer; an error's text is small.
var demuxAllocs = allocs.Bound{Base: chunkSize + MaxFrameData + 4<<10, PerByte: 1}

// counter is a sink that counts what it is given and allocates nothing.
type counter struct{ n int }

func (c *counter) Write(b []byte) (int, error) { c.n += len(b); return len(b), nil }

// FuzzOutputFrames decodes what an agent sends as a process's output:
// whatever the bytes, demuxFrames returns, allocates within demuxAllocs,
// never delivers more than it was given, and what the agent's own
// frameWriter wrote comes out unchanged.
func FuzzOutputFrames(f *testing.F) {
	f.Add([]byte{}, []byte("out"), []byte("err"))
	f.Add([]byte{StreamStdout, 0, 0, 0, 3, 'a', 'b'}, []byte{}, []byte{})
	f.Add([]byte{7, 0, 0, 0, 1, 'x'}, []byte("x"), []byte{})
	f.Add([]byte{StreamStderr, 0xff, 0xff, 0xff, 0xff}, []byte("y"), []byte{})
	f.Fuzz(func(t *testing.T, raw, out, errb []byte) {
		var co, ce counter
		var err error
		r := bytes.NewReader(raw)
		allocs.Within(t, demuxAllocs, len(raw), "demuxFrames", func() { err = demuxFrames(r, [3]io.Writer{nil, &co, &ce}) })
		if err == nil && co.n+ce.n > len(raw) {
			t.Fatalf("delivered %d bytes from %d", co.n+ce.n, len(raw))
		}

		var wire bytes.Buffer
		fw := &frameWriter{w: &wire}
		if err := fw.frame(StreamStdout, out); err != nil {
			t.Fatal(err)
		}
		if err := fw.frame(StreamStderr, errb); err != nil {
			t.Fatal(err)
		}
		var o, e bytes.Buffer
		if err := demuxFrames(&wire, [3]io.Writer{nil, &o, &e}); err != nil {
			t.Fatalf("frames the agent wrote: %v", err)
		}
		if !bytes.Equal(o.Bytes(), out) || !bytes.Equal(e.Bytes(), errb) {
			t.Fatalf("round trip: stdout %d/%d bytes, stderr %d/%d", o.Len(), len(out), e.Len(), len(errb))
		}
	})
}
