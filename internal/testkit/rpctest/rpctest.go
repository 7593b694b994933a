// Package rpctest runs a service's handlers in-process behind an
// rpc.Caller, so a service's client helpers can be unit-tested without an
// agent. Arguments and replies still cross msgpack as on the wire.
package rpctest

import (
	"context"
	"errors"
	"net"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/rpc"
)

// Caller calls the handlers registered in Registry.
type Caller struct {
	Registry *rpc.Registry
}

// New returns a Caller over a fresh registry filled by register.
func New(register func(*rpc.Registry)) *Caller {
	reg := rpc.NewRegistry()
	register(reg)
	return &Caller{Registry: reg}
}

// Call implements rpc.Caller.
func (c *Caller) Call(ctx context.Context, method string, args, result any) error {
	h, ok := c.Registry.Lookup(method)
	if !ok {
		return errkind.Errorf(errkind.ErrUnknownMethod, "unknown method %q", method)
	}
	call, _, err := rpc.NewCall(method, args, nil)
	if err != nil {
		return err
	}
	res, err := h(ctx, call)
	if err != nil {
		return rpc.ToRemote(err)
	}
	data, err := wire.Marshal(res)
	if err != nil || result == nil {
		return err
	}
	return wire.Unmarshal(data, result)
}

// Stream implements rpc.Caller: the handler runs in a goroutine with one
// end of an in-memory pipe as its circuit (closed when it returns, as the
// agent's server does); the caller gets the other end.
func (c *Caller) Stream(ctx context.Context, method string, args any) (rpc.Stream, error) {
	h, ok := c.Registry.Lookup(method)
	if !ok {
		return nil, errkind.Errorf(errkind.ErrUnknownMethod, "unknown method %q", method)
	}
	mine, theirs := net.Pipe()
	call, _, err := rpc.NewCall(method, args, theirs)
	if err != nil {
		return nil, err
	}
	s := &stream{Conn: mine, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		res, err := h(ctx, call)
		theirs.Close()
		if err != nil {
			s.err = rpc.ToRemote(err)
			return
		}
		s.data, s.err = wire.Marshal(res)
	}()
	return s, nil
}

type stream struct {
	net.Conn
	done chan struct{}
	data []byte
	err  error
}

func (s *stream) Wait(result any) error {
	<-s.done
	if s.err != nil || result == nil {
		return s.err
	}
	return wire.Unmarshal(s.data, result)
}

func (s *stream) Control(rpc.Control) error { return errors.New("rpctest: no controls") }

var _ rpc.Caller = (*Caller)(nil)
