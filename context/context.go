package context

import (
	stdctx "context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/connect"
	"github.com/vmihailenco/msgpack/v5"
)

// Context is the controller's handle on one agent.
type Context struct {
	ctl   *Controller
	id    uint32
	name  string
	hello *bootstrap.Hello
	conn  *bootstrap.Conn // the stream, for a direct child of the controller

	deadOnce sync.Once
	done     chan struct{}
	deadWhy  string

	// Delegated children (Connect): parent is nil for direct children of
	// the controller.
	parent   *Context
	childKey string
	created  time.Time
	inflight atomic.Int64 // calls in flight, to find idle children

	mu       sync.Mutex
	children map[string]*Context
	starting map[string]chan struct{}
}

var _ rpc.Caller = (*Context)(nil)

// ID is the context's id on the bus.
func (c *Context) ID() uint32 { return c.id }

// Parent is the context whose agent started this one (Connect), or nil
// for a direct child of the controller: the chain a call to this
// context travels, read upward.
func (c *Context) Parent() *Context { return c.parent }

// Name is the context's chain name, e.g. "bastion → web1".
func (c *Context) Name() string { return c.name }

// Hello is what the agent said about itself when it started.
func (c *Context) Hello() bootstrap.Hello { return *c.hello }

// Done is closed when the context has been disconnected.
func (c *Context) Done() <-chan struct{} { return c.done }

// Err says why the context is gone, or nil while it is up.
func (c *Context) Err() error {
	select {
	case <-c.done:
		return &errkind.Error{Chain: c.name, Kind: errkind.ErrDisconnected, Msg: "disconnected: " + c.deadWhy}
	default:
		return nil
	}
}

func (c *Context) markDead(why string) {
	c.deadOnce.Do(func() {
		c.deadWhy = why
		close(c.done)
	})
}

// Close disconnects the context: its agent exits, and with it every
// process it was running.
func (c *Context) Close() error {
	c.markDead("closed by the controller")
	c.ctl.forget(c.id)
	if c.conn != nil {
		return c.conn.Close()
	}
	if p := c.parent; p != nil {
		p.mu.Lock()
		if p.children[c.childKey] == c {
			delete(p.children, c.childKey)
		}
		p.mu.Unlock()
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
		defer cancel()
		err := p.Call(ctx, connect.MethodClose, &connect.CloseArgs{ID: c.id}, nil)
		if errors.Is(err, errkind.ErrNotFound) || errors.Is(err, errkind.ErrDisconnected) {
			return nil // already gone
		}
		return err
	}
	return nil
}

// Call runs method with args on the agent and decodes the reply into result
// (which may be nil). Cancelling ctx cancels the call on the agent.
func (c *Context) Call(ctx stdctx.Context, method string, args, result any) error {
	return c.Go(ctx, method, args).Wait(result)
}

// Go starts method and returns at once; the Future's Wait gives the reply.
func (c *Context) Go(ctx stdctx.Context, method string, args any) *Future {
	f := c.newFuture(ctx, method)
	data, err := c.request(ctx, method, args)
	if err != nil {
		f.fail(err)
		return f
	}
	// A direct child that is not draining makes this wait (for room in
	// its link's queue) until ctx is done or the link is declared dead.
	if err := c.ctl.rt.SendContext(ctx, &router.Message{Dst: c.id, Handle: router.HandleCall, ReplyTo: f.handle, Data: data}); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			f.cancel(ctx) // as if cancelled in flight: the error of ctx's kind
		} else {
			f.fail(c.sendError(err))
		}
	}
	return f
}

// Stream starts method with a circuit attached. Write to the stream to feed
// the call, read its output, Close to half-close, Wait for the reply.
func (c *Context) Stream(ctx stdctx.Context, method string, args any) (rpc.Stream, error) {
	f := c.newFuture(ctx, method)
	data, err := c.request(ctx, method, args)
	if err != nil {
		f.fail(err)
		return nil, f.err
	}
	circ, err := c.ctl.rt.OpenCircuit(&router.Message{Dst: c.id, Handle: router.HandleCall, ReplyTo: f.handle, Data: data})
	if err != nil {
		f.fail(c.sendError(err))
		return nil, f.err
	}
	f.setCircuit(circ)
	return &stream{Circuit: circ, Future: f}, nil
}

func (c *Context) request(ctx stdctx.Context, method string, args any) ([]byte, error) {
	req := rpc.Request{Method: method}
	if args != nil {
		a, err := wire.Marshal(args)
		if err != nil {
			return nil, &errkind.Error{Chain: c.name, Op: method, Err: fmt.Errorf("%w: encode arguments: %v", errkind.ErrBadArgs, err)}
		}
		req.Args = msgpack.RawMessage(a)
	}
	if dl, ok := ctx.Deadline(); ok {
		req.Timeout = int64(time.Until(dl))
		if req.Timeout <= 0 {
			req.Timeout = 1
		}
	}
	return wire.Marshal(&req)
}

func (c *Context) sendError(err error) error {
	if errors.Is(err, router.ErrNoRoute) || errors.Is(err, router.ErrClosed) || errors.Is(err, router.ErrLinkDown) {
		why := err.Error()
		// deadWhy is written before done is closed; read it only after.
		select {
		case <-c.done:
			why = c.deadWhy
		default:
		}
		return &errkind.Error{Kind: errkind.ErrDisconnected, Msg: "disconnected: " + why, Err: err}
	}
	return err
}

type stream struct {
	router.Circuit
	*Future
}

func (s *stream) Wait(result any) error { return s.Future.Wait(result) }
