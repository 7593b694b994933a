package router_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/router"
	"go.uber.org/zap/zaptest/observer"
)

// refusedWhy is how many refusals logged for linkName give a reason
// containing why.
func refusedWhy(logs *observer.ObservedLogs, linkName, why string) int {
	n := 0
	for _, e := range logs.FilterMessage("refused message").All() {
		m := e.ContextMap()
		if m["link"] == linkName && strings.Contains(m["why"].(string), why) {
			n++
		}
	}
	return n
}

// TestUpcallPolicy: 0 → 1 → {evil 2, sibling 3}, with id 5 granted below
// evil (its would-be child). Router 1 serves upcalls (AcceptChild, with
// an Admit that refuses a payload "bad"). Each attack is followed by a
// legitimate upcall from evil that 1 delivers; the bus is ordered, so once
// that marker arrives the attack has been processed.
func TestUpcallPolicy(t *testing.T) {
	log, logs := observed()
	opts := router.Options{Logger: log}
	ctl, r1, r3, ev := hostileTopology(t, opts)
	if err := ctl.Grant(5, 2, "evil-child"); err != nil {
		t.Fatal(err)
	}
	ping(t, ctl, 3) // the grant, sent before, has passed 1

	up1 := newCollector()
	r1.Register(router.HandleUpcall, router.Receiver{Accept: router.AcceptChild, Deliver: up1.deliver,
		Admit: func(m *router.Message) error {
			if string(m.Data) == "bad" {
				return errors.New("a bad upcall")
			}
			return nil
		}})
	up3 := newCollector()
	r3.Register(router.HandleUpcall, router.Receiver{Accept: router.AcceptChild, Deliver: up3.deliver})
	call1 := newCollector()
	r1.Register(router.HandleCall, router.Receiver{Accept: router.AcceptParent, Deliver: call1.deliver})

	marker := byte(0)
	legit := func(what string) {
		t.Helper()
		marker++
		ev.Send(&router.Message{Dst: 1, Src: 2, Handle: router.HandleUpcall, ReplyTo: 2000, Data: []byte{marker}})
		got := recv(t, up1.ch, what+": marker")
		if got.Src != 2 || len(got.Data) != 1 || got.Data[0] != marker {
			t.Fatalf("%s: the attack was delivered: %v %q", what, got, got.Data)
		}
	}
	legit("a direct child's upcall") // and the receiver takes it

	for _, a := range []struct {
		name string
		m    *router.Message
		at   string // the link the refusal names
		why  string
	}{
		{"upcall as the grandchild", &router.Message{Dst: 1, Src: 5, Handle: router.HandleUpcall, ReplyTo: 2000},
			"evil", "from a direct child only"},
		{"upcall to the grandparent", &router.Message{Dst: 0, Src: 2, Handle: router.HandleUpcall, ReplyTo: 2000},
			"evil", "upcalls go to the parent only"},
		{"upcall to the sibling", &router.Message{Dst: 3, Src: 2, Handle: router.HandleUpcall, ReplyTo: 2000},
			"evil", "upcalls go to the parent only"},
		{"upcall refused by Admit", &router.Message{Dst: 1, Src: 2, Handle: router.HandleUpcall, ReplyTo: 2000, Data: []byte("bad")},
			"evil", "a bad upcall"},
		{"call on the parent", &router.Message{Dst: 1, Src: 2, Handle: router.HandleCall, ReplyTo: 2000},
			"evil", "takes messages from the parent only"},
	} {
		before := refusedWhy(logs, a.at, a.why)
		ev.Send(a.m)
		legit(a.name)
		if refusedWhy(logs, a.at, a.why) <= before {
			t.Fatalf("%s: no warn \"refused message\" for link %s saying %q; logs: %v", a.name, a.at, a.why, logs.All())
		}
	}
	if msgs := up3.all(); len(msgs) != 0 {
		t.Errorf("the sibling's upcall receiver got %v", msgs)
	}
	if msgs := call1.all(); len(msgs) != 0 {
		t.Errorf("the parent's call receiver got %v", msgs)
	}
	// An ancestor's message at an upcall handle is no upcall either.
	done := make(chan *router.Message, 1)
	h := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 1, Deliver: into(done)})
	before := refusedWhy(logs, "parent-of-c1", "from a direct child only")
	if err := ctl.Send(&router.Message{Dst: 1, Handle: router.HandleUpcall, ReplyTo: h}); err != nil {
		t.Fatal(err)
	}
	ping(t, ctl, 1)
	if refusedWhy(logs, "parent-of-c1", "from a direct child only") <= before {
		t.Errorf("an upcall from the parent link was not refused: %v", logs.All())
	}
}

// The controller serves no upcalls: one that reaches it is refused and
// logged, not bounced as a missing receiver.
func TestUpcallToControllerRefused(t *testing.T) {
	log, logs := observed()
	ctl := newRouter(t, 0, router.Options{Logger: log})
	ev := attachEvil(t, ctl, ctl, 2, "evil")
	ctlLog := newCollector()
	ctl.Register(router.HandleLog, router.Receiver{Accept: router.AcceptChildren, Deliver: ctlLog.deliver})

	ev.Send(&router.Message{Dst: 0, Src: 2, Handle: router.HandleUpcall, ReplyTo: 2000, Data: []byte("fetch")})
	ev.Send(&router.Message{Dst: 0, Src: 2, Handle: router.HandleLog, Data: []byte("marker")})
	recv(t, ctlLog.ch, "marker")
	if refusedWhy(logs, "evil", "no upcalls are served") == 0 {
		t.Fatalf("no refusal logged: %v", logs.All())
	}
	// Nothing came back to evil (a bounce would): the next frame it reads
	// is the controller's own call.
	if err := ctl.Send(&router.Message{Dst: 2, Handle: router.HandleCall, Data: []byte("next")}); err != nil {
		t.Fatal(err)
	}
	m, err := router.ReadMessage(ev.Bus, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != "next" {
		t.Fatalf("evil read %v %q, want the controller's call", m, m.Data)
	}
}

// Answer reaches the child; an answer larger than the child's frame limit
// fails at once with ErrFrameTooLarge; and answers toward a child that
// reads nothing wait for room instead of piling up: with a context
// already done they are dropped once the queue is full.
func TestAnswer(t *testing.T) {
	ctl := newRouter(t, 0, router.Options{StallTimeout: -1})
	r1 := newRouter(t, 1, router.Options{})
	gate, l := linkGated(t, ctl, ctl, r1, "c1")
	got := make(chan *router.Message, 1)
	h := r1.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 0, Deliver: into(got)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ctl.Answer(ctx, &router.Message{Dst: 1, Handle: h, Flags: router.FlagLast, Data: []byte("answer")}); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, got, "the answer"); string(m.Data) != "answer" || m.Src != 0 {
		t.Fatalf("answer %v %q", m, m.Data)
	}
	if err := ctl.Answer(ctx, &router.Message{Dst: 77, Handle: h}); !errors.Is(err, router.ErrNoRoute) {
		t.Fatalf("answer to nowhere: %v", err)
	}
	l.SetPeerMaxFrame(64 << 10)
	if err := ctl.Answer(ctx, &router.Message{Dst: 1, Handle: h, Data: make([]byte, 64<<10)}); !errors.Is(err, router.ErrFrameTooLarge) {
		t.Fatalf("answer over the frame limit: %v", err)
	}

	gate.pause()
	defer gate.resume()
	done, stop := context.WithCancel(context.Background())
	stop()
	data := make([]byte, 32<<10)
	sent := 0
	var err error
	// The queue (4 MiB), the batch the writer is blocked on, and what
	// the socket and yamux took: far below 64 MiB.
	for ; sent < 2048 && err == nil; sent++ {
		err = ctl.Answer(done, &router.Message{Dst: 1, Handle: h, Data: data})
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%d answers of %d bytes to a child that reads nothing: all queued (%v)", sent, len(data), err)
	}
	t.Logf("answer %d of %d bytes dropped", sent, len(data))
	waiting := make(chan error, 1)
	go func() { waiting <- ctl.Answer(ctx, &router.Message{Dst: 1, Handle: h, Data: data}) }()
	cancel()
	if err := recv(t, waiting, "an answer waiting for room"); !errors.Is(err, context.Canceled) {
		t.Fatalf("an answer waiting for room ended with %v", err)
	}
}
