// Package connectors defines how a byte stream to a new agent is opened.
// Each sub-package (local, ssh, sudo, su, doas, docker, podman, kubectl,
// lxc, lxd, machinectl, setns) is a small Options type that implements
// Connector; become and container hold what the become and container
// kinds share. A Remote connector also runs on an agent (a hop started by
// the previous hop's agent), and a Delegated one (ssh) runs there with the
// controller's keys and known_hosts served over a circuit.
package connectors

import (
	"context"
	"net"
	"sync"

	"github.com/spindle-rpc/spindle/bootstrap"
	"go.uber.org/zap"
)

// StartRequest is what the controller tells a connector about the agent to
// start.
type StartRequest struct {
	ID        uint32 // the new context's id
	Parent    uint32 // the id of the context that runs the connector
	Name      string // the new context's name ("local", "ssh:web1")
	Verbosity int
	Logger    *zap.Logger
	// Agent supplies agent binaries: on the controller its embedded
	// agents (bootstrap.Default), on an agent its own binary
	// (bootstrap.Self). Connectors use it unless their options name
	// another source; they never call bootstrap.Default themselves, so
	// that agents, which run connectors too, do not link the embedded
	// agents into their own binary.
	Agent bootstrap.Source
	// Helper is, on an agent starting a Delegated hop, the circuit on
	// which the controller serves that hop's Helper; nil otherwise.
	Helper net.Conn
	// Fresh is set by a connector for its one retry after
	// bootstrap.ErrStaleAgent: the first stage must not run the cached
	// agent but upload a new one.
	Fresh bool
	// ParentMaxFrame is the largest frame the context that runs the
	// connector reads, for the agent's -parent-max-frame; 0 for
	// router.DefaultMaxFrameSize.
	ParentMaxFrame int
}

// Args are the agent's command-line arguments for req, with a fresh nonce.
func (req StartRequest) Args() bootstrap.AgentArgs {
	return bootstrap.AgentArgs{ID: req.ID, Parent: req.Parent, Name: req.Name,
		Nonce: bootstrap.NewNonce(), Verbosity: req.Verbosity, Fresh: req.Fresh, ParentMaxFrame: req.ParentMaxFrame}
}

// Connector starts an agent and returns the stream to it, positioned after
// its hello.
type Connector interface {
	// Name is the new context's name in chains, logs and errors.
	Name() string
	Start(ctx context.Context, req StartRequest) (*bootstrap.Conn, error)
}

// Remote is a Connector that can also run on an agent (sudo, su, doas,
// docker, …: a hop started BY the parent agent). Its value is msgpack-encoded
// (exported fields with msgpack tags) by the controller and decoded on the
// agent into the value its registered constructor returns.
type Remote interface {
	Connector
	// Kind names the connector in the registry ("sudo").
	Kind() string
}

// Delegated is a Connector that an agent can start but that needs what
// only the controller has while it starts: an SSH hop from a bastion signs
// with the controller's keys and checks the host key against the
// controller's known_hosts, so that no private key ever sits on an
// intermediary (agent forwarding over the bus).
type Delegated interface {
	Connector
	// Delegate runs on the controller. It resolves what the controller
	// knows (ssh_config, keys, known_hosts) and returns the Remote to send
	// to the parent agent, and the Helper that the controller serves on a
	// circuit to that agent for as long as the hop is starting (the
	// agent's connector finds it in StartRequest.Helper).
	Delegate(ctx context.Context, log *zap.Logger) (Remote, Helper, error)
}

// Helper serves one delegated start on the controller's side of its
// circuit.
type Helper interface {
	// Serve answers the hop's requests on conn until conn ends.
	Serve(conn net.Conn)
	// Close releases what the helper holds (e.g. the ssh-agent
	// connection); it runs after Serve has returned.
	Close() error
}

var (
	registryMu sync.RWMutex
	registry   = map[string]func() Remote{}
)

// Register makes a Remote connector kind available on agents. newZero
// returns a pointer to a zero value to decode options into. Packages call
// it from init.
func Register(kind string, newZero func() Remote) {
	registryMu.Lock()
	registry[kind] = newZero
	registryMu.Unlock()
}

// Lookup returns the constructor registered for kind.
func Lookup(kind string) (func() Remote, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	f, ok := registry[kind]
	return f, ok
}
