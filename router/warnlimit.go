package router

import (
	"sync"
	"time"
)

// warnLimiter rate-limits the refusal warnings of one link: the first
// refusalWarnBurst of every refusalWarnInterval pass, the rest are counted
// and handed to the next one that passes, or to the link's end.
type warnLimiter struct {
	mu      sync.Mutex
	start   time.Time // of the current interval
	passed  int       // warnings passed in the current interval
	skipped int       // refusals not logged since the last that was
}

// allow says whether to log a refusal at now and, if so, how many went
// unlogged before it.
func (w *warnLimiter) allow(now time.Time) (ok bool, skipped int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := now.Sub(w.start); d >= refusalWarnInterval || d < 0 {
		w.start, w.passed = now, 0
	}
	if w.passed >= refusalWarnBurst {
		w.skipped++
		return false, 0
	}
	w.passed++
	skipped, w.skipped = w.skipped, 0
	return true, skipped
}

// flush returns the refusals not logged yet, and forgets them.
func (w *warnLimiter) flush() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.skipped
	w.skipped = 0
	return n
}
