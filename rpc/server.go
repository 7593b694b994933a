package rpc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"go.uber.org/zap"
)

// Handler runs one call on an agent. Its result is msgpack-encoded into the
// reply; it must fit in one frame (use the call's circuit for bulk data).
// ctx is cancelled when the caller cancels, the call's timeout passes, or
// the link to the caller dies.
type Handler func(ctx context.Context, call *Call) (any, error)

// Registry maps method names ("exec.Run") to handlers.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]Handler{}} }

// Handle registers h for method, replacing any earlier handler.
func (r *Registry) Handle(method string, h Handler) {
	r.mu.Lock()
	r.m[method] = h
	r.mu.Unlock()
}

// Lookup returns the handler for method.
func (r *Registry) Lookup(method string) (Handler, bool) {
	r.mu.RLock()
	h, ok := r.m[method]
	r.mu.RUnlock()
	return h, ok
}

// Methods lists the registered methods, sorted.
func (r *Registry) Methods() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for k := range r.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Call is one running call as its handler sees it.
type Call struct {
	Method string
	// Src is the caller's context id.
	Src uint32
	// Circuit is the call's byte stream when the caller opened one, else
	// nil. The server closes it when the handler returns.
	Circuit router.Circuit

	args     []byte
	controls chan Control
}

// Args decodes the call's arguments into v (a pointer to a concrete type).
func (c *Call) Args(v any) error {
	if len(c.args) == 0 {
		return nil
	}
	if err := wire.Unmarshal(c.args, v); err != nil {
		return errkind.Errorf(errkind.ErrBadArgs, "%s: bad arguments: %v", c.Method, err)
	}
	return nil
}

// Controls delivers resize and signal requests sent to this call. Requests
// that arrive while the channel is full are dropped.
func (c *Call) Controls() <-chan Control { return c.controls }

type callKey struct {
	src, handle uint32
}

type running struct {
	cancel context.CancelFunc
	call   *Call
}

// Server runs calls that arrive at router.HandleCall from the parent.
type Server struct {
	rt  *router.Router
	reg *Registry
	log *zap.Logger

	mu     sync.Mutex
	calls  map[callKey]*running
	closed bool
	wg     sync.WaitGroup
}

// NewServer registers the call and control handles on rt.
func NewServer(rt *router.Router, reg *Registry, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{rt: rt, reg: reg, log: log, calls: map[callKey]*running{}}
	rt.Register(router.HandleCall, router.Receiver{Accept: router.AcceptParent, Deliver: s.deliverCall})
	rt.Register(router.HandleControl, router.Receiver{Accept: router.AcceptParent, Deliver: s.deliverControl})
	return s
}

func (s *Server) deliverCall(m *router.Message) {
	var req Request
	if err := wire.Unmarshal(m.Data, &req); err != nil {
		if m.Circuit != nil {
			m.Circuit.Close()
		}
		s.reply(m, nil, errkind.Errorf(errkind.ErrBadArgs, "malformed call: %v", err))
		return
	}
	h, ok := s.reg.Lookup(req.Method)
	if !ok {
		if m.Circuit != nil {
			m.Circuit.Close()
		}
		s.reply(m, nil, errkind.Errorf(errkind.ErrUnknownMethod, "unknown method %q on %s", req.Method, s.rt.Name(s.rt.ID())))
		return
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if req.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout))
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	call := &Call{Method: req.Method, Src: m.Src, Circuit: m.Circuit, args: req.Args, controls: make(chan Control, 8)}
	key := callKey{m.Src, m.ReplyTo}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		if m.Circuit != nil {
			m.Circuit.Close()
		}
		return
	}
	if m.ReplyTo != 0 {
		s.calls[key] = &running{cancel: cancel, call: call}
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		result, err := s.run(ctx, h, call)
		if call.Circuit != nil {
			call.Circuit.Close()
		}
		s.mu.Lock()
		delete(s.calls, key)
		s.mu.Unlock()
		cancel()
		s.reply(m, result, err)
	}()
}

// run calls h, turning a panic into an error so one bad handler cannot kill
// the agent and everything behind it.
func (s *Server) run(ctx context.Context, h Handler, call *Call) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panicked", zap.String("method", call.Method), zap.Any("panic", p))
			err = fmt.Errorf("%s: internal error: %v", call.Method, p)
		}
	}()
	return h(ctx, call)
}

func (s *Server) reply(m *router.Message, result any, err error) {
	if m.ReplyTo == 0 {
		return
	}
	out := &router.Message{Dst: m.Src, Handle: m.ReplyTo, Flags: router.FlagLast}
	if err == nil {
		out.Data, err = wire.Marshal(result)
	}
	if err != nil {
		out.Flags |= router.FlagError
		out.Data, _ = wire.Marshal(ToRemote(err))
	}
	err = s.rt.Send(out)
	if errors.Is(err, errkind.ErrTooLarge) {
		// Over the parent's frame limit: the caller is told so, by the
		// router's error, which names the limit.
		out.Flags |= router.FlagError
		out.Data, _ = wire.Marshal(&RemoteError{Kind: "too_large", Message: fmt.Sprintf(
			"%v: fetch a result this large over a circuit", err)})
		err = s.rt.Send(out)
	}
	if err != nil {
		s.log.Debug("reply not sent", zap.Error(err))
	}
}

func (s *Server) deliverControl(m *router.Message) {
	var c Control
	if err := wire.Unmarshal(m.Data, &c); err != nil {
		s.log.Warn("malformed control message", zap.Error(err))
		return
	}
	s.mu.Lock()
	r := s.calls[callKey{m.Src, c.Call}]
	s.mu.Unlock()
	if r == nil {
		return // already finished
	}
	if c.Op == OpCancel {
		r.cancel()
		return
	}
	select {
	case r.call.controls <- c:
	default:
	}
}

// Close cancels every running call and waits for their handlers.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for _, r := range s.calls {
		r.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
