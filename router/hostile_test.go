package router_test

import (
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/rawchild"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"go.uber.org/zap/zaptest/observer"
)

// hostileTopology is 0 → 1 → {evil 2, sibling 3}: the controller, its
// child 1, and under 1 a hostile child and a well-behaved one.
func hostileTopology(t *testing.T, opts router.Options) (ctl, r1, r3 *router.Router, ev *rawchild.Child) {
	t.Helper()
	ctl = newRouter(t, 0, opts)
	r1 = newRouter(t, 1, opts)
	r3 = newRouter(t, 3, opts)
	link(t, ctl, ctl, r1, "c1")
	link(t, ctl, r1, r3, "c3")
	return ctl, r1, r3, attachEvil(t, ctl, r1, 2, "evil")
}

// attachEvil connects a hostile child with id below parent, granted by ctl
// when parent is not ctl.
func attachEvil(t *testing.T, ctl, parent *router.Router, id uint32, name string) *rawchild.Child {
	t.Helper()
	if parent != ctl {
		if err := ctl.Grant(id, parent.ID(), name); err != nil {
			t.Fatal(err)
		}
	}
	return rawchild.Attach(t, parent, id, name)
}

func refusals(logs *observer.ObservedLogs, linkName string) int {
	n := 0
	for _, e := range logs.FilterMessage("refused message").All() {
		if e.Level.String() == "warn" && e.ContextMap()["link"] == linkName {
			n++
		}
	}
	return n
}

func routeData(t *testing.T, op uint8, ids ...uint32) []byte {
	t.Helper()
	b, err := wire.Marshal(&struct {
		Op  uint8    `msgpack:"op"`
		IDs []uint32 `msgpack:"ids"`
	}{op, ids})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	opGrant = 1
	opAdd   = 2
	opDel   = 3
)

// TestHostileChild: 0 → 1 → {evil 2, sibling 3}. Each attack is followed by
// a legitimate marker message from evil to the controller's log receiver;
// the bus is ordered, so once the marker arrives the attack has been
// processed (and would have been delivered before it).
func TestHostileChild(t *testing.T) {
	log, logs := observed()
	opts := router.Options{Logger: log}
	ctl, r1, r3, ev := hostileTopology(t, opts)

	ctlLog := newCollector()
	ctl.Register(router.HandleLog, router.Receiver{Accept: router.AcceptChildren, Deliver: ctlLog.deliver})
	ctlCall := newCollector()
	ctl.Register(router.HandleCall, router.Receiver{Accept: router.AcceptParent, Deliver: ctlCall.deliver})
	r1Call := newCollector()
	r1.Register(router.HandleCall, router.Receiver{Accept: router.AcceptParent, Deliver: r1Call.deliver})
	r3Call := newCollector()
	r3.Register(router.HandleCall, router.Receiver{Accept: router.AcceptParent, Deliver: r3Call.deliver})
	r3Log := newCollector()
	r3.Register(router.HandleLog, router.Receiver{Accept: router.AcceptChildren, Deliver: r3Log.deliver})
	// A reply receiver on 0 waiting on the sibling 3.
	waitOn3 := newCollector()
	h3 := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 3, Deliver: waitOn3.deliver})

	marker := 0
	attack := func(name string, m *router.Message) {
		t.Helper()
		at := "evil"
		if m.Dst == 0 && m.Src == 2 && m.Handle != router.HandleRoute {
			at = "c1" // forwarded up by 1, refused by the controller's receiver
		}
		before := refusals(logs, at)
		ev.Send(m)
		marker++
		ev.Send(&router.Message{Dst: 0, Src: 2, Handle: router.HandleLog, Data: []byte{byte(marker)}})
		got := recv(t, ctlLog.ch, name+": marker")
		if got.Src != 2 || len(got.Data) != 1 || got.Data[0] != byte(marker) {
			t.Fatalf("%s: the attack was delivered: %v %q", name, got, got.Data)
		}
		if refusals(logs, at) <= before {
			t.Fatalf("%s: no warn \"refused message\" for link %s; logs: %v", name, at, logs.All())
		}
	}

	attack("forged src 0", &router.Message{Dst: 0, Src: 0, Handle: router.HandleLog, Data: []byte("forged")})
	attack("forged src sibling", &router.Message{Dst: 0, Src: 3, Handle: router.HandleLog, Data: []byte("forged")})
	attack("forged src sibling reply", &router.Message{Dst: 0, Src: 3, Handle: h3, Data: []byte("forged")})
	attack("forged src 1", &router.Message{Dst: 0, Src: 1, Handle: router.HandleLog})
	attack("call on parent", &router.Message{Dst: 1, Src: 2, Handle: router.HandleCall, ReplyTo: 5000})
	attack("call on controller", &router.Message{Dst: 0, Src: 2, Handle: router.HandleCall, ReplyTo: 5000})
	attack("call on sibling", &router.Message{Dst: 3, Src: 2, Handle: router.HandleCall, ReplyTo: 5000})
	attack("log on sibling", &router.Message{Dst: 3, Src: 2, Handle: router.HandleLog})
	attack("reply as ourselves to a waiter on 3", &router.Message{Dst: 0, Src: 2, Handle: h3, Flags: router.FlagDead})
	attack("routeAdd sibling", &router.Message{Dst: 0, Src: 2, Handle: router.HandleRoute, Data: routeData(t, opAdd, 3)})
	attack("routeAdd parent", &router.Message{Dst: 0, Src: 2, Handle: router.HandleRoute, Data: routeData(t, opAdd, 1)})
	attack("routeAdd controller", &router.Message{Dst: 0, Src: 2, Handle: router.HandleRoute, Data: routeData(t, opAdd, 0)})
	attack("routeAdd ungranted", &router.Message{Dst: 0, Src: 2, Handle: router.HandleRoute, Data: routeData(t, opAdd, 77)})
	attack("routeAdd mixed", &router.Message{Dst: 0, Src: 2, Handle: router.HandleRoute, Data: routeData(t, opAdd, 2, 3)})
	attack("routeDel sibling", &router.Message{Dst: 0, Src: 2, Handle: router.HandleRoute, Data: routeData(t, opDel, 3)})
	attack("routeDel mixed", &router.Message{Dst: 1, Src: 2, Handle: router.HandleRoute, Data: routeData(t, opDel, 2, 3)})
	attack("routeGrant from child", &router.Message{Dst: 1, Src: 2, Handle: router.HandleRoute, Data: routeData(t, opGrant, 3)})
	attack("route garbage", &router.Message{Dst: 0, Src: 2, Handle: router.HandleRoute, Data: []byte{0xdd, 0x0f, 0xff, 0xff, 0xff}})

	for name, c := range map[string]*collector{"ctl call": ctlCall, "r1 call": r1Call, "r3 call": r3Call, "r3 log": r3Log, "waiter on 3": waitOn3} {
		if msgs := c.all(); len(msgs) != 0 {
			t.Errorf("%s received %v", name, msgs)
		}
	}
	// Routing is unchanged: 3 is still reachable from 0 and from 1, 77 is
	// unknown, and evil (2) is still routed.
	ping(t, ctl, 3)
	ping(t, r1, 3)
	if err := ctl.Send(&router.Message{Dst: 77, Handle: router.HandleCall}); !errors.Is(err, router.ErrNoRoute) {
		t.Fatalf("send to 77: %v, want ErrNoRoute", err)
	}
	if err := ctl.Send(&router.Message{Dst: 2, Handle: router.HandleCall, Data: []byte("still here")}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := router.ReadMessage(ev.Bus, nil, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) == "still here" {
			break
		}
	}
}

// TestHostileChildPing checks that the legitimate evil route still works
// (so the attacks above were refused for the right reason) and that routes
// to 3 survive from router 1's point of view.
func TestHostileChildRoutesIntact(t *testing.T) {
	log, logs := observed()
	opts := router.Options{Logger: log}
	ctl, r1, _, ev := hostileTopology(t, opts)

	ev.Send(&router.Message{Dst: 0, Src: 2, Handle: router.HandleRoute, Data: routeData(t, opAdd, 3)})
	ev.Send(&router.Message{Dst: 0, Src: 2, Handle: router.HandleRoute, Data: routeData(t, opDel, 3)})
	ev.Send(&router.Message{Dst: 1, Src: 2, Handle: router.HandleRoute, Data: routeData(t, opGrant, 3)})
	// evil answers a controller call, proving its bus is processed in order.
	got := make(chan *router.Message, 1)
	h := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 2, Deliver: into(got)})
	if err := ctl.Send(&router.Message{Dst: 2, Handle: router.HandleCall, ReplyTo: h}); err != nil {
		t.Fatal(err)
	}
	call, err := router.ReadMessage(ev.Bus, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if call.Src != 0 || call.Handle != router.HandleCall || call.ReplyTo != h {
		t.Fatalf("evil got %v", call)
	}
	ev.Send(&router.Message{Dst: 0, Src: 2, Handle: h, Flags: router.FlagLast, Data: []byte("ok")})
	if m := recv(t, got, "evil's reply"); string(m.Data) != "ok" {
		t.Fatalf("reply %v", m)
	}
	if n := refusals(logs, "evil"); n < 3 {
		t.Fatalf("%d refusals logged for evil, want 3", n)
	}
	// Messages to 3, from 0 and from 1, still reach the real 3.
	for _, r := range []*router.Router{ctl, r1} {
		if m := ping(t, r, 3); string(m.Data) != "ping" || m.Flags&router.FlagDead != 0 {
			t.Fatalf("ping 3 from %d: %v %q", r.ID(), m, m.Data)
		}
	}
}

// A hostile child cannot open circuits toward its parent.
func TestHostileChildCircuit(t *testing.T) {
	log, logs := observed()
	ctl := newRouter(t, 0, router.Options{Logger: log})
	ev := attachEvil(t, ctl, ctl, 2, "evil")
	got := newCollector()
	ctl.Register(router.HandleCall, router.Receiver{Accept: router.AcceptChildren, Deliver: got.deliver})

	st, err := ev.Sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.Write(router.AppendFrame(nil, &router.Message{Dst: 0, Src: 2, Handle: router.HandleCall}))
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(st)
		done <- err
	}()
	recv(t, done, "the parent to close the circuit")
	if len(got.all()) != 0 {
		t.Fatal("circuit from a child was delivered")
	}
	if refusals(logs, "evil") == 0 {
		t.Fatalf("no refusal logged: %v", logs.All())
	}
}

// A frame announcing 4 GiB closes the link without being allocated.
func TestHugeFrameClosesLink(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes []byte
	}{
		{"4 GiB frame", []byte{0xff, 0xff, 0xff, 0xff}},
		{"frame over the limit", []byte{0x00, 0x40, 0x00, 0x01}},
		{"malformed message", append([]byte{0, 0, 0, 6}, 0x96, 0, 0, 0, 0, 0)},
		{"array32 payload", append([]byte{0, 0, 0, 5}, 0xdd, 0x0f, 0xff, 0xff, 0xff)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := observed()
			ctl := newRouter(t, 0, router.Options{Logger: log})
			ev := attachEvil(t, ctl, ctl, 2, "evil")
			lost := make(chan router.RouteLoss, 1)
			ctl.OnRouteLoss(into(lost))

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			// The write may report the session's shutdown: the router can
			// close the link before yamux confirms the write.
			ev.Bus.Write(tc.bytes)
			recv(t, ev.Link.Done(), "link closed")
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Fatalf("allocated %d bytes", grew)
			}
			if l := recv(t, lost, "route loss"); len(l.IDs) != 1 || l.IDs[0] != 2 {
				t.Fatalf("loss %+v", l)
			}
			if logs.FilterMessage("protocol error, closing link").FilterField(observerField("link", "evil")).Len() == 0 {
				t.Fatalf("no protocol error logged: %v", logs.All())
			}
			// The evil side sees its session die.
			if _, err := ev.Bus.Read(make([]byte, 1)); err == nil {
				t.Fatal("evil's bus still open")
			}
		})
	}
}
