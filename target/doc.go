// Package target parses Spindle's chain strings ("bastion,web1,sudo:root")
// and opens them: each hop becomes a connector, the first one run by the
// controller, each later one started by the previous hop's agent.
//
// # Syntax
//
// A target is a comma-separated chain of hops, from the controller outward:
//
//	local                        an agent on this machine
//	ssh:[user@]host[:port]       an SSH hop; IPv6 as ssh:[::1]:22
//	host, user@host:port         a bare host: an SSH hop, resolved through
//	                             ssh_config like `ssh host`
//	sudo[:USER], su:USER,        another user on the previous hop (alone or
//	doas[:USER]                  first: on this machine); default root
//	docker:[USER@]CONTAINER      a container on the previous hop, through
//	podman:[USER@]CONTAINER      the tool's exec; setns enters a docker
//	lxc:[UID@]CONTAINER          container's (or a PID's) namespaces
//	lxd:[USER@]INSTANCE          itself, as root
//	machinectl:[USER@]MACHINE
//	kubectl:[NAMESPACE/]POD[/CONTAINER]
//	setns:[USER@]CONTAINER|PID
//
// Each hop is "kind:arg" or a bare word. A bare word that names a kind that
// takes no argument ("local") is that kind; any other bare word is a host,
// which means an SSH hop (write ssh:local for a host called "local"). The
// kind is the part before the first colon when it looks like a kind name
// (lower-case letters, digits, '-', '_') and is not "NAME:PORT"; otherwise
// ("user@host:22", "[::1]:22", "web1:2222") the whole hop is a host.
//
// Every hop after the first is started by the previous hop's agent: an SSH
// hop from a bastion dials from the bastion, with this controller's keys
// and known_hosts (no private key leaves this machine).
//
// # Use
//
// Parse checks a chain string and returns a Target, or a *ParseError
// (errors.Is(err, ErrBadTarget); errors.Is with ErrEmpty, ErrUnknownKind,
// ErrArgument, ErrPlacement or ErrAddress says what is wrong). Parsing
// reads nothing but the string: an inventory can be checked without
// connecting anywhere.
//
// Target.Steps turns a Target into connectors, configured by Options,
// which the caller fills in whole: the base ssh.Options of every SSH hop
// (config file, keys, host key policy, and the callbacks that ask for a
// password or a host key's confirmation) and the callback that gives a
// become hop its password. The package reads no flags, environment
// variables or terminals of its own, so that a daemon serving many clients
// can give each request its own.
//
// Open connects a chain's steps one after the other on a controller.
// Routes does the same for many chains at once and shares what they have
// in common: forty hosts behind one bastion dial the bastion once, and its
// agent starts the forty.
package target
