// Package docker starts an agent inside a running Docker container with
// `docker exec -i CONTAINER sh -c FIRST_STAGE`: the parent agent (or the
// controller) runs the docker CLI, and the agent binary travels over the
// exec's stdin from the parent's RAM, so the image needs nothing but sh.
package docker

import (
	"context"
	"fmt"
	"github.com/spindle-rpc/spindle/internal/lazyre"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
)

// Options configures a docker hop. It is msgpack-encoded by the
// controller and decoded by the agent that runs docker.
type Options struct {
	// Container is the container's name or id (required).
	Container string `msgpack:"container"`
	// User runs the agent as this user of the container (docker exec -u:
	// a name from the container's /etc/passwd, a uid, or uid:gid);
	// default the container's user.
	User string `msgpack:"user,omitempty"`
	// DockerPath is the docker program; default "docker" on the PATH.
	DockerPath string `msgpack:"docker_path,omitempty"`
	// Flags are extra `docker exec` flags, placed before the container
	// name (e.g. "-w", "/srv", "-e", "K=V", "--privileged").
	Flags []string `msgpack:"flags,omitempty"`
	// Timeout bounds the start; default container.DefaultTimeout.
	Timeout time.Duration `msgpack:"timeout,omitempty"`
	// ContextName overrides the context's name (default "docker:NAME",
	// "docker:USER@NAME" with a User).
	ContextName string `msgpack:"context_name,omitempty"`
}

func init() {
	connectors.Register("docker", func() connectors.Remote { return &Options{} })
}

// Kind implements connectors.Remote.
func (o Options) Kind() string { return "docker" }

// MayBeForeign implements connectors.Foreign: the target may be
// a remote daemon (DOCKER_HOST) or an image of another architecture run under emulation.
func (o Options) MayBeForeign() bool { return true }

var _ connectors.Foreign = Options{}

// Name implements connectors.Connector.
func (o Options) Name() string {
	return container.HopName(o.ContextName, "docker", o.User, o.Container)
}

func (o Options) tool() container.Tool {
	return container.Tool{Name: "docker", Path: o.DockerPath, Option: "DockerPath",
		Install: "Docker (the docker.io package on Debian and Ubuntu, or Docker CE)"}
}

// Argv is the command Start runs, script being the first stage. argv[0]
// is DockerPath or "docker".
func (o Options) Argv(script string) []string {
	argv := []string{"docker"}
	if o.DockerPath != "" {
		argv[0] = o.DockerPath
	}
	argv = append(argv, "exec", "-i")
	if o.User != "" {
		argv = append(argv, "-u", o.User)
	}
	argv = append(argv, o.Flags...)
	return append(argv, o.Container, "sh", "-c", script)
}

// Rules classify docker's messages.
func (o Options) Rules() []container.Rule {
	n := o.Container
	return append(container.ShellRules(o.User), []container.Rule{
		{Match: lazyre.New(`(?i)no such container`), Err: container.ErrNoContainer,
			Hint: fmt.Sprintf("docker knows no container %q: check the name with `docker ps -a`", n)},
		{Match: lazyre.New(`(?i)is not running|is restarting|is paused`), Err: container.ErrNotRunning,
			Hint: fmt.Sprintf("container %q is not running: start it (`docker start %s`) or unpause it", n, n)},
		{Match: lazyre.New(`(?i)permission denied.*docker(\.sock| daemon)`), Err: container.ErrPermission,
			Hint: "the user running docker may not use the Docker daemon: run the hop as root (e.g. after a sudo hop) or add the user to the docker group"},
		{Match: lazyre.New(`(?i)cannot connect to the docker daemon|is the docker daemon running|error during connect`), Err: container.ErrNoDaemon,
			Hint: "start the Docker daemon, or check DOCKER_HOST"},
	}...)
}

// Start implements connectors.Connector.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	return container.StartExec(ctx, req, o.Name(), o.tool(), o.Argv, o.Rules(), o.Timeout,
		container.CheckName("docker", "Container", o.Container))
}

var (
	_ connectors.Remote = Options{}
	_ connectors.Remote = (*Options)(nil)
)
