package router

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// keepalive declares a link to a child dead when countMax keepalives in
// a row went unanswered (doc.go, "Dead links"), as ssh's
// ServerAliveCountMax counts them. At each interval with nothing read it
// pings the child (a yamux ping, which the child's yamux receive loop
// answers by itself, whatever its router is doing), so that a healthy
// idle child has something to say; any byte read counts as an answer, so
// a busy link whose pong waits behind bulk data is not taken for a dead
// one. A timer, not a goroutine, waits
// between checks; one goroutine at most runs a ping, which ends when the
// pong arrives or the session does.
type keepalive struct {
	l *Link

	mu       sync.Mutex
	interval time.Duration // ≤ 0: off
	countMax int
	timer    *time.Timer
	mark     uint64 // the transport's read count at the last check
	missed   int    // keepalives in a row that found nothing read after them
	stopped  bool
	pinging  atomic.Bool
	pings    sync.WaitGroup
	sent     atomic.Int64 // pings sent, for tests
}

// set (re)starts the keepalive with interval and countMax; interval ≤ 0
// stops it.
func (k *keepalive) set(interval time.Duration, countMax int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	k.interval, k.countMax, k.missed = interval, max(countMax, 1), 0
	k.mark = k.l.conn.read.Load()
	if k.timer != nil {
		k.timer.Stop()
	}
	if interval <= 0 {
		return
	}
	if k.timer == nil {
		k.timer = time.AfterFunc(interval, k.check)
	} else {
		k.timer.Reset(interval)
	}
}

// check runs on the timer.
func (k *keepalive) check() {
	k.mu.Lock()
	if k.stopped || k.interval <= 0 || k.l.Err() != nil {
		k.mu.Unlock()
		return
	}
	n := k.l.conn.read.Load()
	if n != k.mark {
		k.mark, k.missed = n, 0
		k.timer.Reset(k.interval)
		k.mu.Unlock()
		return
	}
	if k.missed >= k.countMax {
		k.stopped = true
		interval, count := k.interval, k.countMax
		k.mu.Unlock()
		k.l.kill(&stallError{fmt.Sprintf("no answer to keepalives: its transport delivered nothing for %v (%d keepalives %v apart, Options.KeepaliveInterval and KeepaliveCountMax)",
			time.Duration(count+1)*interval, count, interval)})
		return
	}
	k.missed++
	if k.pinging.CompareAndSwap(false, true) {
		k.pings.Add(1)
		k.sent.Add(1)
		go func() {
			defer k.pings.Done()
			defer k.pinging.Store(false)
			k.l.sess.Ping() //nolint:errcheck // the pong, or the session's end, is all it waits for
		}()
	}
	k.timer.Reset(k.interval)
	k.mu.Unlock()
}

// stop stops the keepalive for good and waits for its ping, which the
// session's end (the caller closes it first) ends.
func (k *keepalive) stop() {
	k.mu.Lock()
	k.stopped = true
	if k.timer != nil {
		k.timer.Stop()
	}
	k.mu.Unlock()
	k.pings.Wait()
}

// SetKeepalive sets how often the link's transport must deliver
// something, and how many intervals in a row it may stay silent before
// the link is declared dead (Options.KeepaliveInterval and
// KeepaliveCountMax, for this link only); interval ≤ 0 turns the
// keepalive off. A link to the parent has none, whatever this says.
func (l *Link) SetKeepalive(interval time.Duration, countMax int) {
	if l.toParent {
		return
	}
	l.alive.set(interval, countMax)
}
