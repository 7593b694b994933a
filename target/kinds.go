package target

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/doas"
	"github.com/spindle-rpc/spindle/connectors/docker"
	"github.com/spindle-rpc/spindle/connectors/kubectl"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/connectors/lxc"
	"github.com/spindle-rpc/spindle/connectors/lxd"
	"github.com/spindle-rpc/spindle/connectors/machinectl"
	"github.com/spindle-rpc/spindle/connectors/podman"
	"github.com/spindle-rpc/spindle/connectors/setns"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/connectors/su"
	"github.com/spindle-rpc/spindle/connectors/sudo"
)

// hopKind describes one kind of hop.
type hopKind struct {
	// arg says whether the kind takes an argument.
	arg int
	// check validates the argument at parse time (nil = any).
	check func(arg string) error
	// connector builds the connector of a first hop; nil: the chain
	// starts with a local agent that runs remote.
	connector func(h Hop, o *Options) (spindle.Connector, error)
	// remote builds the connector of a later hop, started by the previous
	// hop's agent (a connectors.Remote, or a connectors.Delegated such as
	// ssh); nil = cannot be a later hop.
	remote func(h Hop, o *Options) (spindle.Connector, error)
}

const (
	argNone = iota
	argRequired
	argOptional
)

// hopKinds are the kinds a chain can go through.
var hopKinds = map[string]hopKind{
	"local": {arg: argNone,
		connector: func(Hop, *Options) (spindle.Connector, error) { return local.Options{}, nil },
		// A later local hop is a second agent on the previous hop's host.
		remote: func(Hop, *Options) (spindle.Connector, error) { return local.Options{}, nil }},
	// A later ssh hop is dialled by the previous hop's agent, signing
	// with this controller's keys (connectors.Delegated).
	"ssh": {arg: argRequired,
		check:     func(arg string) error { _, err := ParseSSHAddr(arg); return err },
		connector: sshHop,
		remote:    sshHop},
	// Become hops are started by the previous hop's agent: sudo and doas
	// alone mean root.
	"sudo": {arg: argOptional, remote: becomeHop("sudo")},
	"su":   {arg: argRequired, remote: becomeHop("su")},
	"doas": {arg: argOptional, remote: becomeHop("doas")},
	// Containers on the previous hop.
	"docker":     containerKind("docker"),
	"podman":     containerKind("podman"),
	"kubectl":    containerKind("kubectl"),
	"lxc":        containerKind("lxc"),
	"lxd":        containerKind("lxd"),
	"machinectl": containerKind("machinectl"),
	"setns":      containerKind("setns"),
}

// Steps returns the connectors of t's hops, configured by o: the first
// one for the controller to run, each later one for the previous hop's
// agent. A become password is asked for (o.BecomePassword) now.
func (t Target) Steps(o Options) ([]Step, error) {
	if len(t.Hops) == 0 {
		return nil, parseErr(t.Raw, 0, ErrEmpty, "no hops")
	}
	var out []Step
	for i, h := range t.Hops {
		k, ok := hopKinds[h.Kind]
		if !ok {
			return nil, parseErr(t.Raw, i+1, ErrUnknownKind, "unknown kind %q in hop %q (supported kinds: %s)", h.Kind, h, supportedKinds())
		}
		build := k.remote
		switch {
		case i == 0 && k.connector != nil:
			build = k.connector
		case i == 0:
			// "sudo:postgres" alone: become on this machine.
			out = append(out, Step{Hop: Hop{Kind: "local"}, Connector: local.Options{}})
		case build == nil:
			return nil, parseErr(t.Raw, i+1, ErrPlacement, "%s cannot be a later hop", h.Kind)
		}
		c, err := build(h, &o)
		if err != nil {
			return nil, err
		}
		out = append(out, Step{Hop: h, Connector: c})
	}
	return out, nil
}

// Connectors is Steps without the hops.
func (t Target) Connectors(o Options) ([]spindle.Connector, error) {
	steps, err := t.Steps(o)
	if err != nil {
		return nil, err
	}
	cs := make([]spindle.Connector, len(steps))
	for i, s := range steps {
		cs[i] = s.Connector
	}
	return cs, nil
}

func sshHop(h Hop, o *Options) (spindle.Connector, error) {
	a, err := ParseSSHAddr(h.Arg)
	if err != nil {
		return nil, err
	}
	return a.Options(o.SSH), nil
}

// Options returns base for this address: a copy (its lists copied too)
// with a's host, and a's user and port when it has them.
func (a SSHAddr) Options(base ssh.Options) ssh.Options {
	so := base
	so.Host = a.Host
	if a.User != "" {
		so.User = a.User
	}
	if a.Port != 0 {
		so.Port = a.Port
	}
	so.IdentityFiles = slices.Clone(base.IdentityFiles)
	so.PreferredAuthentications = slices.Clone(base.PreferredAuthentications)
	so.SendEnv = slices.Clone(base.SendEnv)
	so.SetEnv = slices.Clone(base.SetEnv)
	so.CertificateFiles = slices.Clone(base.CertificateFiles)
	so.KnownHostsFiles = slices.Clone(base.KnownHostsFiles)
	return so
}

// becomeHop builds the connector of a sudo:, su: or doas: hop. sudo and
// doas alone mean root; su needs the user.
func becomeHop(kind string) func(h Hop, o *Options) (spindle.Connector, error) {
	return func(h Hop, o *Options) (spindle.Connector, error) {
		user := h.Arg
		if user == "" {
			user = "root"
		}
		var pw string
		if o.BecomePassword != nil {
			var err error
			if pw, err = o.BecomePassword(kind, user); err != nil {
				return nil, err
			}
		}
		switch kind {
		case "sudo":
			return sudo.Options{User: user, Password: pw}, nil
		case "su":
			return su.Options{User: user, Password: pw}, nil
		default:
			return doas.Options{User: user, Password: pw}, nil
		}
	}
}

// Container hops, each started by the previous hop's agent:
//
//	docker:[USER@]CONTAINER      docker exec -i
//	podman:[USER@]CONTAINER      podman exec -i
//	lxc:[UID[:GID]@]CONTAINER    lxc-attach
//	lxd:[USER@]INSTANCE          lxc exec (LXD)
//	machinectl:[USER@]MACHINE    systemd-run --machine --pipe
//	kubectl:[NAMESPACE/]POD[/CONTAINER]
//	setns:[USER@]CONTAINER|PID   the agent enters the namespaces itself
//	                             (a docker container's, or a process's)
func containerKind(kind string) hopKind {
	return hopKind{arg: argRequired,
		check: func(arg string) error { _, err := containerConnector(kind, arg); return err },
		remote: func(h Hop, _ *Options) (spindle.Connector, error) {
			return containerConnector(kind, h.Arg)
		}}
}

func containerConnector(kind, arg string) (spindle.Connector, error) {
	bad := func(format string, args ...any) (spindle.Connector, error) {
		return nil, &reason{kind: ErrArgument, msg: fmt.Sprintf(format, args...)}
	}
	user, name := "", arg
	if kind != "kubectl" {
		if i := strings.LastIndex(name, "@"); i >= 0 {
			user, name = name[:i], name[i+1:]
		}
	}
	if name == "" {
		return bad("%s: no container name in %q", kind, kind+":"+arg)
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
		return bad("kubectl: want [NAMESPACE/]POD[/CONTAINER], got %q", name)
	default: // setns
		if pid, err := strconv.Atoi(name); err == nil {
			return setns.Options{PID: pid, User: user}, nil
		}
		return setns.Options{Container: name, User: user}, nil
	}
}
