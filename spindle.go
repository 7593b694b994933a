// Package spindle is the one import a library user needs: connect to a
// machine, call its agent, stream, copy, hop.
//
//	ctl := spindle.NewController(spindle.Options{})
//	defer ctl.Close()
//	web, err := ctl.Connect(ctx, local.Options{})
//	res, err := exec.Run(ctx, web, exec.Cmd{Argv: []string{"uname", "-a"}})
//
// It re-exports the context package's types so that user code never has
// to alias the standard library's context.
package spindle

import (
	stdctx "context"

	"github.com/spindle-rpc/spindle/connectors"
	spctx "github.com/spindle-rpc/spindle/context"
	"github.com/spindle-rpc/spindle/errkind"
)

type (
	// Controller is the root of a tree of contexts.
	Controller = spctx.Controller
	// Context is a handle on one remote agent.
	Context = spctx.Context
	// Options configures a Controller.
	Options = spctx.Options
	// Future is a call in flight.
	Future = spctx.Future
	// Error is a call or connection error naming the context chain and
	// the method; errors.Is matches its kind and its cause.
	Error = errkind.Error
	// Connector starts an agent (local.Options, ssh.Options, …); a
	// Context's Connect starts one through that context's agent.
	Connector = connectors.Connector
)

// Error kinds, for errors.Is: every kind of errkind, so that user code
// needs no other import to tell failures apart.
var (
	ErrDisconnected    = errkind.ErrDisconnected
	ErrTimeout         = errkind.ErrTimeout
	ErrCanceled        = errkind.ErrCanceled
	ErrRemote          = errkind.ErrRemote
	ErrPermission      = errkind.ErrPermission
	ErrNotFound        = errkind.ErrNotFound
	ErrExists          = errkind.ErrExists
	ErrUnknownMethod   = errkind.ErrUnknownMethod
	ErrBadArgs         = errkind.ErrBadArgs
	ErrAuth            = errkind.ErrAuth
	ErrHostKey         = errkind.ErrHostKey
	ErrTooLarge        = errkind.ErrTooLarge
	ErrStalled         = errkind.ErrStalled
	ErrTooManyChildren = errkind.ErrTooManyChildren
)

// NewController returns a controller with no contexts.
func NewController(opts Options) *Controller { return spctx.NewController(opts) }

// Dial connects one context with a controller of its own; closing the
// returned context's controller (Close on the returned closer) ends it.
// Use a Controller directly to manage many contexts.
func Dial(ctx stdctx.Context, c Connector, opts Options) (*Context, func() error, error) {
	ctl := NewController(opts)
	cx, err := ctl.Connect(ctx, c)
	if err != nil {
		ctl.Close()
		return nil, nil, err
	}
	return cx, ctl.Close, nil
}
