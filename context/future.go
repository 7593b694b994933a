package context

import (
	stdctx "context"
	"errors"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/printable"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/rpc"
)

// Future is a call in flight.
type Future struct {
	c      *Context
	method string
	// mu guards handle and stop: the router may fail the receiver (no
	// route) on another goroutine before newFuture has stored them.
	mu     sync.Mutex
	handle uint32
	stop   func() bool // unhooks the cancellation watcher

	circuit  router.Circuit // Stream's; set under mu
	finished bool           // finish has run (under mu)

	once sync.Once
	done chan struct{}
	msg  *router.Message
	err  error
}

func (c *Context) newFuture(ctx stdctx.Context, method string) *Future {
	f := &Future{c: c, method: method, done: make(chan struct{})}
	c.inflight.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handle = c.ctl.rt.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: c.id, Deliver: f.deliver})
	if ctx.Done() != nil {
		f.stop = stdctx.AfterFunc(ctx, func() { f.cancel(ctx) })
	}
	return f
}

// deliver runs on the router's reading goroutine: it only records.
func (f *Future) deliver(m *router.Message) {
	if m.Flags&(router.FlagLast|router.FlagDead) == 0 {
		return // intermediate replies are not used yet
	}
	f.finish(m, nil)
}

func (f *Future) finish(m *router.Message, err error) {
	f.once.Do(func() {
		f.msg, f.err = m, err
		f.c.inflight.Add(-1)
		f.mu.Lock()
		handle, stop, circ := f.handle, f.stop, f.circuit
		f.finished = true
		f.mu.Unlock()
		f.c.ctl.rt.Unregister(handle)
		if stop != nil {
			stop()
		}
		if err != nil && circ != nil {
			abandon(circ)
		}
		close(f.done)
	})
}

func (f *Future) fail(err error) {
	f.finish(nil, errkind.In(f.c.name, f.method, err))
}

// cancel tells the agent to stop the call and fails the future with ctx's
// error.
func (f *Future) cancel(ctx stdctx.Context) {
	select {
	case <-f.done:
		return
	default:
	}
	f.mu.Lock()
	handle := f.handle
	f.mu.Unlock()
	kind := errkind.ErrCanceled
	if errors.Is(ctx.Err(), stdctx.DeadlineExceeded) {
		kind = errkind.ErrTimeout
	}
	// Fail first, then tell the agent: the agent's own reply to the
	// cancel ("context canceled", of kind canceled but no longer ctx's
	// error) could otherwise arrive in between and win, and the caller
	// would get an error that errors.Is(err, context.Canceled) denies.
	f.fail(&errkind.Error{Kind: kind, Err: ctx.Err()})
	if data, err := wire.Marshal(&rpc.Control{Call: handle, Op: rpc.OpCancel}); err == nil {
		f.c.ctl.rt.Send(&router.Message{Dst: f.c.id, Handle: router.HandleControl, Data: data})
	}
}

// Done is closed when the reply (or an error) is in.
func (f *Future) Done() <-chan struct{} { return f.done }

// Wait blocks until the call ends and decodes its result into result
// (which may be nil).
func (f *Future) Wait(result any) error {
	<-f.done
	if f.err != nil {
		return f.err
	}
	m := f.msg
	switch {
	case m.Flags&router.FlagDead != 0:
		return &errkind.Error{Chain: f.c.name, Op: f.method, Kind: errkind.ErrDisconnected,
			Msg: "disconnected: " + printable.String(string(m.Data))}
	case m.Flags&router.FlagError != 0:
		var re rpc.RemoteError
		if err := wire.Unmarshal(m.Data, &re); err != nil {
			return &errkind.Error{Chain: f.c.name, Op: f.method, Err: err}
		}
		re.Message = printable.String(re.Message) // for the user's terminal
		return &errkind.Error{Chain: f.c.name, Op: f.method, Err: &re}
	}
	if result == nil {
		return nil
	}
	if err := wire.Unmarshal(m.Data, result); err != nil {
		return &errkind.Error{Chain: f.c.name, Op: f.method, Err: err}
	}
	return nil
}

// Control sends a resize or signal to the running call.
func (f *Future) Control(ctl rpc.Control) error {
	f.mu.Lock()
	ctl.Call = f.handle
	f.mu.Unlock()
	data, err := wire.Marshal(&ctl)
	if err != nil {
		return err
	}
	return f.c.ctl.rt.Send(&router.Message{Dst: f.c.id, Handle: router.HandleControl, Data: data})
}

// setCircuit attaches a Stream's circuit, which a failure closes: at once
// if the future has already failed (its context cancelled while the
// circuit was being opened).
func (f *Future) setCircuit(circ router.Circuit) {
	f.mu.Lock()
	f.circuit = circ
	failed := f.finished && f.err != nil
	f.mu.Unlock()
	if failed {
		abandon(circ)
	}
}

// CancelGrace is how long the circuit of a call that failed (cancelled,
// timed out, disconnected) goes on being read: an agent that answers
// the cancel kills the call's process group and ends the circuit well
// within it, with the output that was on its way; one that does not (it
// is stopped, its host or a hop on the way is wedged) would otherwise
// hold the circuit's reader until the link is declared dead. After it,
// reads of the circuit fail with a timeout and the call is abandoned.
const CancelGrace = 250 * time.Millisecond

// abandon half-closes the circuit of a failed call and bounds its reads
// by CancelGrace.
func abandon(circ router.Circuit) {
	circ.Close()
	circ.SetReadDeadline(time.Now().Add(CancelGrace))
}
