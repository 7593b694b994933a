package target

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/local"
)

// Chains that begin with the same hops get one context for them, however
// many ask at once.
func TestRoutesShared(t *testing.T) {
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	r := NewRoutes(ctl)
	ctx := context.Background()
	cxs := make([]*spindle.Context, 8)
	var wg sync.WaitGroup
	for i := range cxs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cx, err := r.Open(ctx, []Step{{Hop: Hop{Kind: "local"}, Connector: local.Options{}}})
			if err != nil {
				t.Error(err)
			}
			cxs[i] = cx
		}()
	}
	wg.Wait()
	if slices.ContainsFunc(cxs, func(cx *spindle.Context) bool { return cx == nil || cx != cxs[0] }) {
		t.Fatalf("eight connects of one route made several contexts: %v", cxs)
	}
	other, err := r.Open(ctx, []Step{{Hop: Hop{Kind: "local2"}, Connector: local.Options{ContextName: "local2"}}})
	if err != nil || other == cxs[0] {
		t.Fatalf("another route: %v, %v", other, err)
	}
}

// flakyConnector is a local agent whose first fails starts fail.
type flakyConnector struct {
	local.Options
	mu            sync.Mutex
	fails, starts int
}

func (f *flakyConnector) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	f.mu.Lock()
	f.starts++
	fail := f.starts <= f.fails
	f.mu.Unlock()
	if fail {
		return nil, errors.New("flaky: refused")
	}
	return f.Options.Start(ctx, req)
}

func (f *flakyConnector) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts
}

// A route that failed is every later chain's failure, unless RetryFailed
// (a daemon's); a route whose context died is connected anew.
func TestRoutesStale(t *testing.T) {
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	r := NewRoutes(ctl)
	ctx := context.Background()
	f := &flakyConnector{fails: 1}
	steps := []Step{{Hop: Hop{Kind: "flaky"}, Connector: f}}
	for range 2 {
		if _, err := r.Open(ctx, steps); err == nil || !strings.Contains(err.Error(), "flaky: refused") {
			t.Fatalf("a failing hop: %v", err)
		}
	}
	if n := f.count(); n != 1 {
		t.Errorf("a failed route was started %d times, want once", n)
	}
	r.RetryFailed = true
	cx, err := r.Open(ctx, steps)
	if err != nil || f.count() != 2 {
		t.Fatalf("retryFailed: %v after %d starts, want a context after 2", err, f.count())
	}
	if again, err := r.Open(ctx, steps); err != nil || again != cx || f.count() != 2 {
		t.Errorf("a live route: %v, %v, %d starts; want the same context, not started again", again, err, f.count())
	}
	cx.Close()
	again, err := r.Open(ctx, steps)
	if err != nil || again == cx || again.Err() != nil || f.count() != 3 {
		t.Errorf("a dead route: %v, %v, %d starts; want a new live context", again, err, f.count())
	}
}
