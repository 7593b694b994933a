package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/spindle-rpc/spindle/internal/wire"
)

func TestRoundTrip(t *testing.T) {
	msgs := []*Msg{
		{Kind: KindRun, Run: &Run{Version: "v1", Target: "bastion,web1", Argv: []string{"sh", "-c", "echo hi"},
			Options: []string{"BatchMode=yes"}, Identities: []string{"/k"}, TimeoutNS: 5e9, Interactive: true}},
		{Kind: KindPrompt, Text: "Password: "},
		{Kind: KindAnswer, Text: "s3cret"},
		{Kind: KindSignal, Signal: 2},
		{Kind: KindExit, Code: 255, Text: "spindle: ssh:web1: connection refused\n"},
	}
	var buf bytes.Buffer
	for _, m := range msgs {
		if err := WriteMsg(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range msgs {
		got, err := ReadMsg(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}
	if _, err := ReadMsg(&buf); err != io.EOF {
		t.Errorf("after the last frame: %v, want EOF", err)
	}
}

func TestBadFrames(t *testing.T) {
	frame := func(n uint32, payload []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, n)
		return append(b, payload...)
	}
	runOnly, err := wire.Marshal(&Msg{Kind: KindRun})
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][]byte{
		"too long":       frame(MaxFrame+1, nil),
		"short payload":  frame(10, []byte{0x80}),
		"not msgpack":    frame(1, []byte{0xc1}),
		"run without it": frame(uint32(len(runOnly)), runOnly),
	} {
		if _, err := ReadMsg(bytes.NewReader(in)); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: %v, want ErrFrame", name, err)
		}
	}
}
