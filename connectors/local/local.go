// Package local starts an agent as a child process on this machine: the
// cheapest connector, used for tests, benchmarks and local automation.
package local

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
)

// Options configures a local agent. The zero value starts the controller's
// own agent binary as the current user.
type Options struct {
	// Agent supplies the agent binary; default: the StartRequest's (the
	// controller's embedded agents, or an agent's own binary).
	Agent bootstrap.Source `msgpack:"-"`
	// ContextName overrides the context's name (default "local").
	ContextName string `msgpack:"name,omitempty"`
	// Env, if non-nil, is the agent's whole environment (default: ours).
	Env []string `msgpack:"env,omitempty"`
}

func init() {
	connectors.Register("local", func() connectors.Remote { return &Options{} })
}

// Kind implements connectors.Remote: an agent can start a local child
// agent of its own (a second agent on the same host, e.g. for isolation).
func (o Options) Kind() string { return "local" }

// Name implements connectors.Connector.
func (o Options) Name() string {
	if o.ContextName != "" {
		return o.ContextName
	}
	return "local"
}

// Start implements connectors.Connector: the agent is copied into the
// private cache directory (once) and run from there.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	src := o.Agent
	if src == nil {
		src = req.Agent
	}
	if src == nil {
		return nil, fmt.Errorf("local: no agent source")
	}
	bin, err := src.Agent(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	path, err := bootstrap.Materialize(bin)
	if err != nil {
		return nil, err
	}
	args := req.Args()
	cmd := exec.Command(path, args.Argv()...)
	cmd.Env = bootstrap.WithOneProc(o.Env)
	// Its own process group: a Ctrl-C on the controller's terminal goes to
	// the controller, which cancels calls cleanly, not to the agent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return bootstrap.StartCommand(ctx, cmd, args.Nonce, req.Name, req.Logger)
}

var _ connectors.Connector = Options{}
