// Package machinectl starts an agent inside a running systemd-machined
// machine (a systemd-nspawn container, or any container registered with
// machined that runs systemd) as a transient service of the machine's own
// service manager:
//
//	systemd-run --machine=NAME --pipe --wait --collect
//	    --service-type=exec [--uid=USER] -- /bin/sh -c FIRST_STAGE
//
// Why systemd-run and not `machinectl shell`: machinectl shell always puts
// the command on a pseudo-terminal (it is `systemd-run --pty`), which
// echoes, translates line endings and mixes stderr into stdout, so the
// binary link cannot run over it. systemd-run --pipe hands our three pipes
// to the service as they are (systemd 235+; --pipe is allowed with
// --machine, not with --host).
//
// Not --quiet: it also silences systemd-run's report of a start job that
// failed (a User the machine does not have, no /bin/sh: the service
// exits 217/USER or 203/EXEC before it runs), which then exits 1 without
// a word. Its other messages ("Running as unit …", "Finished with result
// …") go to stderr, which is logged, never to the link.
//
// systemd expands ${VAR} and $VAR in a transient service's command line
// and turns "$$" into "$"; the first stage's every "$" is therefore sent
// as "$$". (Do not add --expand-environment=no to Flags: the stage would
// then reach sh with its dollars doubled.)
package machinectl

import (
	"context"
	"fmt"
	"github.com/spindle-rpc/spindle/internal/lazyre"
	"strings"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
)

// Options configures a machinectl hop. It is msgpack-encoded by the
// controller and decoded by the agent that runs systemd-run.
type Options struct {
	// Machine is the machine's name as `machinectl list` shows it;
	// required.
	Machine string `msgpack:"machine"`
	// User runs the agent as this user of the machine (--uid: a name or
	// a uid, resolved by the machine's systemd, which also sets HOME);
	// default root.
	User string `msgpack:"user,omitempty"`
	// SystemdRunPath is the systemd-run program; default "systemd-run"
	// on the PATH.
	SystemdRunPath string `msgpack:"systemd_run_path,omitempty"`
	// Flags are extra systemd-run flags (e.g. "-p", "MemoryMax=1G",
	// "-E", "K=V"), placed before `--`.
	Flags []string `msgpack:"flags,omitempty"`
	// Timeout bounds the start; default container.DefaultTimeout.
	Timeout time.Duration `msgpack:"timeout,omitempty"`
	// ContextName overrides the context's name (default
	// "machinectl:NAME", "machinectl:USER@NAME" with a User).
	ContextName string `msgpack:"context_name,omitempty"`
}

func init() {
	connectors.Register("machinectl", func() connectors.Remote { return &Options{} })
}

// Kind implements connectors.Remote.
func (o Options) Kind() string { return "machinectl" }

// MayBeForeign implements connectors.Foreign: the target may be
// a machine of another architecture run under emulation.
func (o Options) MayBeForeign() bool { return true }

var _ connectors.Foreign = Options{}

// Name implements connectors.Connector.
func (o Options) Name() string {
	return container.HopName(o.ContextName, "machinectl", o.User, o.Machine)
}

func (o Options) tool() container.Tool {
	return container.Tool{Name: "systemd-run", Path: o.SystemdRunPath, Option: "SystemdRunPath",
		Install: "systemd and the systemd-container package (machinectl, systemd-machined)"}
}

// Argv is the command Start runs, script being the first stage (escaped
// here for systemd's variable expansion). argv[0] is SystemdRunPath or
// "systemd-run".
func (o Options) Argv(script string) []string {
	argv := []string{"systemd-run"}
	if o.SystemdRunPath != "" {
		argv[0] = o.SystemdRunPath
	}
	argv = append(argv, "--machine="+o.Machine, "--pipe", "--wait", "--collect", "--service-type=exec")
	if o.User != "" {
		argv = append(argv, "--uid="+o.User)
	}
	argv = append(argv, o.Flags...)
	return append(argv, "--", "/bin/sh", "-c", strings.ReplaceAll(script, "$", "$$"))
}

// Rules classify systemd-run's messages.
func (o Options) Rules() []container.Rule {
	n := o.Machine
	return append(container.ShellRules(o.User), []container.Rule{
		{Match: lazyre.New(`(?i)no machine .* known|machine .* not known|no such machine|failed to connect to bus: (no such|host is down|no such device)`), Err: container.ErrNoContainer,
			Hint: fmt.Sprintf("machined knows no running machine %q with systemd inside: check with `machinectl list`", n)},
		{Match: lazyre.New(`(?i)failed to (look up|resolve) user|invalid user|no such process`), Err: container.ErrNoSuchUser,
			Hint: fmt.Sprintf("user %q does not exist in machine %q", o.User, n)},
		o.startFailed(),
		{Match: lazyre.New(`(?i)access denied|permission denied|interactive authentication required`), Err: container.ErrPermission,
			Hint: "starting services in a machine needs root (or a polkit rule): run the hop as root, e.g. after a sudo hop"},
	}...)
}

// startFailed is the rule for a start job that failed: systemd in the
// machine could not start /bin/sh as the user. With a User, the likely
// cause is a user the machine does not have; without, a missing /bin/sh.
// The machine's journal says which.
func (o Options) startFailed() container.Rule {
	match := lazyre.New(`(?i)job for \S+ failed because the control process exited with error code`)
	journal := fmt.Sprintf("`journalctl -M %s -xe` says why", o.Machine)
	if o.User != "" {
		return container.Rule{Match: match, Err: container.ErrNoSuchUser,
			Hint: fmt.Sprintf("systemd in machine %q could not start /bin/sh as %q: no such user there, or no /bin/sh (%s)", o.Machine, o.User, journal)}
	}
	return container.Rule{Match: match, Err: container.ErrNoShell,
		Hint: fmt.Sprintf("systemd in machine %q could not start /bin/sh (%s)", o.Machine, journal)}
}

// Start implements connectors.Connector.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	return container.StartExec(ctx, req, o.Name(), o.tool(), o.Argv, o.Rules(), o.Timeout,
		container.CheckName("machinectl", "Machine", o.Machine))
}

var (
	_ connectors.Remote = Options{}
	_ connectors.Remote = (*Options)(nil)
)
