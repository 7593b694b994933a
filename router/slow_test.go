package router_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/rpc"
)

// gatedConn is a parent's end of the link to a child, whose writes can
// be paused: while paused, the transport takes no more bytes, as a pipe to
// a stopped child process does once it is full.
type gatedConn struct {
	net.Conn
	mu     sync.Mutex
	open   chan struct{} // closed while writes may go on
	closed chan struct{}
	once   sync.Once
}

func newGatedConn(c net.Conn) *gatedConn {
	g := &gatedConn{Conn: c, open: make(chan struct{}), closed: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gatedConn) pause() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedConn) resume() {
	g.mu.Lock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
	g.mu.Unlock()
}

func (g *gatedConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-g.closed:
		return 0, net.ErrClosed
	}
	return g.Conn.Write(p)
}

func (g *gatedConn) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.Conn.Close()
}

// linkGated is link with the parent writing to the child through a
// gatedConn. It returns the gate and the parent's end of the link.
func linkGated(t *testing.T, ctl, parent, child *router.Router, name string) (*gatedConn, *router.Link) {
	t.Helper()
	a, b := connPair(t)
	g := newGatedConn(a)
	return g, linkThrough(t, ctl, parent, child, name, g, b)
}

// seen records, in order, what a router received at HandleCall and
// HandleControl; it answers each call with an empty reply.
type seen struct {
	mu   sync.Mutex
	log  []string
	ctrl chan struct{}
}

func watch(r *router.Router) *seen {
	s := &seen{ctrl: make(chan struct{}, 1)}
	r.Register(router.HandleCall, router.Receiver{Accept: router.AcceptParent, Deliver: func(m *router.Message) {
		s.mu.Lock()
		s.log = append(s.log, "call")
		s.mu.Unlock()
		r.Send(&router.Message{Dst: m.Src, Handle: m.ReplyTo, Flags: router.FlagLast})
	}})
	r.Register(router.HandleControl, router.Receiver{Accept: router.AcceptParent, Deliver: func(m *router.Message) {
		s.mu.Lock()
		s.log = append(s.log, "control:"+string(m.Data))
		s.mu.Unlock()
		into(s.ctrl)(struct{}{})
	}})
	return s
}

func (s *seen) events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// stalledReply reports whether m is a refusal of kind "stalled" and
// checks what it says.
func stalledReply(t *testing.T, m *router.Message, link string) bool {
	t.Helper()
	if m.Flags&router.FlagError == 0 {
		return false
	}
	var re rpc.RemoteError
	if err := wire.Unmarshal(m.Data, &re); err != nil {
		t.Fatalf("error reply does not decode as an rpc.RemoteError: %v", err)
	}
	if !errors.Is(&re, errkind.ErrStalled) || !strings.Contains(re.Message, "the link to "+link+" is not draining") ||
		!strings.Contains(re.Message, "did not run") {
		t.Fatalf("refusal %+v: want kind stalled naming %s", re, link)
	}
	return true
}

const bigCall = 256 << 10

// fillCalls is how many bigCall calls surely overflow a stalled link's
// queue (4 MiB) plus what its transport and yamux absorb.
const fillCalls = 48

// TestStalledChildDelaysNobodyElse: 0 → 1 → {2, 3}, and the transport
// from 1 to 2 stops taking bytes. Calls toward 2 are refused once 1's queue for it is full,
// with a "stalled" error back to the caller; 1 and 2's sibling 3 keep
// answering while 2 stays stopped; a cancel toward 2 is queued even then
// and reaches it, after the calls let in before it, once it drains.
func TestStalledChildDelaysNobodyElse(t *testing.T) {
	opts := router.Options{StallTimeout: -1} // this test stalls for as long as it likes
	ctl := newRouter(t, 0, opts)
	r1 := newRouter(t, 1, opts)
	r2 := newRouter(t, 2, opts)
	r3 := newRouter(t, 3, opts)
	link(t, ctl, ctl, r1, "c1")
	stalled, _ := linkGated(t, ctl, r1, r2, "c2")
	link(t, ctl, r1, r3, "c3")
	on2 := watch(r2)

	replies := make(chan *router.Message, fillCalls)
	h := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 2, Deliver: into(replies)})
	stalled.pause()
	data := make([]byte, bigCall)
	for i := 0; i < fillCalls; i++ {
		if err := ctl.Send(&router.Message{Dst: 2, Handle: router.HandleCall, ReplyTo: h, Data: data}); err != nil {
			t.Fatalf("call %d toward 2: %v", i, err)
		}
	}
	// The first refusal comes back while 2 is still stopped.
	var refused int
	for refused == 0 {
		if stalledReply(t, recv(t, replies, "a refusal of a call toward the stalled child"), "c2") {
			refused++
		} else {
			t.Fatal("a call was answered by a child that reads nothing")
		}
	}

	// 2's parent and sibling answer while 2 stays stopped.
	for _, id := range []uint32{1, 3} {
		if m := ping(t, ctl, id); m.Flags&(router.FlagDead|router.FlagError) != 0 {
			t.Fatalf("ping %d while its sibling is stalled: %v %q", id, m, m.Data)
		}
	}

	// A cancel is not refused: it is queued. The call after it is refused
	// while 2 is still stopped, so the queue was full when the cancel came.
	cancel, err := wire.Marshal(&rpc.Control{Call: h, Op: rpc.OpCancel})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.Send(&router.Message{Dst: 2, Handle: router.HandleControl, Data: cancel}); err != nil {
		t.Fatalf("cancel toward the stalled child: %v", err)
	}
	after := make(chan *router.Message, 1)
	h2 := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 2, Deliver: into(after)})
	if err := ctl.Send(&router.Message{Dst: 2, Handle: router.HandleCall, ReplyTo: h2, Data: data}); err != nil {
		t.Fatal(err)
	}
	if !stalledReply(t, recv(t, after, "the refusal of the call after the cancel"), "c2") {
		t.Fatal("the call after the cancel was answered by a child that reads nothing")
	}

	stalled.resume()
	answered := 0
	for refused+answered < fillCalls {
		if stalledReply(t, recv(t, replies, "every call's answer or refusal"), "c2") {
			refused++
		} else {
			answered++
		}
	}
	recv(t, on2.ctrl, "the cancel on the child that drains again")
	ev := on2.events()
	want := make([]string, answered)
	for i := range want {
		want[i] = "call"
	}
	want = append(want, "control:"+string(cancel))
	if strings.Join(ev, ",") != strings.Join(want, ",") {
		t.Fatalf("the child got %d events %v, want the %d calls let in, then the cancel", len(ev), ev, answered)
	}
}

// A call from the controller toward its own stalled child waits for room
// in the link's queue, until its context ends; meanwhile a cancel toward
// that child is queued, and the other child answers.
func TestStalledDirectChildHoldsOnlyItsCallers(t *testing.T) {
	opts := router.Options{StallTimeout: -1}
	ctl := newRouter(t, 0, opts)
	r1 := newRouter(t, 1, opts)
	r2 := newRouter(t, 2, opts)
	stalled, _ := linkGated(t, ctl, ctl, r1, "c1")
	link(t, ctl, ctl, r2, "c2")
	on1 := watch(r1)

	h := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 1, Deliver: func(*router.Message) {}})
	stalled.pause()
	ctx, stop := context.WithCancel(context.Background())
	sent := make(chan error, 1)
	go func() {
		// More than the queue and the transport hold: the last ones wait.
		data := make([]byte, bigCall)
		var err error
		for i := 0; i < fillCalls && err == nil; i++ {
			err = ctl.SendContext(ctx, &router.Message{Dst: 1, Handle: router.HandleCall, ReplyTo: h, Data: data})
		}
		sent <- err
	}()
	if m := ping(t, ctl, 2); m.Flags&router.FlagDead != 0 {
		t.Fatalf("ping the other child: dead: %s", m.Data)
	}
	if err := ctl.Send(&router.Message{Dst: 1, Handle: router.HandleControl, Data: []byte("cancel")}); err != nil {
		t.Fatalf("cancel toward the stalled child: %v", err)
	}
	stop()
	if err := recv(t, sent, "the calls' sender"); !errors.Is(err, context.Canceled) {
		t.Fatalf("%d calls toward a child that reads nothing ended with %v, want a wait that its context ends", fillCalls, err)
	}
	stalled.resume()
	recv(t, on1.ctrl, "the cancel on the child that drains again")
}

// A child that stays stalled past Options.StallTimeout with a message
// waiting for it is declared dead: the call waiting on it fails as a lost
// route naming why, and its parent keeps answering.
func TestStallBoundDeclaresLinkDead(t *testing.T) {
	log, logs := observed()
	ctl := newRouter(t, 0, router.Options{})
	r1 := newRouter(t, 1, router.Options{Logger: log})
	r2 := newRouter(t, 2, router.Options{})
	link(t, ctl, ctl, r1, "c1")
	stalled, l := linkGated(t, ctl, r1, r2, "c2")
	defer stalled.resume()
	lost := make(chan router.RouteLoss, 1)
	ctl.OnRouteLoss(into(lost))

	replies := make(chan *router.Message, fillCalls)
	h := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 2, Deliver: into(replies)})
	stalled.pause()
	l.SetStallTimeout(time.Millisecond) // from now on, not draining is stalled
	// Enough to fill the transport, so that the writer waits on it.
	data := make([]byte, bigCall)
	for i := 0; i < 8; i++ {
		err := ctl.Send(&router.Message{Dst: 2, Handle: router.HandleCall, ReplyTo: h, Data: data})
		if errors.Is(err, router.ErrNoRoute) {
			break // declared dead already
		} else if err != nil {
			t.Fatal(err)
		}
	}
	m := recv(t, replies, "the call's failure")
	if m.Flags&router.FlagDead == 0 || !strings.Contains(string(m.Data), "link to c2 lost: not draining") {
		t.Fatalf("the call toward the stalled child ended as %v %q, want a dead reply saying it stalled", m, m.Data)
	}
	if loss := recv(t, lost, "route loss"); len(loss.IDs) != 1 || loss.IDs[0] != 2 {
		t.Fatalf("route loss %+v, want id 2", loss)
	}
	if w := warnings(logs, "disconnected", "c2"); len(w) != 1 || !strings.HasPrefix(w[0].ContextMap()["why"].(string), "not draining") {
		t.Fatalf("warnings about the stalled link: %v, want one \"disconnected\" saying it was not draining", w)
	}
	if m := ping(t, ctl, 1); m.Flags&router.FlagDead != 0 {
		t.Fatalf("ping the stalled child's parent: dead: %s", m.Data)
	}
}

// A transport that stops taking bytes under a circuit, with no message
// waiting, trips the stall bound too: the circuit alone wedges the link.
func TestStallBoundCoversCircuits(t *testing.T) {
	ctl := newRouter(t, 0, router.Options{})
	r1 := newRouter(t, 1, router.Options{})
	r2 := newRouter(t, 2, router.Options{})
	link(t, ctl, ctl, r1, "c1")
	stalled, l := linkGated(t, ctl, r1, r2, "c2")
	defer stalled.resume()
	const h = 77
	got := make(chan *router.Message, 1)
	r2.Register(h, router.Receiver{Accept: router.AcceptParent, Deliver: into(got)})
	waiting := make(chan *router.Message, 1)
	reply := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 2, Deliver: into(waiting)})

	c, err := ctl.OpenCircuit(&router.Message{Dst: 2, Handle: h, ReplyTo: reply})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	far := recv(t, got, "circuit header on 2").Circuit
	defer far.Close()
	stalled.pause()
	l.SetStallTimeout(time.Millisecond)
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, 1<<20))
		wrote <- err
	}()
	m := recv(t, waiting, "the call's failure")
	if m.Flags&router.FlagDead == 0 || !strings.Contains(string(m.Data), "link to c2 lost: not draining") {
		t.Fatalf("the call waiting on the stalled child ended as %v %q, want a dead reply saying it stalled", m, m.Data)
	}
	c.Close()
	<-wrote
}
