// Package podman starts an agent inside a running Podman container with
// `podman exec -i CONTAINER sh -c FIRST_STAGE`; the agent binary travels
// over the exec's stdin from the parent's RAM, so the image needs nothing
// but sh. Rootless podman works as the user who owns the container.
package podman

import (
	"context"
	"fmt"
	"github.com/spindle-rpc/spindle/internal/lazyre"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
)

// Options configures a podman hop. It is msgpack-encoded by the
// controller and decoded by the agent that runs podman.
type Options struct {
	// Container is the container's name or id (required).
	Container string `msgpack:"container"`
	// User runs the agent as this user of the container (podman exec -u:
	// a name, a uid, or uid:gid); default the container's user.
	User string `msgpack:"user,omitempty"`
	// PodmanPath is the podman program; default "podman" on the PATH.
	PodmanPath string `msgpack:"podman_path,omitempty"`
	// Flags are extra `podman exec` flags, placed before the container
	// name (e.g. "-w", "/srv", "-e", "K=V").
	Flags []string `msgpack:"flags,omitempty"`
	// Timeout bounds the start; default container.DefaultTimeout.
	Timeout time.Duration `msgpack:"timeout,omitempty"`
	// ContextName overrides the context's name (default "podman:NAME",
	// "podman:USER@NAME" with a User).
	ContextName string `msgpack:"context_name,omitempty"`
}

func init() {
	connectors.Register("podman", func() connectors.Remote { return &Options{} })
}

// Kind implements connectors.Remote.
func (o Options) Kind() string { return "podman" }

// MayBeForeign implements connectors.Foreign: the target may be
// a remote podman service or an image of another architecture run under emulation.
func (o Options) MayBeForeign() bool { return true }

var _ connectors.Foreign = Options{}

// Name implements connectors.Connector.
func (o Options) Name() string {
	return container.HopName(o.ContextName, "podman", o.User, o.Container)
}

func (o Options) tool() container.Tool {
	return container.Tool{Name: "podman", Path: o.PodmanPath, Option: "PodmanPath", Install: "the podman package"}
}

// Argv is the command Start runs, script being the first stage. argv[0]
// is PodmanPath or "podman".
func (o Options) Argv(script string) []string {
	argv := []string{"podman"}
	if o.PodmanPath != "" {
		argv[0] = o.PodmanPath
	}
	argv = append(argv, "exec", "-i")
	if o.User != "" {
		argv = append(argv, "-u", o.User)
	}
	argv = append(argv, o.Flags...)
	return append(argv, o.Container, "sh", "-c", script)
}

// Rules classify podman's messages.
func (o Options) Rules() []container.Rule {
	n := o.Container
	return append(container.ShellRules(o.User), []container.Rule{
		{Match: lazyre.New(`(?i)no container with name or id|no such container`), Err: container.ErrNoContainer,
			Hint: fmt.Sprintf("podman knows no container %q for this user (rootless containers belong to the user who made them): check with `podman ps -a`", n)},
		{Match: lazyre.New(`(?i)container state improper|can only create exec sessions on running containers|is not running`), Err: container.ErrNotRunning,
			Hint: fmt.Sprintf("container %q is not running: start it (`podman start %s`)", n, n)},
		{Match: lazyre.New(`(?i)cannot connect to podman|unable to connect to podman`), Err: container.ErrNoDaemon,
			Hint: "check the podman service or CONTAINER_HOST"},
	}...)
}

// Start implements connectors.Connector.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	return container.StartExec(ctx, req, o.Name(), o.tool(), o.Argv, o.Rules(), o.Timeout,
		container.CheckName("podman", "Container", o.Container))
}

var (
	_ connectors.Remote = Options{}
	_ connectors.Remote = (*Options)(nil)
)
