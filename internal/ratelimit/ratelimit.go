// Package ratelimit bounds how often something the far end can trigger at
// will reaches the user, such as an agent's log records. A Limiter is a
// token bucket whose excess is dropped, counted, and reported in one
// summary per interval, so that a flood costs a line now and then instead
// of the terminal.
package ratelimit

import (
	"strconv"
	"sync"
	"time"
)

// Clock is what a Limiter reads the time from and schedules its reports
// with: System, or a fake that tests move by hand.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f once, d from now, unless stop is called first
	// (stop reports whether it prevented the call).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// System is the real clock.
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Limiter lets Burst events pass at once and Rate a second on average.
// Events beyond that are dropped and counted; the count is handed to the
// report function once per interval, at the end of the interval that the
// first of them started. It is safe for concurrent use.
type Limiter struct {
	rate     float64
	burst    float64
	interval time.Duration
	clock    Clock
	report   func(dropped uint64)

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped uint64
	stop    func() bool // cancels the pending report; nil when none
	closed  bool
}

// New returns a Limiter with a full bucket. report runs on a goroutine of
// the clock's (or Close's caller), never with the Limiter's lock held, and
// only with a count above zero.
func New(rate float64, burst int, interval time.Duration, clock Clock, report func(dropped uint64)) *Limiter {
	if clock == nil {
		clock = System
	}
	return &Limiter{rate: rate, burst: float64(burst), interval: interval, clock: clock, report: report,
		tokens: float64(burst), last: clock.Now()}
}

// Allow reports whether one more event may pass now. An event that may
// not is counted for the next report.
func (l *Limiter) Allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := l.clock.Now(); now.After(l.last) {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
		l.last = now
	}
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	l.dropped++
	if l.stop == nil && !l.closed {
		l.stop = l.clock.AfterFunc(l.interval, l.flush)
	}
	return false
}

// flush reports the drops counted since the last report.
func (l *Limiter) flush() {
	l.mu.Lock()
	n := l.dropped
	l.dropped, l.stop = 0, nil
	l.mu.Unlock()
	if n > 0 {
		l.report(n)
	}
}

// Close reports at once the drops not reported yet and cancels the
// pending report: for when the source of the events is gone, so that
// nothing runs after it. Events after Close are still limited; their drops
// are reported only by another Close.
func (l *Limiter) Close() {
	l.mu.Lock()
	if l.stop != nil {
		l.stop()
		l.stop = nil
	}
	l.closed = true
	n := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	if n > 0 {
		l.report(n)
	}
}

// Summary is the text of a report of n dropped events named what:
// "12,345 log records dropped (more than 100/s)".
func (l *Limiter) Summary(n uint64, what string) string {
	return Thousands(n) + " " + what + " dropped (more than " + strconv.FormatFloat(l.rate, 'f', -1, 64) + "/s)"
}

// Thousands formats n with a comma between groups of three digits.
func Thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
