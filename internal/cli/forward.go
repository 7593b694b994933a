package cli

import (
	stdctx "context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/services/agentfwd"
	"go.uber.org/zap"
)

// forwardFlags are what run and shell forward while their command runs:
// the ssh-agent (-A) and TCP ports (-L, -R, -D).
type forwardFlags struct {
	agent bool
	ports portFlags
}

// forwardFlag adds -A, -L, -R and -D to a command that runs programs on
// its target.
func forwardFlag(c *cobra.Command, f *forwardFlags) *cobra.Command {
	c.Flags().BoolVarP(&f.agent, "forward-agent", "A", false,
		"forward this machine's ssh-agent ($SSH_AUTH_SOCK, or ssh_config's IdentityAgent) to the target's commands, like ssh -A (ssh_config's ForwardAgent does it for an SSH target); read-only: they may list keys and sign, not add, remove or lock")
	f.ports.add(c)
	return c
}

// startForwards starts what f asks for on s's target (ports parsed
// beforehand, so that a typo fails before connecting) and returns what
// ends it all.
func (g *globals) startForwards(ctx stdctx.Context, s *session, f *forwardFlags, ports portSpecs) (stop func(), err error) {
	stopAgent, err := g.startForwarding(ctx, s, f.agent)
	if err != nil {
		return nil, err
	}
	stopPorts, err := g.startPorts(ctx, s, ports, false)
	if err != nil {
		stopAgent()
		return nil, err
	}
	return func() {
		stopPorts()
		stopAgent()
	}, nil
}

// agentToForward is the socket of the ssh-agent to forward to s's
// target ("" for none), found once per session and flag: the daemon runs
// many commands on one session, and ssh_config is read through ssh -G.
func (s *session) agentToForward(ctx stdctx.Context, flagA bool) (string, error) {
	s.fwdMu.Lock()
	defer s.fwdMu.Unlock()
	if sock, ok := s.fwdSock[flagA]; ok {
		return sock, nil
	}
	var sock string
	if so, ok := s.last.(ssh.Options); ok {
		if flagA {
			so.ForwardAgent = "yes"
		}
		var err error
		if sock, err = so.AgentToForward(ctx, s.log); err != nil {
			return "", &connectError{err: fmt.Errorf("%s: ForwardAgent: %w", s.cx.Name(), err)}
		}
	} else if flagA {
		sock = os.Getenv("SSH_AUTH_SOCK")
	}
	if s.fwdSock == nil {
		s.fwdSock = map[bool]string{}
	}
	s.fwdSock[flagA] = sock
	return sock, nil
}

// startForwarding forwards the ssh-agent to s's target when -A was given,
// or when the last hop is SSH and ssh_config (or -o) says ForwardAgent for
// it, as ssh would; it returns what ends the forwarding. The agent is the
// one ssh would forward: IdentityAgent's, else $SSH_AUTH_SOCK's. With -A
// and no agent here it warns and goes on without (ssh does so quietly).
func (g *globals) startForwarding(ctx stdctx.Context, s *session, flagA bool) (stop func(), err error) {
	noop := func() {}
	sock, err := s.agentToForward(ctx, flagA)
	if err != nil {
		return nil, err
	}
	if sock == "" {
		if flagA {
			fmt.Fprintln(g.stderr, "spindle: -A: no ssh-agent to forward (SSH_AUTH_SOCK is not set, or IdentityAgent is none); going on without")
		}
		return noop, nil
	}
	f, err := agentfwd.Start(ctx, s.cx, sock)
	if err != nil {
		return nil, &connectError{err: fmt.Errorf("%s: forwarding the ssh-agent: %w", s.cx.Name(), err)}
	}
	s.log.Info("forwarding ssh-agent", zap.String("context", s.cx.Name()), zap.String("SSH_AUTH_SOCK", f.Path))
	return func() { f.Close() }, nil
}
