// Package errkind is Spindle's error vocabulary: the kinds of failure a
// caller can tell apart with errors.Is (ErrDisconnected, ErrTimeout,
// ErrNotFound, …) and Error, the one error type that carries a kind
// together with the context chain ("bastion → web1 → sudo:root") and the
// operation that failed.
//
// Every layer uses these sentinels: agent-side handlers (Errorf), the rpc
// layer that carries kinds across the wire, the connectors, the
// controller's contexts, and the root package spindle, which re-exports
// every kind. The package depends on nothing else in Spindle so that any
// of them can import it. It is not called errors so that it never shadows
// the standard library's package in the files that need both.
package errkind

import "errors"

// The kinds. An error Spindle returns satisfies errors.Is for at most one
// of them, besides ErrRemote for every error raised on an agent.
var (
	// ErrDisconnected: the context (or a hop on the way to it) is gone;
	// the call may or may not have run.
	ErrDisconnected = errors.New("disconnected")
	// ErrTimeout: a deadline passed (the call's, or a connect's).
	ErrTimeout = errors.New("timeout")
	// ErrCanceled: the caller cancelled.
	ErrCanceled = errors.New("canceled")
	// ErrRemote: the error was raised on an agent and crossed the wire.
	ErrRemote = errors.New("remote error")
	// ErrPermission: the OS refused (EACCES, EPERM), or a become tool
	// refused the user.
	ErrPermission = errors.New("permission denied")
	// ErrNotFound: a file, program, user, container or child is missing.
	ErrNotFound = errors.New("not found")
	// ErrExists: something is in the way (a file where a directory must
	// go, a directory where a file must go).
	ErrExists = errors.New("already exists")
	// ErrUnknownMethod: the agent has no handler for the method.
	ErrUnknownMethod = errors.New("unknown method")
	// ErrBadArgs: the call's arguments were refused; the message says
	// which.
	ErrBadArgs = errors.New("bad arguments")
	// ErrAuth: a login or become failed: wrong or missing password, no
	// usable key.
	ErrAuth = errors.New("authentication failed")
	// ErrHostKey: an SSH host key was unknown, changed or revoked, and
	// not accepted.
	ErrHostKey = errors.New("host key rejected")
	// ErrTooLarge: a result or listing exceeds its limit; the message
	// names the limit and the way around it.
	ErrTooLarge = errors.New("too large")
	// ErrStalled: a link on the way to the context is not draining (its
	// process is stopped, or its pipe or connection is full) and has a
	// full queue: the call was refused before it was sent, so it did not
	// run. A link that stays stalled is declared dead after the router's
	// StallTimeout, and calls then fail with ErrDisconnected.
	ErrStalled = errors.New("link stalled")
	// ErrTooManyChildren: a context is at Options.MaxChildren and every
	// child is busy, so none could be closed to make room.
	ErrTooManyChildren = errors.New("too many child contexts")
)

// All returns every kind above, so that tests can check that each one is
// re-exported and carried where it should be.
func All() []error {
	return []error{
		ErrDisconnected, ErrTimeout, ErrCanceled, ErrRemote, ErrPermission,
		ErrNotFound, ErrExists, ErrUnknownMethod, ErrBadArgs, ErrAuth,
		ErrHostKey, ErrTooLarge, ErrStalled, ErrTooManyChildren,
	}
}
