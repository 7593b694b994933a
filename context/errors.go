package context

import (
	"strings"

	"github.com/spindle-rpc/spindle/errkind"
)

// Error kinds, for errors.Is.
var (
	ErrDisconnected  = errkind.ErrDisconnected
	ErrTimeout       = errkind.ErrTimeout
	ErrCanceled      = errkind.ErrCanceled
	ErrRemote        = errkind.ErrRemote
	ErrPermission    = errkind.ErrPermission
	ErrNotFound      = errkind.ErrNotFound
	ErrExists        = errkind.ErrExists
	ErrUnknownMethod = errkind.ErrUnknownMethod
	ErrBadArgs       = errkind.ErrBadArgs
	ErrAuth          = errkind.ErrAuth
	ErrHostKey       = errkind.ErrHostKey
	ErrTooLarge      = errkind.ErrTooLarge
)

// Error is an error from a call or connection, naming the context chain
// and, for calls, the method.
type Error struct {
	Context string // "bastion → web1"
	Method  string // "" for connection errors
	Err     error
}

func (e *Error) Error() string {
	msg := e.Err.Error()
	if e.Method == "" || namesMethod(msg, e.Method) {
		// Handlers often name their method already ("exec.Start ls: not
		// found"): saying it twice only makes the message harder to read.
		return e.Context + ": " + msg
	}
	return e.Context + ": " + e.Method + ": " + msg
}

// namesMethod reports whether msg starts with method as a word.
func namesMethod(msg, method string) bool {
	rest, ok := strings.CutPrefix(msg, method)
	return ok && (rest == "" || rest[0] == ' ' || rest[0] == ':')
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
