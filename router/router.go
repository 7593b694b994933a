package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	"go.uber.org/zap"
)

// Options configures a Router. The zero value is useful.
type Options struct {
	// Logger receives refused messages (warn) and link events (debug).
	// Default: no logging.
	Logger *zap.Logger
	// MaxFrameSize bounds one bus frame. Default DefaultMaxFrameSize.
	MaxFrameSize int
	// StreamWindow is the yamux per-stream window. Default
	// DefaultStreamWindow.
	StreamWindow uint32
	// StallTimeout is how long a link to a child may have something to
	// write (messages waiting, or circuit data) while its transport takes
	// not a byte (the child is stopped, or its pipe or connection is
	// wedged) before the link is declared dead: its routes are withdrawn
	// and every call waiting on its subtree fails as disconnected, naming
	// the link. The controller passes its value to the agents it asks to
	// connect children (connect.Start), so it holds on every link of its
	// tree. Default DefaultStallTimeout (30 s); negative: never. Links to
	// the parent are never timed: the parent judges them. See the package
	// comment, "Slow receivers".
	StallTimeout time.Duration
	// KeepaliveInterval is how often a link to a child must deliver
	// something: at each interval its transport delivered nothing in,
	// the router pings the child (which answers from its yamux session,
	// whatever its router is doing), and when KeepaliveCountMax such
	// pings in a row go unanswered the link is declared dead, as for
	// StallTimeout: a child that is stopped, or whose host or connection
	// died without a word, fails every call waiting on its subtree
	// (KeepaliveCountMax+1) × KeepaliveInterval after its last byte, to
	// one interval more. The controller passes its values to every agent
	// that connects a child (connect.Start). Default
	// DefaultKeepaliveInterval (15 s); negative: never. See the package
	// comment, "Dead links".
	KeepaliveInterval time.Duration
	// KeepaliveCountMax is how many keepalives in a row may go
	// unanswered, as ssh's ServerAliveCountMax. Default
	// DefaultKeepaliveCountMax (3).
	KeepaliveCountMax int
	// ParentMaxFrameSize is the largest frame the parent reads (an
	// agent's -parent-max-frame): larger messages and replies are refused
	// here, at once. Default MaxFrameSize.
	ParentMaxFrameSize int
}

// Keepalive returns the keepalive's interval (≤ 0: off) and count, with
// the defaults in place of zeros: Link.SetKeepalive's arguments.
func (o *Options) Keepalive() (time.Duration, int) {
	interval, count := o.KeepaliveInterval, o.KeepaliveCountMax
	if interval == 0 {
		interval = DefaultKeepaliveInterval
	}
	if count <= 0 {
		count = DefaultKeepaliveCountMax
	}
	return interval, count
}

func (o *Options) maxFrame() int {
	if o.MaxFrameSize > 0 {
		return o.MaxFrameSize
	}
	return DefaultMaxFrameSize
}

func (o *Options) stallTimeout() time.Duration {
	if o.StallTimeout == 0 {
		return DefaultStallTimeout
	}
	return o.StallTimeout // negative: never
}

func (o *Options) streamWindow() uint32 {
	if o.StreamWindow >= 256<<10 {
		return o.StreamWindow
	}
	return DefaultStreamWindow
}

// Accept says whom a Receiver takes messages from.
type Accept uint8

const (
	// AcceptParent takes only messages that arrived on the parent link:
	// service calls from ancestors. The controller has no parent, so such a
	// receiver there takes nothing.
	AcceptParent Accept = iota + 1
	// AcceptSource takes only messages whose src is Receiver.Source: the
	// replies to one call. If the route to Source is lost, the router
	// delivers a FlagDead message so the waiter fails at once.
	AcceptSource
	// AcceptChildren takes messages from any descendant (log records).
	AcceptChildren
	// AcceptChild takes only messages that arrived on a child link from
	// the child at its far end itself, not from that child's own
	// descendants (which the link also routes): upcalls, the requests a
	// child makes of its parent (HandleUpcall). A grandchild asks its own
	// parent, never past it.
	AcceptChild
)

// Receiver is the destination of a handle.
type Receiver struct {
	Accept Accept
	Source uint32
	// Admit, if set, runs before Deliver on the same goroutine, once the
	// message has passed Accept's rule: an error refuses the message as
	// any breach of the policy is (dropped, nothing sent back, logged at
	// warn with the error as its reason, rate-limited per link). It
	// checks what a child may send an upcall receiver (its kind, its
	// size) and must not block.
	Admit func(*Message) error
	// Deliver runs on the reading goroutine of the link the message came
	// from, and must not block. A message with a Circuit must have its
	// circuit closed by Deliver or by whatever it hands it to.
	Deliver func(*Message)
}

// Router is one process's node of the message bus.
type Router struct {
	id   uint32
	opts Options
	log  *zap.Logger

	mu         sync.RWMutex
	parent     *Link
	routes     map[uint32]*Link // descendant id → child link toward it
	names      map[uint32]string
	children   map[*Link]struct{}
	receivers  map[uint32]*Receiver
	nextHandle uint32
	lostHooks  []func(RouteLoss)
	closed     bool

	now func() time.Time // the clock of refusal warnings' rate limit

	wg sync.WaitGroup
}

// RouteLoss describes contexts that became unreachable.
type RouteLoss struct {
	IDs    []uint32
	Reason string // names the broken hop
}

// ErrNoRoute is wrapped when a message has nowhere to go.
var ErrNoRoute = errors.New("no route")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("router closed")

// ErrLinkDown is wrapped when a message or circuit could not go out on a
// link that has died (its byte stream ended or broke), including in the
// moment before the router has noticed and removed its routes.
var ErrLinkDown = errors.New("link down")

// ErrPeerLimit is wrapped by the error of a link whose peer went past one
// of the limits in const.go (a ping flood, too many stream opens): the
// router dropped the link and logged one warning naming it.
var ErrPeerLimit = errors.New("disconnected")

// limitError is why a link's peer was disconnected.
type limitError struct{ why string }

func (e *limitError) Error() string { return ErrPeerLimit.Error() + ": " + e.why }
func (e *limitError) Unwrap() error { return ErrPeerLimit }

// New returns a router for context id.
func New(id uint32, opts Options) *Router {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Router{
		id: id, opts: opts, log: log,
		routes:     map[uint32]*Link{},
		names:      map[uint32]string{},
		children:   map[*Link]struct{}{},
		receivers:  map[uint32]*Receiver{},
		nextHandle: FirstDynamicHandle,
		now:        time.Now,
	}
}

// MaxFrameSize is the largest frame this router reads (Options.MaxFrameSize),
// which an agent announces in its hello.
func (r *Router) MaxFrameSize() int { return r.opts.maxFrame() }

// ID is this router's context id.
func (r *Router) ID() uint32 { return r.id }

// Register installs a receiver at a well-known handle.
func (r *Router) Register(handle uint32, rc Receiver) {
	r.mu.Lock()
	r.receivers[handle] = &rc
	r.mu.Unlock()
}

// NewReceiver installs rc at a fresh dynamic handle and returns it.
func (r *Router) NewReceiver(rc Receiver) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		h := r.nextHandle
		r.nextHandle++
		if r.nextHandle == 0 {
			r.nextHandle = FirstDynamicHandle
		}
		if _, used := r.receivers[h]; !used && h >= FirstDynamicHandle {
			r.receivers[h] = &rc
			// A reply receiver for an id that has no route would wait
			// forever: fail it now.
			if rc.Accept == AcceptSource && rc.Source != r.id && r.routeLocked(rc.Source) == nil {
				go rc.Deliver(r.deadMessage(h, rc.Source, fmt.Sprintf("no route to %s", r.nameLocked(rc.Source))))
			}
			return h
		}
	}
}

// Unregister removes a handle.
func (r *Router) Unregister(handle uint32) {
	r.mu.Lock()
	delete(r.receivers, handle)
	r.mu.Unlock()
}

// OnRouteLoss registers fn to run whenever contexts become unreachable. It
// runs on the goroutine that noticed the loss (a link's reader), after the
// waiting receivers have been failed, and must not block.
func (r *Router) OnRouteLoss(fn func(RouteLoss)) {
	r.mu.Lock()
	r.lostHooks = append(r.lostHooks, fn)
	r.mu.Unlock()
}

// Name returns the name this router knows for id ("" if none).
func (r *Router) Name(id uint32) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.nameLocked(id)
}

func (r *Router) nameLocked(id uint32) string {
	if n, ok := r.names[id]; ok {
		return n
	}
	return fmt.Sprintf("context %d", id)
}

// routeLocked returns the link a message to dst leaves on, or nil.
func (r *Router) routeLocked(dst uint32) *Link {
	if l := r.routes[dst]; l != nil {
		return l
	}
	if _, below := r.routes[dst]; below {
		return nil
	}
	return r.parent
}

// Send routes a message that originates here; m.Src is set to our id. It
// does not wait for the link m leaves on, except for a call when that
// link's queue is full (see the package comment, "Slow receivers"): then
// it waits for room, for as long as the link lives. SendContext bounds
// that wait.
func (r *Router) Send(m *Message) error { return r.SendContext(context.Background(), m) }

// SendContext is Send, where a call waiting for room on a link that is not
// draining stops waiting, with ctx's error, when ctx is done.
func (r *Router) SendContext(ctx context.Context, m *Message) error {
	m.Src = r.id
	if m.Dst == r.id {
		return r.deliverLocal(m, nil)
	}
	r.mu.RLock()
	if r.closed {
		r.mu.RUnlock()
		return ErrClosed
	}
	l := r.routeLocked(m.Dst)
	name := r.nameLocked(m.Dst)
	r.mu.RUnlock()
	if l == nil {
		return fmt.Errorf("%w to %s", ErrNoRoute, name)
	}
	return l.send(ctx, m, nil)
}

// Answer sends m, the answer to an upcall (a request a child made of
// this router at HandleUpcall), toward that child; m.Src is set to our
// id. A reply to a call from an ancestor is queued past a full link
// queue, since the calls let in bound those; how many upcalls a child
// makes is its own choice, so an answer waits for room in the queue
// as a call does, until ctx is done, and with a ctx already done is
// dropped (ctx's error) when the queue is full. What a child that asks
// without reading makes its parent hold is thus at most the queue's
// limit (linkQueueLimit) and one frame per answer being sent.
func (r *Router) Answer(ctx context.Context, m *Message) error {
	m.Src = r.id
	r.mu.RLock()
	if r.closed {
		r.mu.RUnlock()
		return ErrClosed
	}
	l := r.routes[m.Dst]
	name := r.nameLocked(m.Dst)
	r.mu.RUnlock()
	if l == nil {
		return fmt.Errorf("%w to %s (answers go to children only)", ErrNoRoute, name)
	}
	return l.enqueue(ctx, m, nil, true)
}

// receive handles a message that arrived on link from.
func (r *Router) receive(m *Message, from *Link) {
	r.mu.RLock()
	srcLink, srcBelow := r.routes[m.Src]
	r.mu.RUnlock()
	if from.toParent {
		if srcBelow || m.Src == r.id {
			r.refuse(m, from, "src claims to be in our own subtree")
			return
		}
	} else if srcLink != from {
		r.refuse(m, from, "src is not routed through this link")
		return
	}
	if m.Handle == HandleRoute {
		if !r.routeControl(m, from) {
			return
		}
	}
	if m.Dst == r.id {
		if err := r.deliverLocal(m, from); err != nil {
			r.refuse(m, from, err.Error())
		}
		return
	}
	if m.Handle == HandleUpcall && !from.toParent {
		// An upcall is for the sender's parent, which serves it or asks
		// its own parent in its own name: it is never forwarded up, so
		// nothing below can put a request to a grandparent or to the
		// controller.
		r.refuse(m, from, "upcalls go to the parent only")
		return
	}
	r.mu.RLock()
	next, below := r.routes[m.Dst]
	if !below && !from.toParent {
		next = r.parent // upward, toward an ancestor
	}
	r.mu.RUnlock()
	switch {
	case next == nil:
		r.bounce(m, from, fmt.Sprintf("no route to %s", r.Name(m.Dst)))
		return
	case !from.toParent && !next.toParent:
		r.refuse(m, from, "a target may not address another branch")
		return
	}
	if err := next.send(context.Background(), m, from); err != nil {
		if stalled := (*stalledError)(nil); errors.As(err, &stalled) {
			r.bounceError(m, from, stalledKind, stalled)
			return
		}
		if big := (*frameTooLargeError)(nil); errors.As(err, &big) {
			r.bounceError(m, from, tooLargeKind, big)
			return
		}
		r.bounce(m, from, err.Error())
	}
}

func (r *Router) deliverLocal(m *Message, from *Link) error {
	r.mu.RLock()
	rc := r.receivers[m.Handle]
	r.mu.RUnlock()
	if rc == nil {
		if m.Handle == HandleRoute && from != nil {
			return nil // processed on the way in
		}
		if from != nil && !from.toParent && (m.Handle == HandleCall || m.Handle == HandleControl) {
			// The controller serves nothing: a call from below is an
			// attack or a bug, not a missing service.
			return fmt.Errorf("service calls come from ancestors only (handle %d)", m.Handle)
		}
		if from != nil && !from.toParent && m.Handle == HandleUpcall {
			// Only agents serve upcalls: the controller does no work
			// for anything below it.
			return fmt.Errorf("no upcalls are served on %s", r.Name(r.id))
		}
		if from != nil {
			r.bounce(m, from, fmt.Sprintf("no receiver for handle %d on %s", m.Handle, r.Name(r.id)))
			return nil
		}
		return fmt.Errorf("%w: no receiver for handle %d", ErrNoRoute, m.Handle)
	}
	switch rc.Accept {
	case AcceptParent:
		if from == nil || !from.toParent {
			return fmt.Errorf("handle %d takes messages from the parent only", m.Handle)
		}
	case AcceptSource:
		if m.Src != rc.Source {
			return fmt.Errorf("handle %d takes messages from %s only", m.Handle, r.Name(rc.Source))
		}
	case AcceptChildren:
		if from == nil || from.toParent {
			return fmt.Errorf("handle %d takes messages from descendants only", m.Handle)
		}
	case AcceptChild:
		if from == nil || from.toParent || m.Src != from.child {
			return fmt.Errorf("handle %d takes messages from a direct child only, each on its own link", m.Handle)
		}
	default:
		return fmt.Errorf("handle %d accepts nothing", m.Handle)
	}
	if rc.Admit != nil {
		if err := rc.Admit(m); err != nil {
			return err
		}
	}
	rc.Deliver(m)
	return nil
}

// refuse drops a message that breaks the routing policy, and logs it
// (rate-limited per link).
func (r *Router) refuse(m *Message, from *Link, why string) {
	if m.Circuit != nil {
		m.Circuit.Close()
	}
	r.warnRefused(from, why, zap.Uint32("dst", m.Dst), zap.Uint32("src", m.Src), zap.Uint32("handle", m.Handle))
}

// warnRefused logs a refusal on link l, unless l has had its share of
// warnings this interval (refusalWarnBurst): then it is counted, and the
// next warning logged says how many went unlogged (more_refused).
func (r *Router) warnRefused(l *Link, why string, fields ...zap.Field) {
	ok, skipped := l.warns.allow(r.now())
	if !ok {
		return
	}
	fields = append([]zap.Field{zap.String("link", l.name), zap.String("why", why)}, fields...)
	if skipped > 0 {
		fields = append(fields, zap.Int("more_refused", skipped))
	}
	r.log.Warn("refused message", fields...)
}

// refuseOpen counts a stream that child link l opened, which yamux has
// reset (only a parent opens circuits), and drops the link past
// maxRefusedStreamOpens. It runs in yamux's receive loop.
func (r *Router) refuseOpen(l *Link, id uint32) error {
	l.refusedOpens++
	if l.refusedOpens > maxRefusedStreamOpens {
		return &limitError{fmt.Sprintf("%d stream opens refused (limit %d): circuits are opened by the parent only",
			l.refusedOpens, maxRefusedStreamOpens)}
	}
	r.warnRefused(l, "circuits are opened by the parent only", zap.Uint32("stream", id))
	return nil
}

// bounce tells the sender of an undeliverable request that it is dead, so
// that it fails at once instead of waiting.
func (r *Router) bounce(m *Message, from *Link, why string) {
	if m.Circuit != nil {
		m.Circuit.Close()
	}
	r.log.Debug("undeliverable message", zap.String("link", from.name), zap.String("why", why), zap.Stringer("msg", m))
	if m.ReplyTo == 0 || m.Flags&FlagDead != 0 {
		return
	}
	// The dead reply claims to come from the unreachable dst, since the
	// sender's reply receiver accepts only that source (AcceptSource). It
	// goes back on the link the message came from, where that src is
	// routed: a parent sent it to us because dst is in our subtree, and a
	// child's message to dst would have gone through us.
	d := r.deadMessage(m.ReplyTo, m.Dst, why)
	d.Dst = m.Src
	if err := from.send(context.Background(), d, from); err != nil {
		r.log.Debug("bounce failed", zap.Error(err))
	}
}

func (r *Router) deadMessage(handle, src uint32, why string) *Message {
	return &Message{Dst: r.id, Src: src, Handle: handle, Flags: FlagDead | FlagLast, Data: []byte(why)}
}

// AddChild runs a link to a new child context over conn. Call it on the
// parent side once the child's agent is running at the far end of conn. The
// route to id must not exist yet unless it was granted to this router by
// our parent.
func (r *Router) AddChild(ctx context.Context, conn io.ReadWriteCloser, id uint32, name string) (*Link, error) {
	l, err := newLink(ctx, conn, name, false, &r.opts, r.refuseOpen)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		l.close(ErrClosed)
		return nil, ErrClosed
	}
	if id == r.id || (r.routes[id] != nil && r.parent == nil) {
		r.mu.Unlock()
		l.close(nil)
		return nil, fmt.Errorf("context id %d is already in use", id)
	}
	l.child = id
	r.routes[id] = l
	r.names[id] = name
	r.children[l] = struct{}{}
	hasParent := r.parent != nil
	r.mu.Unlock()
	r.start(l)
	if hasParent {
		r.announce(routeAdd, []uint32{id}, "")
	}
	return l, nil
}

// Grant is called on the controller before asking context via to connect a
// new child id: it installs the route on every router between here and via.
func (r *Router) Grant(id, via uint32, name string) error {
	r.mu.Lock()
	l := r.routes[via]
	if l == nil {
		r.mu.Unlock()
		return fmt.Errorf("%w to %s", ErrNoRoute, r.nameLocked(via))
	}
	r.routes[id] = l
	r.names[id] = name
	r.mu.Unlock()
	data, err := encodeRouteMsg(routeMsg{Op: routeGrant, IDs: []uint32{id}, Names: []string{name}})
	if err != nil {
		return err
	}
	return r.Send(&Message{Dst: via, Handle: HandleRoute, Data: data})
}

// Revoke removes a granted route that will not be used (the connect
// failed). Routers between here and the parent keep their grant until the
// parent's link goes; it routes to nothing.
func (r *Router) Revoke(id uint32) {
	r.mu.Lock()
	if l := r.routes[id]; l != nil {
		if _, direct := r.children[l]; direct || r.parent == nil {
			delete(r.routes, id)
			delete(r.names, id)
		}
	}
	r.mu.Unlock()
}

// Serve runs the link to our parent over conn until it dies, then closes
// the router. It is the agent's main loop.
func (r *Router) Serve(ctx context.Context, conn io.ReadWriteCloser, parentName string) error {
	l, err := newLink(ctx, conn, parentName, true, &r.opts, nil)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.parent != nil || r.closed {
		r.mu.Unlock()
		l.close(nil)
		return errors.New("router already has a parent")
	}
	r.parent = l
	r.mu.Unlock()
	if n := r.opts.ParentMaxFrameSize; n > 0 {
		l.SetPeerMaxFrame(n)
	}
	r.start(l)
	select {
	case <-l.done:
	case <-ctx.Done():
		l.close(ctx.Err())
	}
	r.Close()
	return l.err
}

// Parent returns the parent link, or nil on the controller.
func (r *Router) Parent() *Link {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.parent
}

func (r *Router) start(l *Link) {
	r.wg.Add(2)
	go r.readLoop(l)
	go r.writeLoop(l)
	if l.toParent { // a child's streams are refused by yamux (refuseOpen)
		r.wg.Add(1)
		go r.acceptLoop(l)
	}
}

func (r *Router) readLoop(l *Link) {
	defer r.wg.Done()
	var err error
	hdr := make([]byte, frameHeaderSize)
	for {
		var m *Message
		m, err = readMessage(l.bus, hdr, nil, l.maxFrame)
		if err != nil {
			break
		}
		r.receive(m, l)
	}
	if errors.Is(err, ErrMalformed) || errors.Is(err, ErrFrameTooLarge) {
		r.log.Warn("protocol error, closing link", zap.String("link", l.name), zap.Error(err))
	}
	if errors.Is(err, yamux.ErrTimeout) && l.sess.IsClosed() {
		err = yamux.ErrSessionShutdown // the session's end unblocked us
	}
	// The session may have ended first, for a reason of its own: the
	// peer went past a limit, broke yamux's protocol, or the transport
	// ended. That is why the link died.
	if cause := l.sess.CloseErr(); cause != nil && !errors.Is(cause, yamux.ErrSessionShutdown) {
		err = cause
		if errors.Is(cause, yamux.ErrPingFlood) {
			err = &limitError{fmt.Sprintf("ping flood: it pings without reading the replies (%d waiting behind yamux's send queue)", maxPendingPongs)}
		}
	}
	// Logged before the link is marked dead, so that whoever waits on
	// Done finds them.
	more := l.warns.flush()
	var limit *limitError
	switch {
	case errors.As(err, &limit):
		fields := []zap.Field{zap.String("link", l.name), zap.String("why", limit.why)}
		if more > 0 {
			fields = append(fields, zap.Int("more_refused", more))
		}
		r.log.Warn("disconnected", fields...)
	case more > 0:
		r.log.Warn("refusals not logged", zap.String("link", l.name), zap.Int("more_refused", more))
	}
	// The stall watch marks the link dead itself, at once (its senders
	// fail, its streams unblock, even while this loop is held up); the
	// warning is said here, once.
	var stalled *stallError
	if errors.As(l.cause(), &stalled) {
		r.log.Warn("disconnected", zap.String("link", l.name), zap.String("why", stalled.why))
	}
	// Fail the link's waiters before shutting its session, which waits
	// for the transport: a stopped child exits only when killed.
	l.kill(err)
	r.linkLost(l)
	l.close(nil)
}

func (r *Router) acceptLoop(l *Link) {
	defer r.wg.Done()
	for {
		st, err := l.sess.AcceptStream()
		if err != nil {
			return
		}
		l.streams.add(st)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.handleCircuit(st, l)
		}()
	}
}

// handleCircuit reads the header of a circuit that arrived on the parent
// link from, and delivers or forwards it.
func (r *Router) handleCircuit(st net.Conn, from *Link) {
	st.SetReadDeadline(time.Now().Add(circuitHeaderTimeout))
	m, err := ReadMessage(st, nil, from.maxFrame)
	st.SetReadDeadline(time.Time{})
	if err != nil {
		st.Close()
		r.log.Warn("bad circuit header", zap.String("link", from.name), zap.Error(err))
		return
	}
	r.mu.RLock()
	_, srcBelow := r.routes[m.Src]
	r.mu.RUnlock()
	if srcBelow || m.Src == r.id {
		st.Close()
		r.refuse(m, from, "circuit src claims to be in our own subtree")
		return
	}
	if m.Dst == r.id {
		m.Circuit = st
		if err := r.deliverLocal(m, from); err != nil {
			r.refuse(m, from, err.Error())
		}
		return
	}
	r.mu.RLock()
	next := r.routes[m.Dst]
	r.mu.RUnlock()
	if next == nil {
		m.Circuit = st
		r.bounce(m, from, fmt.Sprintf("no route to %s", r.Name(m.Dst)))
		return
	}
	out, err := next.openStream(m)
	if err != nil {
		m.Circuit = st
		if big := (*frameTooLargeError)(nil); errors.As(err, &big) {
			r.bounceError(m, from, tooLargeKind, big)
			return
		}
		r.bounce(m, from, err.Error())
		return
	}
	splice(st, out)
}

// OpenCircuit opens a circuit toward a descendant. m is its header; m.Src
// is set to our id. The receiver at m.Dst gets m with the circuit attached.
func (r *Router) OpenCircuit(m *Message) (Circuit, error) {
	m.Src = r.id
	r.mu.RLock()
	next := r.routes[m.Dst]
	name := r.nameLocked(m.Dst)
	r.mu.RUnlock()
	if next == nil {
		return nil, fmt.Errorf("%w to %s (circuits go to descendants only)", ErrNoRoute, name)
	}
	return next.openStream(m)
}

// linkLost removes every route through a dead child link, fails the calls
// waiting on those contexts and tells our parent.
func (r *Router) linkLost(l *Link) {
	r.mu.Lock()
	if l.toParent {
		r.mu.Unlock()
		return // Serve sees l.done and closes the router
	}
	delete(r.children, l)
	var ids []uint32
	for id, via := range r.routes {
		if via == l {
			ids = append(ids, id)
			delete(r.routes, id)
		}
	}
	hasParent := r.parent != nil && !r.closed
	r.mu.Unlock()
	reason := l.err.Error()
	if r.id != ControllerID {
		reason = r.Name(r.id) + ": " + reason
	}
	r.lost(ids, reason)
	if hasParent && len(ids) > 0 {
		r.announce(routeDel, ids, reason)
	}
}

// lost fails every reply receiver waiting on ids and runs the loss hooks.
func (r *Router) lost(ids []uint32, reason string) {
	if len(ids) == 0 {
		return
	}
	set := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	type dead struct {
		rc *Receiver
		h  uint32
	}
	var deads []dead
	r.mu.RLock()
	for h, rc := range r.receivers {
		if rc.Accept == AcceptSource && set[rc.Source] {
			deads = append(deads, dead{rc, h})
		}
	}
	hooks := append([]func(RouteLoss){}, r.lostHooks...)
	r.mu.RUnlock()
	for _, d := range deads {
		d.rc.Deliver(r.deadMessage(d.h, d.rc.Source, reason))
	}
	loss := RouteLoss{IDs: ids, Reason: reason}
	for _, fn := range hooks {
		fn(loss)
	}
}

// Close kills every link and waits for the router's goroutines.
func (r *Router) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.wg.Wait()
		return nil
	}
	r.closed = true
	links := make([]*Link, 0, len(r.children)+1)
	for l := range r.children {
		links = append(links, l)
	}
	if r.parent != nil {
		links = append(links, r.parent)
	}
	r.mu.Unlock()
	for _, l := range links {
		l.close(ErrClosed)
	}
	r.wg.Wait()
	return nil
}
