package daemon

import (
	"context"
	"errors"
	"sync"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/services/sys"
	"github.com/spindle-rpc/spindle/target"
	"go.uber.org/zap"
)

// Key names a kept connection.
type Key struct {
	// Settings names everything the chain's connectors were built with
	// besides the hops (an endpoint's connection flags, options, the
	// client's environment): connections with the same Settings share a
	// Group.
	Settings string
	// Target names the chain: its hops, with any that an endpoint puts
	// before them (-J).
	Target string
}

// Group is the kept connections made with one Settings: one controller,
// whose routes every chain shares, so that web1 and web2 behind one
// bastion dial it once, whether they come in one request or in two.
type Group struct {
	Controller *spindle.Controller
	Routes     *target.Routes // RetryFailed: a failure is not kept for hours
	Log        *zap.Logger    // the controller's
}

// Conn is one kept connection.
type Conn struct {
	Context *spindle.Context
	Steps   []target.Step // the chain it was opened through
	Group   *Group
}

// Dialer says how to make a connection that the registry does not keep
// yet (or that died).
type Dialer struct {
	// NewGroup makes the controller of a Settings seen for the first
	// time, and its logger.
	NewGroup func() (*spindle.Controller, *zap.Logger)
	// Open opens the chain on g's routes: it builds the chain's steps
	// (asking for the passwords it needs: only now, when a connection is
	// made) and opens them (g.Routes.Open). Its error is Get's, as is.
	Open func(ctx context.Context, g *Group) (*spindle.Context, []target.Step, error)
	// Log hears of connections reused, lost and made (the request's
	// logger); nil: nothing is said.
	Log *zap.Logger
}

// Registry keeps connections open between requests, by Key, for every
// endpoint of a daemon: a request for a key whose connection is alive
// gets it; one whose connection died (the network, the agent killed)
// gets a new one. Requests for one key at once make one connection.
type Registry struct {
	mu     sync.Mutex
	groups map[string]*Group
	slots  map[Key]*slot
}

// slot is one key's kept connection; mu is held while connecting.
type slot struct {
	mu sync.Mutex
	c  *Conn
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{groups: map[string]*Group{}, slots: map[Key]*slot{}}
}

func (r *Registry) slot(key Key) *slot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.slots[key]
	if s == nil {
		s = &slot{}
		r.slots[key] = s
	}
	return s
}

func (r *Registry) group(settings string, d Dialer) *Group {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[settings]
	if g == nil {
		ctl, log := d.NewGroup()
		if log == nil {
			log = zap.NewNop()
		}
		g = &Group{Controller: ctl, Routes: target.NewRoutes(ctl), Log: log}
		g.Routes.RetryFailed = true
		r.groups[settings] = g
	}
	return g
}

// Get returns key's kept connection, or makes one with d if there is none
// or it died; reused says it was there already. A reused connection may
// still have died a moment ago: a request that fails on it for that
// reason can Drop it and Get again.
func (r *Registry) Get(ctx context.Context, key Key, d Dialer) (c *Conn, reused bool, err error) {
	log := d.Log
	if log == nil {
		log = zap.NewNop()
	}
	s := r.slot(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		select {
		case <-s.c.Context.Done():
			log.Info("daemon: kept connection lost", zap.String("target", key.Target), zap.Error(s.c.Context.Err()))
			s.c.Context.Close() //nolint:errcheck // dead already
			s.c = nil
		default:
			log.Info("daemon: reusing the connection", zap.String("target", key.Target))
			return s.c, true, nil
		}
	}
	g := r.group(key.Settings, d)
	cx, steps, err := d.Open(ctx, g)
	if err != nil {
		return nil, false, err
	}
	s.c = &Conn{Context: cx, Steps: steps, Group: g}
	log.Info("daemon: connected", zap.String("target", key.Target))
	return s.c, false, nil
}

// GetLive is Get for a request about to start something: a reused
// connection must first answer a ping, and one found disconnected is
// replaced, once. Nothing local says that a kept connection's agent died
// until its transport's end arrives, which can be after the request
// started a command on it; that command would then fail with no way to
// tell whether it ran (so it cannot be retried). The ping can: it runs
// nothing, and an agent that answers it was alive when the request came.
// The price is one round trip per request on a kept connection.
//
// A connection that dies after answering still fails the request;
// its caller may retry what provably never reached the agent (an
// exec.Start that failed to open its circuit, with reused set).
func (r *Registry) GetLive(ctx context.Context, key Key, d Dialer) (c *Conn, reused bool, err error) {
	c, reused, err = r.Get(ctx, key, d)
	if err != nil || !reused {
		return c, reused, err
	}
	err = sys.Ping(ctx, c.Context)
	if err == nil {
		return c, true, nil
	}
	if !errors.Is(err, spindle.ErrDisconnected) || ctx.Err() != nil {
		return nil, false, err
	}
	if d.Log != nil {
		d.Log.Info("daemon: kept connection lost", zap.String("target", key.Target), zap.Error(err))
	}
	r.Drop(key, c)
	return r.Get(ctx, key, d)
}

// Drop closes c, key's connection unless another request replaced it
// already.
func (r *Registry) Drop(key Key, c *Conn) {
	s := r.slot(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == c {
		s.c = nil
	}
	c.Context.Close() //nolint:errcheck // dead already, or as good as
}

// Forget closes key's kept connection, if there is one, and forgets it:
// the next Get makes a new one (a client's "reset the connection").
func (r *Registry) Forget(key Key) {
	r.mu.Lock()
	s := r.slots[key]
	r.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		s.c.Context.Close() //nolint:errcheck // closing is all that is asked
		s.c = nil
	}
}

// Close closes every kept connection, and their controllers.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.groups {
		g.Controller.Close()
		g.Log.Sync() //nolint:errcheck // stderr cannot always be synced
	}
	r.groups = map[string]*Group{}
	r.slots = map[Key]*slot{}
}
