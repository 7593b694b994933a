package router

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// stallWatch declares a link to a child dead once it has had something to
// write (bus frames waiting for the writer, or a write to the transport in
// progress) for its timeout while the transport took not a byte (doc.go,
// "Slow receivers"). A healthy child reads its transport all the time
// (yamux's flow control is per stream, so a slow circuit reader does not
// stop it), so that is a stopped process or a wedged connection. A timer
// runs only while there is something to write: an idle link costs nothing.
type stallWatch struct {
	l       *Link
	timeout atomic.Int64 // nanoseconds; ≤ 0: never

	bus   atomic.Bool   // the writer is in a bus write
	conn  atomic.Bool   // a write to the transport is in progress
	since atomic.Int64  // when the wait began, or the transport last moved (UnixNano)
	mark  atomic.Uint64 // the transport's byte count at since
	armed atomic.Bool   // the timer is pending or running

	tmu   sync.Mutex  // guards timer
	timer *time.Timer // created by the first arming
}

// begin marks the start of a wait on flag (w.bus or w.conn).
func (w *stallWatch) begin(flag *atomic.Bool) {
	d := w.timeout.Load()
	if d <= 0 {
		return
	}
	w.mark.Store(w.l.conn.written.Load())
	w.since.Store(time.Now().UnixNano())
	flag.Store(true)
	if w.armed.CompareAndSwap(false, true) {
		w.arm(time.Duration(d))
	}
}

// end marks the end of a wait on flag.
func (w *stallWatch) end(flag *atomic.Bool) { flag.Store(false) }

func (w *stallWatch) arm(d time.Duration) {
	w.tmu.Lock()
	defer w.tmu.Unlock()
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.check)
	} else {
		w.timer.Reset(d)
	}
}

// check runs on the timer.
func (w *stallWatch) check() {
	d := time.Duration(w.timeout.Load())
	w.armed.Store(false)
	if (!w.bus.Load() && !w.conn.Load()) || d <= 0 {
		// Nothing to write: a wait that begins after the loads above
		// finds armed false (stored before them) and arms the timer.
		return
	}
	now := time.Now().UnixNano()
	if n := w.l.conn.written.Load(); n != w.mark.Load() {
		w.mark.Store(n) // the transport moved: the link is slow, not stalled
		w.since.Store(now)
	}
	if left := d - time.Duration(now-w.since.Load()); left > 0 {
		if w.armed.CompareAndSwap(false, true) {
			w.arm(left)
		}
		return
	}
	l := w.l
	l.q.mu.Lock()
	queued := l.q.queued
	l.q.mu.Unlock()
	waiting := ""
	if queued > 0 {
		waiting = fmt.Sprintf(", %s of messages waiting", sizeText(queued))
	}
	l.kill(&stallError{fmt.Sprintf("not draining: its transport took nothing for %v%s (the stall bound, Options.StallTimeout)",
		d, waiting)})
}

// stallError is why a link was declared dead by its stall watch or its
// keepalive.
type stallError struct{ why string }

func (e *stallError) Error() string { return e.why }

// stop stops the timer for good (the writer has exited).
func (w *stallWatch) stop() {
	w.timeout.Store(0)
	w.tmu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.tmu.Unlock()
}

// SetStallTimeout sets the bound after which the link, if not draining, is
// declared dead (Options.StallTimeout, for this link only); d ≤ 0 means
// never. A link to the parent is never timed, whatever this says.
func (l *Link) SetStallTimeout(d time.Duration) {
	if l.toParent {
		return
	}
	if d <= 0 {
		d = 0
	}
	w := &l.stall
	w.timeout.Store(int64(d))
	// A pending check keeps the old bound's time: bring it to the new one.
	w.tmu.Lock()
	if w.timer != nil && d > 0 && w.armed.Load() {
		w.timer.Reset(d)
	}
	w.tmu.Unlock()
}
