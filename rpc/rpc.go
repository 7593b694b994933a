// Package rpc is Spindle's call layer on top of the router: the request,
// reply and control payloads, the error kinds that cross the wire, and the
// agent-side Server that runs registered handlers.
//
// A call is a Message at router.HandleCall whose data is a Request and
// whose reply_to names the caller's reply handle. The agent answers with one
// message to (src, reply_to) carrying router.FlagLast, plus router.FlagError
// when the data is a RemoteError. A call may instead arrive as the header of
// a circuit; the handler then also gets the circuit's byte stream.
// Cancelling a call is a Control message at router.HandleControl naming the
// call's reply handle.
package rpc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/vmihailenco/msgpack/v5"
)

// Request is the payload of a call.
type Request struct {
	Method string             `msgpack:"m"`
	Args   msgpack.RawMessage `msgpack:"a,omitempty"`
	// Timeout is relative (nanoseconds), since clocks differ between hosts.
	Timeout int64 `msgpack:"t,omitempty"`
}

// Control operations on a running call.
const (
	OpCancel = "cancel"
	OpResize = "resize"
	OpSignal = "signal"
)

// Control is the payload at router.HandleControl.
type Control struct {
	Call   uint32 `msgpack:"call"` // the call's reply_to handle
	Op     string `msgpack:"op"`
	Rows   uint16 `msgpack:"rows,omitempty"`
	Cols   uint16 `msgpack:"cols,omitempty"`
	Signal int    `msgpack:"sig,omitempty"`
}

// Error kinds. Every error a call returns satisfies errors.Is for at most
// one of these, besides ErrRemote for errors raised by the agent.
var (
	ErrDisconnected  = errors.New("disconnected")
	ErrTimeout       = errors.New("timeout")
	ErrCanceled      = errors.New("canceled")
	ErrRemote        = errors.New("remote error")
	ErrPermission    = errors.New("permission denied")
	ErrNotFound      = errors.New("not found")
	ErrExists        = errors.New("already exists")
	ErrUnknownMethod = errors.New("unknown method")
	ErrBadArgs       = errors.New("bad arguments")
	ErrAuth          = errors.New("authentication failed")
	ErrHostKey       = errors.New("host key rejected")
	ErrTooLarge      = errors.New("too large")
)

var kinds = map[string]error{
	"timeout":        ErrTimeout,
	"canceled":       ErrCanceled,
	"permission":     ErrPermission,
	"not_found":      ErrNotFound,
	"exists":         ErrExists,
	"unknown_method": ErrUnknownMethod,
	"bad_args":       ErrBadArgs,
	"auth":           ErrAuth,
	"host_key":       ErrHostKey,
	"too_large":      ErrTooLarge,
	"disconnected":   ErrDisconnected,
}

// RemoteError is an error raised on an agent, as it crosses the wire.
type RemoteError struct {
	Kind    string `msgpack:"k,omitempty"`
	Message string `msgpack:"msg"`
}

func (e *RemoteError) Error() string { return e.Message }

// Is matches ErrRemote and the sentinel of the error's kind.
func (e *RemoteError) Is(target error) bool {
	if target == ErrRemote {
		return true
	}
	k, ok := kinds[e.Kind]
	return ok && k == target
}

// Errorf makes an error of the given kind (one of the sentinels above) that
// keeps its kind across the wire.
func Errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

// ToRemote classifies err for the wire.
func ToRemote(err error) *RemoteError {
	var re *RemoteError
	if errors.As(err, &re) {
		return re
	}
	kind := ""
	for name, sentinel := range kinds {
		if errors.Is(err, sentinel) {
			kind = name
			break
		}
	}
	if kind == "" {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			kind = "timeout"
		case errors.Is(err, context.Canceled):
			kind = "canceled"
		case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EPERM):
			kind = "permission"
		case errors.Is(err, fs.ErrNotExist):
			kind = "not_found"
		case errors.Is(err, fs.ErrExist):
			kind = "exists"
		case errors.Is(err, os.ErrDeadlineExceeded):
			kind = "timeout"
		}
	}
	return &RemoteError{Kind: kind, Message: err.Error()}
}
