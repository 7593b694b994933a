package ratelimit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/ratelimit"
	"github.com/spindle-rpc/spindle/internal/testkit/fakeclock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reports collects what a Limiter reports.
type reports struct {
	mu sync.Mutex
	n  []uint64
}

func (r *reports) add(n uint64) {
	r.mu.Lock()
	r.n = append(r.n, n)
	r.mu.Unlock()
}

func (r *reports) all() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.n...)
}

func allowed(l *ratelimit.Limiter, n int) int {
	ok := 0
	for range n {
		if l.Allow() {
			ok++
		}
	}
	return ok
}

func TestBurstThenDropsReportedAtTheEndOfTheInterval(t *testing.T) {
	clock := fakeclock.New()
	var rep reports
	l := ratelimit.New(100, 1000, 5*time.Second, clock, rep.add)
	if got := allowed(l, 1500); got != 1000 {
		t.Fatalf("a still clock let %d of 1500 events through, want the burst of 1000", got)
	}
	if r := rep.all(); len(r) != 0 {
		t.Fatalf("reported %v before the interval ended", r)
	}
	clock.Advance(5*time.Second - time.Nanosecond)
	if r := rep.all(); len(r) != 0 {
		t.Fatalf("reported %v before the interval ended", r)
	}
	clock.Advance(time.Nanosecond)
	if r := rep.all(); len(r) != 1 || r[0] != 500 {
		t.Fatalf("reports %v, want one of 500", r)
	}
	if clock.Pending() != 0 {
		t.Fatalf("%d reports still scheduled with nothing dropped", clock.Pending())
	}
}

func TestRefillAtTheRate(t *testing.T) {
	clock := fakeclock.New()
	var rep reports
	l := ratelimit.New(100, 1000, 5*time.Second, clock, rep.add)
	allowed(l, 1000)
	clock.Advance(250 * time.Millisecond)
	if got := allowed(l, 100); got != 25 {
		t.Fatalf("after 250 ms at 100/s, %d events passed, want 25", got)
	}
	clock.Advance(time.Hour)
	if got := allowed(l, 2000); got != 1000 {
		t.Fatalf("after an hour, %d events passed, want the burst (1000)", got)
	}
}

// A flood that lasts several intervals gives one report per interval,
// and the reports add up to every event dropped.
func TestOneReportPerInterval(t *testing.T) {
	clock := fakeclock.New()
	var rep reports
	l := ratelimit.New(100, 1000, 5*time.Second, clock, rep.add)
	total, passed := 0, 0
	for range 23 { // 23 s of 1000 events a second
		passed += allowed(l, 1000)
		total += 1000
		clock.Advance(time.Second)
	}
	clock.Advance(5 * time.Second)
	r := rep.all()
	if len(r) != 5 {
		t.Fatalf("%d reports for a 23 s flood in 5 s intervals, want 5: %v", len(r), r)
	}
	var sum uint64
	for _, n := range r {
		sum += n
	}
	if want := uint64(total - passed); sum != want {
		t.Fatalf("reports %v add up to %d, want %d dropped", r, sum, want)
	}
	// burst + rate × elapsed: 1000 + 100 × 22 s.
	if passed > 1000+100*22 {
		t.Fatalf("%d passed, more than the burst plus the rate allows", passed)
	}
}

func TestCloseReportsAtOnceAndCancels(t *testing.T) {
	clock := fakeclock.New()
	var rep reports
	l := ratelimit.New(100, 10, 5*time.Second, clock, rep.add)
	allowed(l, 17)
	l.Close()
	if r := rep.all(); len(r) != 1 || r[0] != 7 {
		t.Fatalf("Close reported %v, want 7", r)
	}
	if clock.Pending() != 0 {
		t.Fatal("the pending report survived Close")
	}
	clock.Advance(time.Minute)
	l.Close()
	if r := rep.all(); len(r) != 1 {
		t.Fatalf("reports after Close with nothing dropped: %v", r)
	}
}

func TestConcurrentAllow(t *testing.T) {
	clock := fakeclock.New()
	var rep reports
	l := ratelimit.New(100, 1000, 5*time.Second, clock, rep.add)
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := allowed(l, 500)
			mu.Lock()
			passed += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	clock.Advance(5 * time.Second)
	if r := rep.all(); passed != 1000 || len(r) != 1 || r[0] != 3000 {
		t.Fatalf("%d passed and reports %v; want 1000 and [3000]", passed, r)
	}
}

// The real clock's pending report is cancelled by Close: no timer or
// goroutine outlives the limiter (goleak checks).
func TestSystemClockClose(t *testing.T) {
	var rep reports
	l := ratelimit.New(1, 1, time.Hour, nil, rep.add)
	l.Allow()
	l.Allow()
	l.Close()
	if r := rep.all(); len(r) != 1 || r[0] != 1 {
		t.Fatalf("reports %v", r)
	}
}

func TestSummary(t *testing.T) {
	l := ratelimit.New(100, 1000, time.Second, fakeclock.New(), func(uint64) {})
	if got := l.Summary(12345, "log records"); got != "12,345 log records dropped (more than 100/s)" {
		t.Errorf("Summary = %q", got)
	}
	for n, want := range map[uint64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 123456: "123,456", 1234567: "1,234,567"} {
		if got := ratelimit.Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
