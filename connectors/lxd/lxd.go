// Package lxd starts an agent inside a running LXD (or Incus, with
// LXCPath pointing at `incus`) instance with `lxc exec NAME
// --mode=non-interactive -- sh -c FIRST_STAGE`; the agent binary travels
// over the exec's stdin from the parent's RAM, so the instance needs
// nothing but sh. For classic LXC containers (lxc-attach) use package lxc.
package lxd

import (
	"context"
	"fmt"
	"github.com/spindle-rpc/spindle/internal/lazyre"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
)

// Options configures an LXD hop. It is msgpack-encoded by the controller
// and decoded by the agent that runs the lxc client.
type Options struct {
	// Container is the instance's name, optionally REMOTE:NAME; required.
	Container string `msgpack:"container"`
	// User runs the agent with this uid, or uid:gid (`lxc exec --user
	// --group` take numbers only); default root of the instance.
	User string `msgpack:"user,omitempty"`
	// Project is the LXD project (--project); default the client's.
	Project string `msgpack:"project,omitempty"`
	// LXCPath is the LXD client program; default "lxc" on the PATH.
	LXCPath string `msgpack:"lxc_path,omitempty"`
	// Flags are extra `lxc exec` flags (e.g. "--env", "K=V", "--cwd",
	// "/srv"), placed before the instance name.
	Flags []string `msgpack:"flags,omitempty"`
	// Timeout bounds the start; default container.DefaultTimeout.
	Timeout time.Duration `msgpack:"timeout,omitempty"`
	// ContextName overrides the context's name (default "lxd:NAME",
	// "lxd:USER@NAME" with a User).
	ContextName string `msgpack:"context_name,omitempty"`
}

func init() {
	connectors.Register("lxd", func() connectors.Remote { return &Options{} })
}

// Kind implements connectors.Remote.
func (o Options) Kind() string { return "lxd" }

// MayBeForeign implements connectors.Foreign: the target may be
// a remote LXD server or a container of another architecture run under emulation.
func (o Options) MayBeForeign() bool { return true }

var _ connectors.Foreign = Options{}

// Name implements connectors.Connector.
func (o Options) Name() string {
	return container.HopName(o.ContextName, "lxd", o.User, o.Container)
}

func (o Options) tool() container.Tool {
	return container.Tool{Name: "lxc", Path: o.LXCPath, Option: "LXCPath", Install: "the LXD client (snap install lxd, or the lxd-client package)"}
}

// ids parses User: "", "UID" or "UID:GID".
func (o Options) ids() (uid, gid string, err error) {
	return container.NumericIDs("lxd", "lxc exec", o.User)
}

// Argv is the command Start runs, script being the first stage. argv[0]
// is LXCPath or "lxc". --mode=non-interactive keeps the exec off a
// terminal: stdout and stderr stay separate pipes and the link binary-safe.
func (o Options) Argv(script string) []string {
	argv := []string{"lxc"}
	if o.LXCPath != "" {
		argv[0] = o.LXCPath
	}
	argv = append(argv, "exec", "--mode=non-interactive")
	if o.Project != "" {
		argv = append(argv, "--project="+o.Project)
	}
	if uid, gid, err := o.ids(); err == nil {
		if uid != "" {
			argv = append(argv, "--user="+uid)
		}
		if gid != "" {
			argv = append(argv, "--group="+gid)
		}
	}
	argv = append(argv, o.Flags...)
	return append(argv, o.Container, "--", "sh", "-c", script)
}

// Rules classify the LXD client's messages.
func (o Options) Rules() []container.Rule {
	n := o.Container
	return append(container.ShellRules(o.User), []container.Rule{
		{Match: lazyre.New(`(?im)instance not found|^error: not found`), Err: container.ErrNoContainer,
			Hint: fmt.Sprintf("LXD knows no instance %q: check with `lxc list` (and Project)", n)},
		{Match: lazyre.New(`(?i)is not running|instance is frozen`), Err: container.ErrNotRunning,
			Hint: fmt.Sprintf("instance %q is not running (stopped or frozen): start it with `lxc start %s`", n, n)},
		{Match: lazyre.New(`(?i)permission denied|not authorized|forbidden`), Err: container.ErrPermission,
			Hint: "the user running lxc may not use LXD: run the hop as root or add the user to the lxd group"},
		{Match: lazyre.New(`(?i)unix socket.*(no such file|connection refused|not found)|check LXD is running|is the (lxd )?daemon running`), Err: container.ErrNoDaemon,
			Hint: "start LXD, or check the client's remote"},
	}...)
}

// Start implements connectors.Connector.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	return container.StartExec(ctx, req, o.Name(), o.tool(), o.Argv, o.Rules(), o.Timeout,
		container.CheckName("lxd", "Container", o.Container), o.idsErr())
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
