// Package context is the controller's handle on remote agents.
//
// A Controller owns the root router (context id 0) and allocates every
// context id. Connect starts an agent through a connector and returns its
// *Context; on a Context, Call runs one method and waits, Go runs one
// asynchronously and returns a Future, and Stream runs one with a circuit
// (a byte stream) attached. Any number of calls may be in flight on one
// context. Cancelling the Go context of a call cancels it on the agent too
// (a cancelled exec.Run kills the remote process group), and fails the
// call at once; a Stream's circuit is read for CancelGrace more, for what
// the agent sends before it stops, and then abandoned, so that an agent
// that does not answer (stopped, or behind a wedged hop) cannot hold up
// the caller.
//
// Errors are *errkind.Error: they name the context chain
// ("bastion → web1 → sudo:root") and the method, and satisfy errors.Is for
// their kind: errkind.ErrDisconnected, ErrTimeout, ErrCanceled,
// ErrTooManyChildren, ErrStalled, ErrRemote and the kinds an agent reports
// (ErrNotFound, ErrPermission, …).
//
// The package is named after what it models, a Mitogen-style context; the
// root package spindle re-exports it so that user code need not alias the
// standard library's context.
package context
