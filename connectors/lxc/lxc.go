// Package lxc starts an agent inside a running LXC container (the classic
// lxc-* tools) with `lxc-attach -n NAME --clear-env -- sh -c FIRST_STAGE`;
// the agent binary travels over lxc-attach's stdin from the parent's RAM,
// so the container needs nothing but sh. For LXD and Incus containers (the
// `lxc` client) use package lxd.
//
// --clear-env: lxc-attach otherwise hands the attached program the whole
// environment of the process that runs it (the parent agent's: its HOME,
// its PATH, whatever secrets it holds), not the container's. Cleared, the
// agent starts with LXC's default PATH and container=lxc, as a process of
// the container would.
package lxc

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spindle-rpc/spindle/internal/lazyre"

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
	// take numbers only); default root of the container. Without a gid
	// lxc-attach keeps group 0 (root's), whatever the uid: give uid:gid.
	User string `msgpack:"user,omitempty"`
	// LXCPath is the container store (-P); default lxc-attach's
	// (/var/lib/lxc, or ~/.local/share/lxc for unprivileged users).
	LXCPath string `msgpack:"lxcpath,omitempty"`
	// AttachPath is the lxc-attach program; default "lxc-attach" on the
	// PATH.
	AttachPath string `msgpack:"attach_path,omitempty"`
	// Flags are extra lxc-attach flags (e.g. "--set-var", "K=V", or
	// "--keep-env" to hand the agent this host's environment), placed
	// after --clear-env, before `--`.
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
	argv = append(argv, "--clear-env")
	argv = append(argv, o.Flags...)
	return append(argv, "--", "sh", "-c", script)
}

// Rules classify lxc-attach's messages.
func (o Options) Rules() []container.Rule {
	n := o.Container
	return append(container.ShellRules(o.User), []container.Rule{
		{Match: lazyre.New(`(?i)is not defined|does not exist|doesn't exist|no container named`), Err: container.ErrNoContainer,
			Hint: fmt.Sprintf("LXC knows no container %q: check with `lxc-ls -f` (and LXCPath)", n)},
		// lxc-attach says "Failed to get init pid" both for a stopped
		// container and for one that does not exist: Start asks lxc-info
		// which it is.
		{Match: lazyre.New(`(?i)failed to get init pid|is not running|not running`), Err: container.ErrNotRunning,
			Hint: fmt.Sprintf("container %q is not running, or does not exist in this store: check with `lxc-ls -f`, start it with `lxc-start -n %s`", n, n)},
		{Match: lazyre.New(`(?i)permission denied|operation not permitted`), Err: container.ErrPermission,
			Hint: "lxc-attach needs root for system containers (or the container's owner for unprivileged ones)"},
	}...)
}

// Start implements connectors.Connector.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	conn, err := container.StartExec(ctx, req, o.Name(), o.tool(), o.Argv, o.Rules(), o.Timeout,
		container.CheckName("lxc", "Container", o.Container), o.idsErr())
	if err != nil && errors.Is(err, container.ErrNotRunning) {
		if precise := o.whyNotRunning(ctx); precise != nil {
			return nil, precise
		}
	}
	return conn, err
}

// InfoArgv is the command that tells a stopped container from a missing
// one: lxc-info beside AttachPath (or on the PATH).
func (o Options) InfoArgv() []string {
	argv := []string{"lxc-info"}
	if o.AttachPath != "" {
		argv[0] = filepath.Join(filepath.Dir(o.AttachPath), "lxc-info")
	}
	argv = append(argv, "-n", o.Container)
	if o.LXCPath != "" {
		argv = append(argv, "-P", o.LXCPath)
	}
	return append(argv, "-s", "-H")
}

// whyNotRunning asks lxc-info about a container lxc-attach could not
// enter: ErrNoContainer when LXC does not know it, ErrNotRunning with its
// state when it is stopped; nil when lxc-info cannot say.
func (o Options) whyNotRunning(ctx context.Context) error {
	argv := o.InfoArgv()
	info := container.Tool{Name: "lxc-info", Path: argv[0], Option: "AttachPath", Install: "the lxc package"}
	n := o.Container
	noContainer := fmt.Sprintf("LXC knows no container %q: check with `lxc-ls -f` (and LXCPath)", n)
	state, err := info.Output(ctx, []container.Rule{
		{Match: lazyre.New(`(?i)doesn't exist|does not exist|is not defined`), Err: container.ErrNoContainer, Hint: noContainer},
	}, argv[1:]...)
	switch {
	case errors.Is(err, container.ErrNoContainer):
		return fmt.Errorf("lxc-attach: %w: %s", container.ErrNoContainer, noContainer)
	case err != nil, state == "", strings.EqualFold(state, "RUNNING"):
		return nil
	}
	return fmt.Errorf("lxc-attach: %w: container %q is %s: start it with `lxc-start -n %s`", container.ErrNotRunning, n, strings.ToLower(state), n)
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
