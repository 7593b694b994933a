package proto

import (
	"bytes"
	"testing"
)

// FuzzReadMsg: any bytes give a message or an error, never a panic or an
// allocation beyond the frame's bound.
func FuzzReadMsg(f *testing.F) {
	var buf bytes.Buffer
	WriteMsg(&buf, &Msg{Kind: KindRun, Run: &Run{Target: "web1", Argv: []string{"true"}}})
	f.Add(buf.Bytes())
	buf.Reset()
	WriteMsg(&buf, &Msg{Kind: KindExit, Code: 3, Err: "x"})
	f.Add(buf.Bytes())
	f.Add([]byte{0, 0, 0, 5, 0x91, 0xdd, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			m, err := ReadMsg(r)
			if err != nil {
				return
			}
			if m.Kind == KindRun && m.Run == nil {
				t.Fatal("a run without its request got through")
			}
		}
	})
}
