package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/docker"
	"github.com/spindle-rpc/spindle/connectors/kubectl"
	"github.com/spindle-rpc/spindle/connectors/lxc"
	"github.com/spindle-rpc/spindle/connectors/lxd"
	"github.com/spindle-rpc/spindle/connectors/machinectl"
	"github.com/spindle-rpc/spindle/connectors/podman"
	"github.com/spindle-rpc/spindle/connectors/setns"
)

// Container hops, each started by the previous hop's agent:
//
//	docker:[USER@]CONTAINER      docker exec -i
//	podman:[USER@]CONTAINER      podman exec -i
//	lxc:[UID@]CONTAINER          lxc-attach
//	lxd:[USER@]INSTANCE          lxc exec (LXD)
//	machinectl:[USER@]MACHINE    systemd-run --machine --pipe
//	kubectl:[NAMESPACE/]POD[/CONTAINER]
//	setns:[USER@]CONTAINER|PID   the agent enters the namespaces itself
//	                             (a docker container's, or a process's)
func containerHop(kind string) func(h Hop, o *connectOptions) (spindle.Connector, error) {
	return func(h Hop, _ *connectOptions) (spindle.Connector, error) {
		user, name := "", h.Arg
		if kind != "kubectl" {
			if i := strings.LastIndex(name, "@"); i >= 0 {
				user, name = name[:i], name[i+1:]
			}
		}
		if name == "" {
			return nil, &usageError{err: fmt.Errorf("%s: no container name in %q", kind, h)}
		}
		switch kind {
		case "docker":
			return docker.Options{Container: name, User: user}, nil
		case "podman":
			return podman.Options{Container: name, User: user}, nil
		case "lxc":
			return lxc.Options{Container: name, User: user}, nil
		case "lxd":
			return lxd.Options{Container: name, User: user}, nil
		case "machinectl":
			return machinectl.Options{Machine: name, User: user}, nil
		case "kubectl":
			parts := strings.Split(name, "/")
			switch len(parts) {
			case 1:
				return kubectl.Options{Pod: parts[0]}, nil
			case 2:
				return kubectl.Options{Namespace: parts[0], Pod: parts[1]}, nil
			case 3:
				return kubectl.Options{Namespace: parts[0], Pod: parts[1], Container: parts[2]}, nil
			}
			return nil, &usageError{err: fmt.Errorf("kubectl: want [NAMESPACE/]POD[/CONTAINER], got %q", name)}
		default: // setns
			if pid, err := strconv.Atoi(name); err == nil {
				return setns.Options{PID: pid, User: user}, nil
			}
			return setns.Options{Container: name, User: user}, nil
		}
	}
}
