package context

import (
	stdctx "context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/router"
	slog "github.com/spindle-rpc/spindle/services/log"
	"go.uber.org/zap"
)

// Options configures a Controller. The zero value is useful.
type Options struct {
	// Logger receives the controller's logs and the records agents forward.
	// Default: no logging.
	Logger *zap.Logger
	// Verbosity is passed to agents: 0 forwards warnings, 1 info, 2 debug.
	Verbosity int
	// Router tunes the root router (frame limit, stream window).
	Router router.Options
	// MaxChildren bounds the children (Connect) each context keeps;
	// default DefaultMaxChildren. At the limit the youngest idle child is
	// closed.
	MaxChildren int
	// Agents supplies the agent binaries the controller uploads, and lends
	// to agents whose hops reach another platform; default the agents
	// embedded at build time (bootstrap.Default).
	Agents bootstrap.Source
	// AgentLogs adjusts how the records agents forward are shown:
	// escaped unless AgentLogs.Raw, and rate-limited per context.
	AgentLogs slog.ReceiveOptions
}

// Controller is the root of a tree of contexts.
type Controller struct {
	rt     *router.Router
	log    *zap.Logger
	opts   Options
	nextID atomic.Uint32

	mu       sync.Mutex
	contexts map[uint32]*Context
	closed   bool
}

// NewController returns a controller with no contexts. It starts no
// goroutine until the first Connect.
func NewController(opts Options) *Controller {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Agents == nil {
		opts.Agents = bootstrap.Default()
	}
	ro := opts.Router
	ro.Logger = opts.Logger
	ctl := &Controller{rt: router.New(router.ControllerID, ro), log: opts.Logger, opts: opts, contexts: map[uint32]*Context{}}
	slog.Receive(ctl.rt, opts.Logger, opts.AgentLogs)
	ctl.rt.OnRouteLoss(ctl.routeLoss)
	return ctl
}

// Router is the controller's root router.
func (ctl *Controller) Router() *router.Router { return ctl.rt }

// Connect starts an agent through c, as a direct child of the controller.
func (ctl *Controller) Connect(ctx stdctx.Context, c connectors.Connector) (*Context, error) {
	id := ctl.nextID.Add(1)
	name := c.Name()
	conn, err := c.Start(ctx, connectors.StartRequest{ID: id, Parent: router.ControllerID, Name: name,
		Verbosity: ctl.opts.Verbosity, Logger: ctl.log, Agent: ctl.opts.Agents, ParentMaxFrame: ctl.parentMaxFrame()})
	if err != nil {
		return nil, errkind.In(name, "", connectError(err))
	}
	cx := &Context{ctl: ctl, id: id, name: name, hello: conn.Hello, conn: conn, done: make(chan struct{})}
	ctl.mu.Lock()
	if ctl.closed {
		ctl.mu.Unlock()
		conn.Close()
		return nil, &errkind.Error{Chain: name, Err: router.ErrClosed}
	}
	ctl.contexts[id] = cx
	ctl.mu.Unlock()
	link, err := ctl.rt.AddChild(ctx, conn, id, name)
	if err != nil {
		ctl.forget(id)
		conn.Close()
		return nil, errkind.In(name, "", connectError(err))
	}
	link.SetPeerMaxFrame(conn.Hello.MaxFrame)
	ctl.log.Debug("connected", zap.String("context", name), zap.Uint32("id", id),
		zap.Int("pid", conn.Hello.PID), zap.String("version", conn.Hello.Version))
	return cx, nil
}

// parentMaxFrame is what direct children are told of the largest frame
// the controller reads: 0 when it is the default, which they assume.
func (ctl *Controller) parentMaxFrame() int {
	if n := ctl.rt.MaxFrameSize(); n != router.DefaultMaxFrameSize {
		return n
	}
	return 0
}

func connectError(err error) error {
	if errors.Is(err, stdctx.DeadlineExceeded) {
		return &errkind.Error{Kind: errkind.ErrTimeout, Msg: "connect timed out: " + err.Error(), Err: err}
	}
	return err
}

func (ctl *Controller) forget(id uint32) {
	ctl.mu.Lock()
	delete(ctl.contexts, id)
	ctl.mu.Unlock()
}

// routeLoss marks the lost contexts dead; pending calls were failed by the
// router already.
func (ctl *Controller) routeLoss(loss router.RouteLoss) {
	ctl.mu.Lock()
	var dead []*Context
	for _, id := range loss.IDs {
		if cx := ctl.contexts[id]; cx != nil {
			dead = append(dead, cx)
			delete(ctl.contexts, id)
		}
	}
	ctl.mu.Unlock()
	for _, cx := range dead {
		cx.markDead(loss.Reason)
	}
}

// Close disconnects every context and waits for the agents to exit.
func (ctl *Controller) Close() error {
	ctl.mu.Lock()
	ctl.closed = true
	var direct []*Context
	for _, cx := range ctl.contexts {
		if cx.conn != nil {
			direct = append(direct, cx)
		}
	}
	ctl.mu.Unlock()
	ctl.rt.Close()
	for _, cx := range direct {
		cx.conn.Close()
	}
	return nil
}
