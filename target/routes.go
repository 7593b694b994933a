package target

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/spindle-rpc/spindle"
)

// Open connects steps one after the other on ctl: the first by the
// controller, each later one by the previous step's agent. It returns the
// context at the end of the chain.
func Open(ctx context.Context, ctl *spindle.Controller, steps []Step) (*spindle.Context, error) {
	if len(steps) == 0 {
		return nil, errors.New("target: no steps to open")
	}
	cx, err := ctl.Connect(ctx, steps[0].Connector)
	for _, s := range steps[1:] {
		if err != nil {
			break
		}
		cx, err = cx.Connect(ctx, s.Connector)
	}
	return cx, err
}

// Routes opens chains through one controller, each distinct route (the
// hops that lead to a context) once, however many chains begin with it
// and however many goroutines ask at once: forty hosts behind one bastion
// dial the bastion once, and its agent starts the forty. A route whose
// context has died is opened anew by the next chain that needs it. Routes
// are identified by their hops' canonical strings, so the steps of chains
// that share a route must have been built with the same Options.
type Routes struct {
	ctl *spindle.Controller
	// RetryFailed: a route that failed to connect is tried again by the
	// next chain that needs it (a daemon, whose routes serve requests for
	// hours); else its error is every later chain's (one command over
	// forty hosts asks for the bastion's password once). Set it before
	// the first Open.
	RetryFailed bool
	mu          sync.Mutex
	m           map[string]*route
}

type route struct {
	done chan struct{}
	cx   *spindle.Context
	err  error
}

// NewRoutes returns the routes of ctl, none open yet.
func NewRoutes(ctl *spindle.Controller) *Routes {
	return &Routes{ctl: ctl, m: map[string]*route{}}
}

// Controller is the controller the routes are opened on.
func (r *Routes) Controller() *spindle.Controller { return r.ctl }

// stale says whether a route must be connected anew rather than waited
// for or used.
func (rt *route) stale(retryFailed bool) bool {
	select {
	case <-rt.done:
	default:
		return false // being connected
	}
	if rt.err != nil {
		return retryFailed || errors.Is(rt.err, context.Canceled) || errors.Is(rt.err, context.DeadlineExceeded)
	}
	select {
	case <-rt.cx.Done():
		return true
	default:
		return false
	}
}

// Open returns the context at the end of steps, connecting only the part
// of the chain that no other chain has connected (or is connecting).
func (r *Routes) Open(ctx context.Context, steps []Step) (*spindle.Context, error) {
	if len(steps) == 0 {
		return nil, errors.New("target: no steps to open")
	}
	var cx *spindle.Context
	names := make([]string, len(steps))
	for i, step := range steps {
		names[i] = step.Hop.String()
		key := strings.Join(names[:i+1], "\x00")
		for {
			r.mu.Lock()
			rt, ok := r.m[key]
			if ok && rt.stale(r.RetryFailed) {
				ok = false
			}
			if !ok {
				rt = &route{done: make(chan struct{})}
				r.m[key] = rt
			}
			r.mu.Unlock()
			if !ok {
				if i == 0 {
					rt.cx, rt.err = r.ctl.Connect(ctx, step.Connector)
				} else {
					rt.cx, rt.err = cx.Connect(ctx, step.Connector) // started by the previous hop's agent
				}
				close(rt.done)
			} else {
				select {
				case <-rt.done:
				case <-ctx.Done():
					return nil, fmt.Errorf("waiting for %s, which another target connects: %w", names[i], ctx.Err())
				}
				// Another chain's deadline or Ctrl-C ended the connect
				// this one waited for: not this one's failure.
				if rt.stale(false) && ctx.Err() == nil {
					continue
				}
			}
			if rt.err != nil {
				return nil, rt.err
			}
			cx = rt.cx
			break
		}
	}
	return cx, nil
}
