package router_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/rpc"
)

// smallFrame is the frame limit of the test's far router: its hello
// would announce it, and its parent's link is told (SetPeerMaxFrame).
const smallFrame = 64 << 10

// A message or circuit header over the frame limit of the link it would
// go out on fails at once at the sender, with an error of kind too large
// that names the limit; one at the limit goes through, and so does every
// call after the refused one.
func TestFrameOverPeerLimitFailsAtSender(t *testing.T) {
	ctl := newRouter(t, 0, router.Options{})
	r1 := newRouter(t, 1, router.Options{MaxFrameSize: smallFrame})
	a, b := connPair(t)
	l := linkThrough(t, ctl, ctl, r1, "small", a, b)
	l.SetPeerMaxFrame(smallFrame)
	got := make(chan *router.Message, 4)
	r1.Register(router.HandleCall, router.Receiver{Accept: router.AcceptParent, Deliver: into(got)})

	fits := make([]byte, smallFrame-(&router.Message{}).EncodedSize())
	if err := ctl.Send(&router.Message{Dst: 1, Handle: router.HandleCall, Data: fits}); err != nil {
		t.Fatalf("a message at the limit: %v", err)
	}
	if m := recv(t, got, "the message at the limit"); len(m.Data) != len(fits) {
		t.Fatalf("got %d bytes, sent %d", len(m.Data), len(fits))
	}
	over := make([]byte, smallFrame)
	err := ctl.Send(&router.Message{Dst: 1, Handle: router.HandleCall, Data: over})
	checkTooLarge(t, err, "request", "small", "64.0 KiB")

	c, err := ctl.OpenCircuit(&router.Message{Dst: 1, Handle: router.HandleCall, Data: fits})
	if err != nil {
		t.Fatalf("a circuit header at the limit: %v", err)
	}
	m := recv(t, got, "the circuit header at the limit")
	m.Circuit.Close()
	c.Close()
	_, err = ctl.OpenCircuit(&router.Message{Dst: 1, Handle: router.HandleCall, Data: over})
	checkTooLarge(t, err, "request", "small", "64.0 KiB")
	ping(t, ctl, 1) // the link is up
}

// A router in the middle of the path answers a call it cannot forward
// (over its next link's frame limit) with an error of kind too large,
// naming that link's limit: the caller fails at once instead of waiting
// for a frame the far end would drop. The same for a circuit's header.
func TestFrameOverLimitOfLaterHopFailsAtOnce(t *testing.T) {
	ctl := newRouter(t, 0, router.Options{})
	r1 := newRouter(t, 1, router.Options{})
	r2 := newRouter(t, 2, router.Options{MaxFrameSize: smallFrame})
	link(t, ctl, ctl, r1, "mid")
	a, b := connPair(t)
	linkThrough(t, ctl, r1, r2, "far", a, b).SetPeerMaxFrame(smallFrame)

	reply := make(chan *router.Message, 2)
	h := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 2, Deliver: into(reply)})
	defer ctl.Unregister(h)
	over := make([]byte, smallFrame)
	if err := ctl.Send(&router.Message{Dst: 2, Handle: router.HandleCall, ReplyTo: h, Data: over}); err != nil {
		t.Fatalf("the first hop takes the message: %v", err)
	}
	checkRefusal(t, recv(t, reply, "the refusal of the message"))

	c, err := ctl.OpenCircuit(&router.Message{Dst: 2, Handle: router.HandleCall, ReplyTo: h, Data: over})
	if err != nil {
		t.Fatalf("the first hop takes the circuit: %v", err)
	}
	defer c.Close()
	checkRefusal(t, recv(t, reply, "the refusal of the circuit"))
	ping(t, ctl, 2)
}

// An agent that announces no frame limit reads circuit headers up to
// router.MaxCircuitHeader and bus frames up to DefaultMaxFrameSize.
func TestPeerWithoutAnnouncedLimit(t *testing.T) {
	ctl := newRouter(t, 0, router.Options{})
	r1 := newRouter(t, 1, router.Options{})
	a, b := connPair(t)
	linkThrough(t, ctl, ctl, r1, "old", a, b).SetPeerMaxFrame(0)
	got := make(chan *router.Message, 1)
	r1.Register(router.HandleCall, router.Receiver{Accept: router.AcceptParent, Deliver: into(got)})
	big := make([]byte, router.MaxCircuitHeader+1)
	if err := ctl.Send(&router.Message{Dst: 1, Handle: router.HandleCall, Data: big}); err != nil {
		t.Fatalf("a bus message of %d bytes: %v", len(big), err)
	}
	recv(t, got, "the bus message")
	_, err := ctl.OpenCircuit(&router.Message{Dst: 1, Handle: router.HandleCall, Data: big})
	checkTooLarge(t, err, "request", "old", "1.0 MiB")
}

func checkTooLarge(t *testing.T, err error, what, link, limit string) {
	t.Helper()
	if !errors.Is(err, errkind.ErrTooLarge) || !errors.Is(err, router.ErrFrameTooLarge) {
		t.Fatalf("a %s over the limit: %v, want an error of kind too large", what, err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "the "+what+" (") || !strings.Contains(msg, "frame limit of "+link+", "+limit) {
		t.Errorf("the error does not name the %s and the limit (%s's, %s): %q", what, link, limit, msg)
	}
}

func checkRefusal(t *testing.T, m *router.Message) {
	t.Helper()
	if m.Flags&router.FlagError == 0 || m.Flags&router.FlagLast == 0 {
		t.Fatalf("reply %v: want a last error reply", m)
	}
	var re rpc.RemoteError
	if err := wire.Unmarshal(m.Data, &re); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(&re, errkind.ErrTooLarge) || !strings.Contains(re.Message, "frame limit of far, 64.0 KiB") {
		t.Fatalf("refusal %+v: want kind too large naming far's limit", re)
	}
}
