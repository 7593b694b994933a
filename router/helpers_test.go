package router_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit/testconn"
	"github.com/spindle-rpc/spindle/router"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait is the generous bound on every channel wait in these tests.
const wait = 10 * time.Second

// handlePing is a test-only well-known handle: an AcceptParent receiver on
// every test router echoes it back to (src, reply_to).
const handlePing uint32 = 900

// connPair returns a connected, buffering pair of net.Conns (a unix
// socketpair).
func connPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	a, b, err := testconn.Pair()
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.DebugLevel)
	return zap.New(core), logs
}

// newRouter makes a router with a ping echo and closes it at cleanup.
func newRouter(t testing.TB, id uint32, opts router.Options) *router.Router {
	t.Helper()
	r := router.New(id, opts)
	r.Register(handlePing, router.Receiver{Accept: router.AcceptParent, Deliver: func(m *router.Message) {
		r.Send(&router.Message{Dst: m.Src, Handle: m.ReplyTo, Flags: router.FlagLast, Data: m.Data})
	}})
	t.Cleanup(func() { r.Close() })
	return r
}

// link joins child below parent as id, and waits until a ping from the
// controller ctl reaches the child and comes back. It returns the conns
// under the parent and the child.
func link(t testing.TB, ctl, parent, child *router.Router, name string) (parentConn, childConn net.Conn) {
	t.Helper()
	a, b := connPair(t)
	linkThrough(t, ctl, parent, child, name, a, b)
	return a, b
}

// linkThrough is link over a given pair: the parent writes to up, the
// child serves down. It returns the parent's end of the link.
func linkThrough(t testing.TB, ctl, parent, child *router.Router, name string, up io.ReadWriteCloser, down net.Conn) *router.Link {
	t.Helper()
	served := make(chan struct{})
	go func() {
		defer close(served)
		child.Serve(context.Background(), down, "parent-of-"+name)
	}()
	t.Cleanup(func() {
		child.Close()
		<-served
	})
	if parent != ctl {
		if err := ctl.Grant(child.ID(), parent.ID(), name); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	l, err := parent.AddChild(ctx, up, child.ID(), name)
	if err != nil {
		t.Fatal(err)
	}
	if m := ping(t, ctl, child.ID()); m.Flags&router.FlagDead != 0 {
		t.Fatalf("ping %s: dead: %s", name, m.Data)
	}
	return l
}

// ping sends a ping from r to dst and returns the reply.
func ping(t testing.TB, r *router.Router, dst uint32) *router.Message {
	t.Helper()
	ch := make(chan *router.Message, 1)
	h := r.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: dst, Deliver: func(m *router.Message) {
		select {
		case ch <- m:
		default:
		}
	}})
	defer r.Unregister(h)
	if err := r.Send(&router.Message{Dst: dst, Handle: handlePing, ReplyTo: h, Data: []byte("ping")}); err != nil {
		t.Fatalf("ping %d: %v", dst, err)
	}
	return recv(t, ch, "ping reply")
}

func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// collector records messages delivered to a receiver.
type collector struct {
	mu   sync.Mutex
	msgs []*router.Message
	ch   chan *router.Message
}

func newCollector() *collector { return &collector{ch: make(chan *router.Message, 1024)} }

func (c *collector) deliver(m *router.Message) {
	if m.Circuit != nil {
		// The test that wants circuits reads them from ch.
	}
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
	select {
	case c.ch <- m:
	default:
	}
}

func (c *collector) all() []*router.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*router.Message(nil), c.msgs...)
}

// chain builds 0 → 1 → 2.
func chain(t testing.TB, opts router.Options) (ctl, r1, r2 *router.Router, c01, c10, c12, c21 net.Conn) {
	ctl = newRouter(t, 0, opts)
	r1 = newRouter(t, 1, opts)
	r2 = newRouter(t, 2, opts)
	c01, c10 = link(t, ctl, ctl, r1, "c1")
	c12, c21 = link(t, ctl, r1, r2, "c2")
	return
}

func observerField(k, v string) zap.Field { return zap.String(k, v) }

// into returns a Deliver function (or a route-loss hook) that hands messages to ch without ever
// blocking. A receiver runs on the router's read loop: one that blocks on a
// full channel (say a route-loss notice arriving during cleanup, after the
// test stopped reading) wedges the link and turns a failing test into a
// hang until the package timeout. A dropped message shows up instead as a
// recv that times out and names what it waited for.
func into[T any](ch chan<- T) func(T) {
	return func(m T) {
		select {
		case ch <- m:
		default:
		}
	}
}
