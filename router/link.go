package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
)

// Circuit is a byte stream spliced hop by hop toward one context. It is a
// yamux stream at each hop: Close half-closes (the peer reads EOF, and can
// still write back).
type Circuit = net.Conn

// Link is one parent/child connection: a yamux session whose stream 1 is
// the bus and whose other streams are circuits.
type Link struct {
	name     string
	sess     *yamux.Session
	bus      net.Conn
	toParent bool // this link leads to our parent
	// child is, on a child link, the id of the context at its far end
	// (AddChild's id): the one context that may make upcalls on this
	// link (AcceptChild), where its descendants, also routed through it,
	// may not.
	child    uint32
	maxFrame int // the largest frame we read
	// peerFrame and peerHeader are the largest bus frame and circuit
	// header the peer reads (SetPeerMaxFrame).
	peerFrame, peerHeader atomic.Int64
	conn                  *coalescingConn // the transport, as yamux writes to it

	q     outQueue   // the bus's outgoing frames (queue.go)
	stall stallWatch // declares the link dead when it stops draining
	alive keepalive  // declares the link dead when its transport goes silent

	streams streamSet // the bus and every circuit, unblocked when the link dies

	warns        warnLimiter // of refusals of what the peer sent
	refusedOpens int         // streams the child opened; only yamux's receive loop touches it

	doneOnce sync.Once
	done     chan struct{}
	err      error // why the link died; set before done is closed
}

// Name is the name of the context at the far end (for logs and errors).
func (l *Link) Name() string { return l.name }

// Done is closed when the link has died.
func (l *Link) Done() <-chan struct{} { return l.done }

// Err says why the link died (nil while it is up).
func (l *Link) Err() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

// cause is why the link was killed, or nil: unlike Err, it is set as
// soon as kill has begun, before the streams that kill unblocks (the
// reader's among them) wake up.
func (l *Link) cause() error {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	return l.err
}

// yamuxConfig is the session configuration of every link. PROTOCOL.md
// section 1 has a table of it.
func yamuxConfig(window uint32) *yamux.Config {
	cfg := yamux.DefaultConfig()
	// yamux's keepalive waits only ConnectionWriteTimeout for a pong, which
	// can queue behind bulk data in a full SSH window: dead peers are
	// detected by the transport (SSH keepalives, process exit) and by the
	// router's keepalive (keepalive.go), which takes any byte for an answer.
	cfg.EnableKeepAlive = false
	cfg.ConnectionWriteTimeout = 365 * 24 * time.Hour
	cfg.MaxStreamWindowSize = window
	cfg.StreamOpenTimeout = 0
	cfg.LogOutput = io.Discard
	cfg.MaxPendingPongs = maxPendingPongs
	return cfg
}

// newLink runs yamux over conn. The parent side (client) opens the bus; the
// child side accepts it. On the parent side, refuseOpen is called for each
// stream the child opens, which the session resets at once; its error
// drops the link.
func newLink(ctx context.Context, conn io.ReadWriteCloser, name string, toParent bool, o *Options, refuseOpen func(*Link, uint32) error) (*Link, error) {
	cfg := yamuxConfig(o.streamWindow())
	l := &Link{name: name, toParent: toParent, maxFrame: o.maxFrame(), done: make(chan struct{})}
	l.q.init()
	l.peerFrame.Store(int64(l.maxFrame))
	l.peerHeader.Store(int64(l.maxFrame))
	l.stall.l = l
	l.alive.l = l
	if !toParent {
		cfg.RefuseStream = func(id uint32) error { return refuseOpen(l, id) }
		l.SetStallTimeout(o.stallTimeout())
	}
	var err error
	l.conn = &coalescingConn{ReadWriteCloser: conn, watch: &l.stall}
	conn = l.conn
	if toParent {
		l.sess, err = yamux.Server(conn, cfg)
	} else {
		l.sess, err = yamux.Client(conn, cfg)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	// However the session ends (our close, or yamux's own on a transport
	// error), nothing may stay blocked on its streams: see streamSet.
	go func() {
		<-l.sess.CloseChan()
		l.streams.unblockAll()
	}()
	if !toParent {
		bus, err := l.sess.OpenStream()
		if err != nil {
			l.sess.Close()
			return nil, fmt.Errorf("open bus to %s: %w", name, err)
		}
		l.streams.add(bus)
		l.bus = bus
		l.alive.set(o.Keepalive())
		return l, nil
	}
	type accepted struct {
		c   *yamux.Stream
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := l.sess.AcceptStream()
		ch <- accepted{c, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			l.sess.Close()
			return nil, fmt.Errorf("accept bus from parent: %w", a.err)
		}
		l.streams.add(a.c)
		l.bus = a.c
		return l, nil
	case <-ctx.Done():
		l.sess.Close()
		<-ch
		return nil, ctx.Err()
	}
}

// deadErr explains err, a failed write or stream open on l: wrapping
// ErrLinkDown, with why the link died, when it has (or its session has
// shut down, which its reader has yet to see).
func (l *Link) deadErr(err error) error {
	if e := l.Err(); e != nil {
		return fmt.Errorf("%w: %v", ErrLinkDown, e)
	}
	if errors.Is(err, yamux.ErrSessionShutdown) {
		return fmt.Errorf("%w: link to %s closed", ErrLinkDown, l.name)
	}
	return err
}

// openStream opens a circuit stream on this link and writes its header.
func (l *Link) openStream(m *Message) (net.Conn, error) {
	if err := l.checkFrame(m, true); err != nil {
		return nil, err
	}
	st, err := l.sess.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("open circuit to %s: %w", l.name, l.deadErr(err))
	}
	l.streams.add(st)
	if _, err := st.Write(AppendFrame(nil, m)); err != nil {
		st.Close()
		return nil, fmt.Errorf("open circuit to %s: %w", l.name, l.deadErr(err))
	}
	return st, nil
}

// kill marks the link dead, fails its senders and unblocks everything
// waiting on its streams, and returns at once; close also shuts the
// session, which can wait for the transport.
func (l *Link) kill(err error) {
	l.doneOnce.Do(func() {
		if err == nil || isClosedErr(err) {
			err = fmt.Errorf("link to %s closed", l.name)
		} else {
			err = fmt.Errorf("link to %s lost: %w", l.name, err)
		}
		q := &l.q
		q.mu.Lock()
		l.err = err
		q.dead = true
		q.buf, q.spare = nil, nil
		q.wakeWaiters()
		q.mu.Unlock()
		l.streams.unblockAll()
		close(l.done)
	})
}

// close kills the link and shuts its session, which waits for the
// transport's Close (for a child agent, until it exits).
func (l *Link) close(err error) {
	l.kill(err)
	l.sess.Close()
	l.alive.stop() // after the session's end, which ends its ping
}

func isClosedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, yamux.ErrSessionShutdown)
}

// splice copies both ways between two circuit hops until both directions
// have ended. Half-closes propagate; each hop buffers at most one yamux
// window, so backpressure holds end to end.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := io.Copy(b, a); err != nil {
			a.Close()
		}
		b.Close()
	}()
	if _, err := io.Copy(a, b); err != nil {
		b.Close()
	}
	a.Close()
	wg.Wait()
}
