// Package connect is the agent's "connect" service: it lets the controller
// ask an agent to start a child agent itself (sudo, su, doas, a container,
// another local agent), so a hop behind a host needs no tunnel, only a
// chain of agents on one bus.
//
// Methods:
//
//	connect.Start  StartArgs → bootstrap.Hello (with a circuit for a
//	               delegated hop: the controller's connectors.Helper)
//	connect.Close  CloseArgs → nothing
//
// The controller grants the new id to this agent's subtree before calling
// connect.Start (router.Grant); the agent rebuilds the connector from its
// kind and msgpack options (connectors.Register), starts it with its own
// binary as the agent source, and links the child under that id. When the
// child's link dies the router withdraws its route upward and every call
// waiting on it fails.
package connect

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap"
)

// Method names.
const (
	MethodStart = "connect.Start"
	MethodClose = "connect.Close"
)

// StartArgs are connect.Start's arguments.
type StartArgs struct {
	ID      uint32             `msgpack:"id"`
	Name    string             `msgpack:"name"`
	Kind    string             `msgpack:"kind"`
	Options msgpack.RawMessage `msgpack:"opts"`
	// Agents, for a connectors.Foreign hop, names the controller's agents
	// for every platform; the controller lends their bytes on the call's
	// circuit (connectors.AgentLender) if the target needs one.
	Agents []bootstrap.Manifest `msgpack:"agents,omitempty"`
	// StallTimeout, when not 0, is the controller's
	// router.Options.StallTimeout (nanoseconds, negative: never), for the
	// link to the new child in place of this agent's default.
	StallTimeout int64 `msgpack:"stall,omitempty"`
	// KeepaliveInterval and KeepaliveCountMax, when not 0, are the
	// controller's router.Options.KeepaliveInterval (nanoseconds,
	// negative: never) and KeepaliveCountMax, for the link to the new
	// child in place of this agent's defaults.
	KeepaliveInterval int64 `msgpack:"ka,omitempty"`
	KeepaliveCountMax int   `msgpack:"kan,omitempty"`
}

// CloseArgs are connect.Close's arguments.
type CloseArgs struct {
	ID uint32 `msgpack:"id"`
}

// Host is what the service needs from its agent.
type Host struct {
	Router    *router.Router
	Logger    *zap.Logger
	Verbosity int
	// Agent supplies the children's agent binary; default bootstrap.Self().
	Agent bootstrap.Source
}

// Service runs connect.Start and connect.Close for one agent.
type Service struct {
	host Host

	mu       sync.Mutex
	children map[uint32]*bootstrap.Conn
	wg       sync.WaitGroup
}

// Register adds the connect methods to reg.
func Register(reg *rpc.Registry, h Host) *Service {
	if h.Logger == nil {
		h.Logger = zap.NewNop()
	}
	if h.Agent == nil {
		h.Agent = bootstrap.Self()
	}
	s := &Service{host: h, children: map[uint32]*bootstrap.Conn{}}
	reg.Handle(MethodStart, s.start)
	reg.Handle(MethodClose, s.close)
	return s
}

func (s *Service) start(ctx context.Context, call *rpc.Call) (any, error) {
	var a StartArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	rt := s.host.Router
	if a.ID == 0 || a.ID == rt.ID() {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: id %d cannot be a child", MethodStart, a.ID)
	}
	newZero, ok := connectors.Lookup(a.Kind)
	if !ok {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: this agent cannot start %q hops", MethodStart, a.Kind)
	}
	c := newZero()
	if len(a.Options) > 0 {
		if err := wire.Unmarshal(a.Options, c); err != nil {
			return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: %s options: %v", MethodStart, a.Kind, err)
		}
	}
	// A delegated hop (ssh from this agent) gets the circuit on which the
	// controller serves its keys and known_hosts; the server closes it when
	// this handler returns, which ends the controller's helper.
	req := connectors.StartRequest{ID: a.ID, Parent: rt.ID(), Name: a.Name,
		Verbosity: s.host.Verbosity, Logger: s.host.Logger, Agent: s.host.Agent, Helper: call.Circuit}
	if len(a.Agents) > 0 && call.Circuit != nil {
		// A Foreign hop: the circuit is the controller's AgentLender.
		req.Agent, req.Helper = connectors.BorrowAgents(s.host.Agent, a.Agents, call.Circuit), nil
	}
	conn, err := c.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	link, err := rt.AddChild(ctx, conn, a.ID, a.Name)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("link %s: %w", a.Name, err)
	}
	link.SetPeerMaxFrame(conn.Hello.MaxFrame)
	if a.StallTimeout != 0 {
		link.SetStallTimeout(time.Duration(a.StallTimeout))
	}
	if a.KeepaliveInterval != 0 || a.KeepaliveCountMax != 0 {
		ro := router.Options{KeepaliveInterval: time.Duration(a.KeepaliveInterval), KeepaliveCountMax: a.KeepaliveCountMax}
		link.SetKeepalive(ro.Keepalive())
	}
	s.mu.Lock()
	s.children[a.ID] = conn
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		<-link.Done() // the child exited, was closed, or we are shutting down
		s.mu.Lock()
		delete(s.children, a.ID)
		s.mu.Unlock()
		conn.Close()
	}()
	s.host.Logger.Debug("child connected", zap.String("child", a.Name), zap.Uint32("id", a.ID), zap.Int("pid", conn.Hello.PID))
	return conn.Hello, nil
}

func (s *Service) close(ctx context.Context, call *rpc.Call) (any, error) {
	var a CloseArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	s.mu.Lock()
	conn := s.children[a.ID]
	s.mu.Unlock()
	if conn == nil {
		return nil, errkind.Errorf(errkind.ErrNotFound, "%s: no child %d", MethodClose, a.ID)
	}
	return nil, conn.Close()
}

// Close ends every child and waits for them.
func (s *Service) Close() {
	s.mu.Lock()
	conns := make([]*bootstrap.Conn, 0, len(s.children))
	for _, c := range s.children {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	s.wg.Wait()
}
