// Package rawchild attaches to a router a child that speaks raw bus
// frames instead of running a router of its own, as a hostile agent
// would: for tests of what a router refuses from below.
package rawchild

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/spindle-rpc/spindle/internal/testkit/testconn"
	"github.com/spindle-rpc/spindle/router"
)

// Wait bounds Attach's link setup and Next's read.
const Wait = 10 * time.Second

// Child is a child of a router whose frames the test writes and reads.
type Child struct {
	ID   uint32
	Sess *yamux.Session
	Bus  net.Conn     // the bus stream: raw frames
	Link *router.Link // the parent's end
	t    testing.TB
}

// Attach links a child with id under parent (which must route id: a
// controller allocates it, or grants it to parent's subtree first).
// Everything is closed at the test's cleanup.
func Attach(t testing.TB, parent *router.Router, id uint32, name string) *Child {
	t.Helper()
	a, b, err := testconn.Pair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	cfg := yamux.DefaultConfig()
	cfg.EnableKeepAlive = false
	cfg.LogOutput = io.Discard
	sess, err := yamux.Server(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	l, err := parent.AddChild(ctx, a, id, name)
	if err != nil {
		t.Fatal(err)
	}
	bus, err := sess.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	return &Child{ID: id, Sess: sess, Bus: bus, Link: l, t: t}
}

// Send writes m as one frame on the bus.
func (c *Child) Send(m *router.Message) {
	c.t.Helper()
	if _, err := c.Bus.Write(router.AppendFrame(nil, m)); err != nil {
		c.t.Fatal(err)
	}
}

// Next reads the next frame the parent sends, waiting at most Wait.
func (c *Child) Next() *router.Message {
	c.t.Helper()
	c.Bus.SetReadDeadline(time.Now().Add(Wait)) //nolint:errcheck // a socket supports deadlines
	m, err := router.ReadMessage(c.Bus, nil, 8<<20)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}
