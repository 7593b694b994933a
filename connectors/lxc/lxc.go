// Package lxc starts an agent inside a running LXC container (the classic
// lxc-* tools) with `lxc-attach -n NAME -- sh -c FIRST_STAGE`; the agent
// binary travels over lxc-attach's stdin from the parent's RAM, so the
// container needs nothing but sh. For LXD and Incus containers (the `lxc`
// client) use package lxd.
package lxc

import (
	"context"
	"fmt"
	"github.com/spindle-rpc/spindle/internal/lazyre"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
)

// Options configures an lxc-attach hop. It is msgpack-encoded by the
// controller and decoded by the agent that runs lxc-attach.
type Options struct {
	// Container is the container's name (-n); required.
	Container string `msgpack:"container"`
	// User runs the agent with this uid, or uid:gid (lxc-attach -u/-g
	// take numbers only); default root of the container.
	User string `msgpack:"user,omitempty"`
	// LXCPath is the container store (-P); default lxc-attach's
	// (/var/lib/lxc, or ~/.local/share/lxc for unprivileged users).
	LXCPath string `msgpack:"lxcpath,omitempty"`
	// AttachPath is the lxc-attach program; default "lxc-attach" on the
	// PATH.
	AttachPath string `msgpack:"attach_path,omitempty"`
	// Flags are extra lxc-attach flags (e.g. "--clear-env",
	// "--set-var", "K=V"), placed before `--`.
	Flags []string `msgpack:"flags,omitempty"`
	// Timeout bounds the start; default container.DefaultTimeout.
	Timeout time.Duration `msgpack:"timeout,omitempty"`
	// ContextName overrides the context's name (default "lxc:NAME",
	// "lxc:USER@NAME" with a User).
	ContextName string `msgpack:"context_name,omitempty"`
}

func init() {
	connectors.Register("lxc", func() connectors.Remote { return &Options{} })
}

// Kind implements connectors.Remote.
func (o Options) Kind() string { return "lxc" }

// MayBeForeign implements connectors.Foreign: the target may be
// a container of another architecture run under emulation.
func (o Options) MayBeForeign() bool { return true }

var _ connectors.Foreign = Options{}

// Name implements connectors.Connector.
func (o Options) Name() string {
	return container.HopName(o.ContextName, "lxc", o.User, o.Container)
}

func (o Options) tool() container.Tool {
	return container.Tool{Name: "lxc-attach", Path: o.AttachPath, Option: "AttachPath", Install: "the lxc package"}
}

// ids parses User: "", "UID" or "UID:GID".
func (o Options) ids() (uid, gid string, err error) {
	return container.NumericIDs("lxc", "lxc-attach", o.User)
}

// Argv is the command Start runs, script being the first stage. argv[0]
// is AttachPath or "lxc-attach". A User that is not numeric is left out
// here; Start refuses it.
func (o Options) Argv(script string) []string {
	argv := []string{"lxc-attach"}
	if o.AttachPath != "" {
		argv[0] = o.AttachPath
	}
	argv = append(argv, "-n", o.Container)
	if o.LXCPath != "" {
		argv = append(argv, "-P", o.LXCPath)
	}
	if uid, gid, err := o.ids(); err == nil {
		if uid != "" {
			argv = append(argv, "-u", uid)
		}
		if gid != "" {
			argv = append(argv, "-g", gid)
		}
	}
	argv = append(argv, o.Flags...)
	return append(argv, "--", "sh", "-c", script)
}

// Rules classify lxc-attach's messages.
func (o Options) Rules() []container.Rule {
	n := o.Container
	return append(container.ShellRules(o.User), []container.Rule{
		{Match: lazyre.New(`(?i)is not defined|does not exist|doesn't exist|no container named`), Err: container.ErrNoContainer,
			Hint: fmt.Sprintf("LXC knows no container %q: check with `lxc-ls -f` (and LXCPath)", n)},
		{Match: lazyre.New(`(?i)failed to get init pid|is not running|not running`), Err: container.ErrNotRunning,
			Hint: fmt.Sprintf("container %q is not running, or does not exist in this store: check with `lxc-ls -f`, start it with `lxc-start -n %s`", n, n)},
		{Match: lazyre.New(`(?i)permission denied|operation not permitted`), Err: container.ErrPermission,
			Hint: "lxc-attach needs root for system containers (or the container's owner for unprivileged ones)"},
	}...)
}

// Start implements connectors.Connector.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	return container.StartExec(ctx, req, o.Name(), o.tool(), o.Argv, o.Rules(), o.Timeout,
		container.CheckName("lxc", "Container", o.Container), o.idsErr())
}

var (
	_ connectors.Remote = Options{}
	_ connectors.Remote = (*Options)(nil)
)

// idsErr is the error of o.ids, for StartExec's checks.
func (o Options) idsErr() error {
	_, _, err := o.ids()
	return err
}
