package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
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

// Every command line an agent takes fits in a Run, with room for the
// connection flags: the daemon's call, not its socket, says what is too
// large, naming the limit.
func TestMaxFrameHoldsTheLargestCommandLine(t *testing.T) {
	if MaxFrame < router.DefaultMaxFrameSize+512<<10 {
		t.Fatalf("MaxFrame %d leaves no room above the router's frame limit %d", MaxFrame, router.DefaultMaxFrameSize)
	}
	argv := []string{strings.Repeat("x", router.DefaultMaxFrameSize-1024)}
	var buf bytes.Buffer
	if err := WriteMsg(&buf, &Msg{Kind: KindRun, Run: &Run{Target: "web1", Argv: argv, Options: []string{"BatchMode=yes"}}}); err != nil {
		t.Fatal(err)
	}
	m, err := ReadMsg(&buf)
	if err != nil || len(m.Run.Argv) != 1 || m.Run.Argv[0] != argv[0] {
		t.Fatalf("a Run with a %d-byte command line did not come through: %v", len(argv[0]), err)
	}
	if err := WriteMsg(&buf, &Msg{Kind: KindRun, Run: &Run{Argv: []string{strings.Repeat("x", MaxFrame)}}}); err == nil || !strings.Contains(err.Error(), "frame limit of") {
		t.Errorf("a Run over MaxFrame: %v, want an error naming the limit", err)
	}
}
