package router

import (
	"context"
	"fmt"
	"sync"

	"github.com/spindle-rpc/spindle/internal/wire"
	"go.uber.org/zap"
)

// stalledError refuses a call forwarded toward a link whose queue is full
// (doc.go, "Slow receivers").
type stalledError struct {
	link   string
	queued int
}

func (e *stalledError) Error() string {
	return fmt.Sprintf("the link to %s is not draining: %s queued (stopped, wedged, or too slow for what is sent to it); the call was refused and did not run",
		e.link, sizeText(e.queued))
}

// remoteError is rpc.RemoteError's encoding (PROTOCOL.md section 9),
// which the router cannot import: a router answers a refused call with
// it, so that the caller gets an error of kind "stalled".
type remoteError struct {
	Kind    string `msgpack:"k,omitempty"`
	Message string `msgpack:"msg"`
}

// stalledKind is errkind.ErrStalled's name on the wire.
const stalledKind = "stalled"

func sizeText(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// outQueue is a link's outgoing bus: frames that any goroutine appends
// (Link.send) and the link's one writer goroutine (Router.writeLoop)
// writes, in order. Only the writer ever waits for the link's transport.
type outQueue struct {
	mu      sync.Mutex
	room    chan struct{} // closed when a batch has been written or the link died; nil: nobody waits
	buf     []byte        // frames the writer has not taken yet
	spare   []byte        // the buffer of the writer's last batch, for reuse
	queued  int           // bytes in buf and in the batch being written
	writing bool          // the writer has been woken and has not gone back to sleep
	dead    bool          // the link died: nothing more is queued
	dropped int           // log records dropped since the writer last said so
	wake    chan struct{}
}

func (q *outQueue) init() {
	q.wake = make(chan struct{}, 1)
}

// waitRoom waits, with q.mu held, until the queue is below its limit or
// the link is dead, or ctx is done.
func (q *outQueue) waitRoom(ctx context.Context) error {
	for q.queued >= linkQueueLimit && !q.dead {
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
			q.mu.Lock()
		case <-ctx.Done():
			q.mu.Lock()
			return ctx.Err()
		}
	}
	return nil
}

// wakeWaiters tells the goroutines in waitRoom to look again; q.mu is held.
func (q *outQueue) wakeWaiters() {
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
}

// send queues m for the link's writer; it never waits for the link's
// transport. from is the link m arrived on, nil for a message that
// originates here. When the link has linkQueueLimit bytes queued:
//
//   - a log record is dropped;
//   - a call from another link is refused with a *stalledError (the
//     router answers it): the reader that forwards it must not wait;
//   - a call that originates here waits for room, until ctx is done: the
//     caller is the one who can slow down;
//   - any other message from a child link waits for room: that holds back
//     the child it came from (whose reader this is), and nothing else;
//   - anything else (a control, route message, reply or bounce from the
//     parent link or from this router) is queued past the limit: the
//     parent link's reader never waits, a cancel is never refused, and
//     the calls already let in bound these.
func (l *Link) send(ctx context.Context, m *Message, from *Link) error {
	return l.enqueue(ctx, m, from, false)
}

// enqueue is send; with wait, m waits for room as a call that
// originates here does (Router.Answer).
func (l *Link) enqueue(ctx context.Context, m *Message, from *Link, wait bool) error {
	if err := l.checkFrame(m, false); err != nil {
		return err
	}
	q := &l.q
	q.mu.Lock()
	if q.queued >= linkQueueLimit && !q.dead {
		switch {
		case m.Handle == HandleLog:
			q.dropped++
			q.mu.Unlock()
			return nil
		case m.Handle == HandleCall && from != nil:
			n := q.queued
			q.mu.Unlock()
			return &stalledError{link: l.name, queued: n}
		case wait, m.Handle == HandleCall, from != nil && !from.toParent:
			if err := q.waitRoom(ctx); err != nil {
				q.mu.Unlock()
				return err
			}
		}
	}
	if q.dead {
		why := l.err // set before dead, under q.mu
		q.mu.Unlock()
		return fmt.Errorf("send to %s: %w: %v", l.name, ErrLinkDown, why)
	}
	n := len(q.buf)
	q.buf = AppendFrame(q.buf, m)
	q.queued += len(q.buf) - n
	idle := !q.writing
	q.writing = true
	q.mu.Unlock()
	if idle {
		q.wake <- struct{}{} // never blocks: sent only when writing turns true
	}
	return nil
}

// writeLoop is the link's one writer: each turn it takes everything
// queued and writes it to the bus in one write.
func (r *Router) writeLoop(l *Link) {
	defer r.wg.Done()
	defer l.stall.stop()
	q := &l.q
	for {
		select {
		case <-q.wake:
		case <-l.done:
			return
		}
		for {
			q.mu.Lock()
			if len(q.buf) == 0 || q.dead {
				q.writing = false
				q.mu.Unlock()
				break
			}
			batch := q.buf
			q.buf, q.spare = q.spare, nil
			q.mu.Unlock()

			l.stall.begin(&l.stall.bus)
			_, err := l.bus.Write(batch)
			l.stall.end(&l.stall.bus)

			q.mu.Lock()
			q.queued -= len(batch)
			q.wakeWaiters()
			if cap(batch) <= maxIdleQueueBuf {
				q.spare = batch[:0]
			}
			dropped := 0
			if q.dropped > 0 && q.queued < linkQueueLimit {
				dropped, q.dropped = q.dropped, 0
			}
			q.mu.Unlock()
			if dropped > 0 {
				r.log.Warn("log records dropped: the link was not draining",
					zap.String("link", l.name), zap.Int("records", dropped))
			}
			if err != nil {
				// A session that has ended unblocks the read loop, which
				// says why the link died (the transport's end, a peer past
				// a limit); a bus that fails on a live session is ours.
				if !l.sess.IsClosed() {
					l.kill(fmt.Errorf("write to its bus: %w", l.deadErr(err)))
				}
				return
			}
		}
	}
}

// bounceError answers a call refused on its way (its next link is not
// draining: kind "stalled"; it exceeds that link's frame limit:
// "too_large") with an error of that kind, on the link the call came
// from.
func (r *Router) bounceError(m *Message, from *Link, kind string, err error) {
	if m.Circuit != nil {
		m.Circuit.Close()
	}
	r.log.Debug("call refused", zap.String("link", from.name), zap.Error(err), zap.Stringer("msg", m))
	if m.ReplyTo == 0 || m.Flags&FlagDead != 0 {
		return
	}
	data, encErr := wire.Marshal(&remoteError{Kind: kind, Message: err.Error()})
	if encErr != nil {
		r.bounce(m, from, err.Error())
		return
	}
	reply := &Message{Dst: m.Src, Src: m.Dst, Handle: m.ReplyTo, Flags: FlagLast | FlagError, Data: data}
	if err := from.send(context.Background(), reply, from); err != nil {
		r.log.Debug("bounce failed", zap.Error(err))
	}
}
