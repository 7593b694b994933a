package context

import (
	"github.com/spindle-rpc/spindle/rpc"
)

// Error kinds, for errors.Is.
var (
	ErrDisconnected  = rpc.ErrDisconnected
	ErrTimeout       = rpc.ErrTimeout
	ErrCanceled      = rpc.ErrCanceled
	ErrRemote        = rpc.ErrRemote
	ErrPermission    = rpc.ErrPermission
	ErrNotFound      = rpc.ErrNotFound
	ErrExists        = rpc.ErrExists
	ErrUnknownMethod = rpc.ErrUnknownMethod
	ErrBadArgs       = rpc.ErrBadArgs
	ErrAuth          = rpc.ErrAuth
	ErrHostKey       = rpc.ErrHostKey
	ErrTooLarge      = rpc.ErrTooLarge
)

// Error is an error from a call or connection, naming the context chain
// and, for calls, the method.
type Error struct {
	Context string // "bastion → web1"
	Method  string // "" for connection errors
	Err     error
}

func (e *Error) Error() string {
	if e.Method == "" {
		return e.Context + ": " + e.Err.Error()
	}
	return e.Context + ": " + e.Method + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// kindError is an error of one kind with a cause: errors.Is matches both.
type kindError struct {
	kind  error
	cause error
	msg   string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}
