package rpc

import (
	"context"

	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
)

// Caller is what a service's client helpers need from a context. The
// context package's *Context implements it.
type Caller interface {
	// Call runs method on the context with args and decodes the reply into
	// result (which may be nil).
	Call(ctx context.Context, method string, args, result any) error
	// Stream starts method with a circuit attached: the returned Stream is
	// the call's byte stream; its Wait returns the call's reply.
	Stream(ctx context.Context, method string, args any) (Stream, error)
}

// Stream is a running call with its circuit.
type Stream interface {
	router.Circuit
	// Wait blocks until the call's reply and decodes it into result.
	Wait(result any) error
	// Control sends a resize or signal to the running call.
	Control(c Control) error
}

// NewCall builds a Call outside a Server: for unit tests of handlers and for
// running a handler in-process. Send resize/signal requests on the returned
// channel.
func NewCall(method string, args any, circuit router.Circuit) (*Call, chan<- Control, error) {
	var data []byte
	if args != nil {
		var err error
		if data, err = wire.Marshal(args); err != nil {
			return nil, nil, err
		}
	}
	ch := make(chan Control, 8)
	return &Call{Method: method, Circuit: circuit, args: data, controls: ch}, ch, nil
}
