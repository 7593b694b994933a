package agentfwd

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
)

// readFramesAllocs bounds what reading a stream's frames allocates: the
// frames read whole cost what the input carries (a frame of 4+n bytes
// takes a header slot of at most 16 bytes and a body of n rounded up to
// its size class: at most 8 bytes per input byte); the one frame cut
// short may cost its announced length, which maxMessage caps; a length
// over it costs nothing.
var readFramesAllocs = allocs.Bound{Base: maxMessage + 4<<10, PerByte: 8}

// FuzzForwardedRequests feeds what a hostile target could send the
// controller: frames are bounded, reading them allocates within
// readFramesAllocs, and only listing, signing and the two passed
// extensions are ever let through to the ssh-agent.
func FuzzForwardedRequests(f *testing.F) {
	frame := func(msg []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(msg)))
		return append(b, msg...)
	}
	ext := func(name string) []byte {
		b := binary.BigEndian.AppendUint32([]byte{agentExtension}, uint32(len(name)))
		return append(b, name...)
	}
	f.Add(frame([]byte{agentRequestIdentities}))
	f.Add(append(frame([]byte{agentSignRequest, 0, 0, 0, 1, 'k'}), frame(ext("session-bind@openssh.com"))...))
	f.Add(frame(ext("query")))
	f.Add(frame([]byte{agentExtension, 0xff, 0xff, 0xff, 0xff}))
	f.Add(frame([]byte{17})) // add identity
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	fw := &Forwarding{}
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bytes.NewReader(stream)
		allocs.Within(t, readFramesAllocs, len(stream), "reading frames", func() {
			for {
				if _, err := readFrame(r); err != nil {
					return
				}
			}
		})
		r.Reset(stream)
		for {
			msg, err := readFrame(r)
			if err != nil {
				return
			}
			if len(msg) > maxMessage {
				t.Fatalf("a %d-byte frame was accepted", len(msg))
			}
			if !fw.allowed(msg) {
				continue
			}
			switch msg[0] {
			case agentRequestIdentities, agentSignRequest:
			case agentExtension:
				n := binary.BigEndian.Uint32(msg[1:5])
				if name := string(msg[5 : 5+n]); !passedExtensions[name] {
					t.Fatalf("extension %q let through", name)
				}
			default:
				t.Fatalf("request type %d let through", msg[0])
			}
		}
	})
}
