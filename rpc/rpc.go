// Package rpc is Spindle's call layer on top of the router: the request,
// reply and control payloads, the error kinds that cross the wire, and the
// agent-side Server that runs registered handlers. The kinds themselves
// are errkind's; this package names them on the wire.
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
	"io/fs"
	"os"
	"syscall"

	"github.com/spindle-rpc/spindle/errkind"
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

// kinds names the kinds that cross the wire, in RemoteError.Kind
// (PROTOCOL.md, section "Reply convention"). ErrRemote has no name: every
// RemoteError is of it. ErrTooManyChildren has none either: only a
// controller raises it. The order is the one ToRemote tries them in.
var kinds = []struct {
	name string
	kind error
}{
	{"timeout", errkind.ErrTimeout},
	{"canceled", errkind.ErrCanceled},
	{"permission", errkind.ErrPermission},
	{"not_found", errkind.ErrNotFound},
	{"exists", errkind.ErrExists},
	{"unknown_method", errkind.ErrUnknownMethod},
	{"bad_args", errkind.ErrBadArgs},
	{"auth", errkind.ErrAuth},
	{"host_key", errkind.ErrHostKey},
	{"too_large", errkind.ErrTooLarge},
	{"disconnected", errkind.ErrDisconnected},
	{"stalled", errkind.ErrStalled},
}

// RemoteError is an error raised on an agent, as it crosses the wire.
type RemoteError struct {
	Kind    string `msgpack:"k,omitempty"`
	Message string `msgpack:"msg"`
}

func (e *RemoteError) Error() string { return e.Message }

// Is matches errkind.ErrRemote and the kind named by e.Kind.
func (e *RemoteError) Is(target error) bool {
	if target == errkind.ErrRemote {
		return true
	}
	for _, k := range kinds {
		if k.name == e.Kind {
			return k.kind == target
		}
	}
	return false
}

// ToRemote classifies err for the wire.
func ToRemote(err error) *RemoteError {
	var re *RemoteError
	if errors.As(err, &re) {
		return re
	}
	kind := ""
	for _, k := range kinds {
		if errors.Is(err, k.kind) {
			kind = k.name
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
