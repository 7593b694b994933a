package exec

import (
	"bytes"
	"io"
	"testing"
)

// FuzzOutputFrames decodes what an agent sends as a process's output:
// whatever the bytes, demuxFrames returns (no panic, at most one frame's
// buffer of MaxFrameData), never delivers more than it was given, and
// what the agent's own frameWriter wrote comes out unchanged.
func FuzzOutputFrames(f *testing.F) {
	f.Add([]byte{}, []byte("out"), []byte("err"))
	f.Add([]byte{StreamStdout, 0, 0, 0, 3, 'a', 'b'}, []byte{}, []byte{})
	f.Add([]byte{7, 0, 0, 0, 1, 'x'}, []byte("x"), []byte{})
	f.Add([]byte{StreamStderr, 0xff, 0xff, 0xff, 0xff}, []byte("y"), []byte{})
	f.Fuzz(func(t *testing.T, raw, out, errb []byte) {
		var o, e bytes.Buffer
		err := demuxFrames(bytes.NewReader(raw), [3]io.Writer{nil, &o, &e})
		if err == nil && o.Len()+e.Len() > len(raw) {
			t.Fatalf("delivered %d bytes from %d", o.Len()+e.Len(), len(raw))
		}

		var wire bytes.Buffer
		fw := &frameWriter{w: &wire}
		if err := fw.frame(StreamStdout, out); err != nil {
			t.Fatal(err)
		}
		if err := fw.frame(StreamStderr, errb); err != nil {
			t.Fatal(err)
		}
		o.Reset()
		e.Reset()
		if err := demuxFrames(&wire, [3]io.Writer{nil, &o, &e}); err != nil {
			t.Fatalf("frames the agent wrote: %v", err)
		}
		if !bytes.Equal(o.Bytes(), out) || !bytes.Equal(e.Bytes(), errb) {
			t.Fatalf("round trip: stdout %d/%d bytes, stderr %d/%d", o.Len(), len(out), e.Len(), len(errb))
		}
	})
}
