package main

import (
	stdctx "context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle/services/agentfwd"
	"go.uber.org/zap"
)

// forwardFlag adds -A to a command that runs programs on its target.
func forwardFlag(c *cobra.Command, on *bool) *cobra.Command {
	c.Flags().BoolVarP(on, "forward-agent", "A", false,
		"forward this machine's ssh-agent ($SSH_AUTH_SOCK) to the target's commands, like ssh -A; read-only: they may list keys and sign, not add, remove or lock")
	return c
}

// startForwarding forwards the ssh-agent to s's target when -A was given,
// and returns what ends it. Without an agent here it warns and goes on
// without, as ssh -A does (quietly, there).
func (g *globals) startForwarding(ctx stdctx.Context, s *session, on bool) (stop func(), err error) {
	if !on {
		return func() {}, nil
	}
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		fmt.Fprintln(g.stderr, "spindle: -A: no ssh-agent to forward (SSH_AUTH_SOCK is not set); going on without")
		return func() {}, nil
	}
	f, err := agentfwd.Start(ctx, s.cx, sock)
	if err != nil {
		return nil, &connectError{err: fmt.Errorf("%s: -A: %w", s.cx.Name(), err)}
	}
	s.log.Info("forwarding ssh-agent", zap.String("context", s.cx.Name()), zap.String("SSH_AUTH_SOCK", f.Path))
	return func() { f.Close() }, nil
}
