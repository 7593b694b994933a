package main

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/local"
)

// A TARGET is a comma-separated chain of hops, from the controller outward:
//
//	local                       an agent on this machine
//	ssh:[user@]host[:port]      an SSH hop; IPv6 as ssh:[::1]:22
//	host, user@host:port        a bare host: an SSH hop resolved through
//	                            ~/.ssh/config (or -F FILE) like `ssh host`
//	sudo[:USER], su:USER,       become another user on the previous hop
//	doas[:USER]                 (alone or first: on this machine)
//	docker:app1, setns:app1, …  a container on the previous hop
//	                            (containers.go lists every kind)
//
// Each hop is "kind:arg" or a bare word. A bare word that names a kind that
// takes no argument ("local") is that kind; any other bare word is a host,
// which means an SSH hop (write ssh:local for a host called "local"). The
// kind is the part before the first colon when it looks like a kind name
// (lower-case letters, digits, '-', '_') and is not "NAME:PORT"; otherwise
// ("user@host:22", "[::1]:22", "web1:2222") the whole hop is a host.
//
// Every hop after the first is started by the previous hop's agent: an
// SSH hop from a bastion dials from the bastion, with this controller's
// keys and known_hosts (no private key ever leaves this machine).

// Hop is one step of a target chain.
type Hop struct {
	Kind string // "local", "ssh", "sudo", "docker", …
	Arg  string // what follows "kind:", or the bare host; "" for none
}

func (h Hop) String() string {
	if h.Arg == "" {
		return h.Kind
	}
	return h.Kind + ":" + h.Arg
}

// Target is a parsed TARGET argument.
type Target struct {
	Raw  string
	Hops []Hop
}

func (t Target) String() string { return t.Raw }

// hopKind describes one kind of hop.
type hopKind struct {
	// arg says whether the kind takes an argument: argNone, argRequired.
	arg int
	// first says the hop must be the first of the chain.
	first bool
	// check validates the argument at parse time (nil = any).
	check func(arg string) error
	// connector builds the connector of a first hop; nil = not supported yet.
	connector func(h Hop, o *connectOptions) (spindle.Connector, error)
	// remote builds the connector of a later hop, started by the previous
	// hop's agent (a connectors.Remote, or a connectors.Delegated such as
	// ssh); nil = cannot be a later hop.
	remote func(h Hop, o *connectOptions) (spindle.Connector, error)
}

const (
	argNone = iota
	argRequired
	argOptional
)

// hopKinds are the kinds the CLI can connect through.
var hopKinds = map[string]hopKind{
	"local": {arg: argNone,
		connector: func(Hop, *connectOptions) (spindle.Connector, error) { return local.Options{}, nil },
		// A later local hop is a second agent on the previous hop's host.
		remote: func(Hop, *connectOptions) (spindle.Connector, error) { return local.Options{}, nil }},
	// A later ssh hop is dialled by the previous hop's agent, signing
	// with this controller's keys (connectors.Delegated).
	"ssh": {arg: argRequired,
		check:     func(arg string) error { _, err := parseSSHAddr(arg); return err },
		connector: sshHop,
		remote:    sshHop},
	// Become hops are started by the previous hop's agent: sudo and doas
	// alone mean root.
	"sudo": {arg: argOptional, remote: becomeHop("sudo")},
	"su":   {arg: argRequired, remote: becomeHop("su")},
	"doas": {arg: argOptional, remote: becomeHop("doas")},
	// Containers on the previous hop (containers.go).
	"docker":     {arg: argRequired, remote: containerHop("docker")},
	"podman":     {arg: argRequired, remote: containerHop("podman")},
	"kubectl":    {arg: argRequired, remote: containerHop("kubectl")},
	"lxc":        {arg: argRequired, remote: containerHop("lxc")},
	"lxd":        {arg: argRequired, remote: containerHop("lxd")},
	"machinectl": {arg: argRequired, remote: containerHop("machinectl")},
	"setns":      {arg: argRequired, remote: containerHop("setns")},
}

func sshHop(h Hop, o *connectOptions) (spindle.Connector, error) {
	a, err := parseSSHAddr(h.Arg)
	if err != nil {
		return nil, err
	}
	return o.sshConnector(a)
}

// plannedKinds are recognised so that their error says "not supported yet"
// rather than "unknown".
var plannedKinds = map[string]bool{}

// defaultHostKind is the kind of a bare host.
const defaultHostKind = "ssh"

// ErrBadTarget is wrapped by every target parsing error.
var ErrBadTarget = errors.New("bad target")

func supportedKinds() string {
	var ks []string
	for k := range hopKinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

func targetErr(raw, format string, args ...any) error {
	return fmt.Errorf("%w %q: %s", ErrBadTarget, raw, fmt.Sprintf(format, args...))
}

// ParseTarget splits and checks a TARGET argument.
func ParseTarget(raw string) (Target, error) {
	t := Target{Raw: raw}
	if strings.TrimSpace(raw) == "" {
		return t, targetErr(raw, "empty target (supported kinds: %s)", supportedKinds())
	}
	for i, part := range strings.Split(raw, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return t, targetErr(raw, "hop %d is empty", i+1)
		}
		h := splitHop(part)
		k, ok := hopKinds[h.Kind]
		switch {
		case !ok && plannedKinds[h.Kind]:
			return t, targetErr(raw, "%s targets are not supported yet (supported kinds: %s)", h.Kind, supportedKinds())
		case !ok:
			return t, targetErr(raw, "unknown kind %q in hop %q (supported kinds: %s)", h.Kind, part, supportedKinds())
		case k.arg == argNone && h.Arg != "":
			return t, targetErr(raw, "%s takes no argument, got %q", h.Kind, part)
		case k.arg == argRequired && h.Arg == "":
			return t, targetErr(raw, "%s needs an argument (%s:ARG)", h.Kind, h.Kind)
		case k.first && i > 0:
			return t, targetErr(raw, "%s can only be the first hop", h.Kind)
		case i > 0 && k.remote == nil:
			return t, targetErr(raw, "%s hops after the first are not supported yet: give %q as the first hop", h.Kind, part)
		}
		if k.check != nil {
			if err := k.check(h.Arg); err != nil {
				return t, targetErr(raw, "hop %q: %v", part, err)
			}
		}
		t.Hops = append(t.Hops, h)
	}
	return t, nil
}

// splitHop splits one hop into kind and argument (see the comment above).
func splitHop(part string) Hop {
	kind, arg, found := strings.Cut(part, ":")
	if found && isKindName(kind) {
		_, known := hopKinds[kind]
		if known || plannedKinds[kind] || !isPort(arg) {
			return Hop{Kind: kind, Arg: arg}
		}
		// "web1:2222": a host and a port.
	}
	if !found && isKindName(part) {
		if k, ok := hopKinds[part]; ok && k.arg != argRequired {
			return Hop{Kind: part}
		}
	}
	return Hop{Kind: defaultHostKind, Arg: part}
}

func isKindName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func isPort(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// sshAddr is the argument of an ssh hop: [user@]host[:port].
type sshAddr struct {
	User string // "" = from ssh_config, else the local user
	Host string // host name, ssh_config alias or IP address (no brackets)
	Port int    // 0 = from ssh_config, else 22
}

func (a sshAddr) String() string {
	s := a.Host
	if strings.Contains(s, ":") {
		s = "[" + s + "]"
	}
	if a.User != "" {
		s = a.User + "@" + s
	}
	if a.Port != 0 {
		s += ":" + strconv.Itoa(a.Port)
	}
	return s
}

// parseSSHAddr parses "[user@]host[:port]", with an IPv6 address as
// "[::1]" or "[::1]:22" (a bare "::1" is accepted too, with no port).
func parseSSHAddr(arg string) (sshAddr, error) {
	var a sshAddr
	rest := arg
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		a.User, rest = rest[:i], rest[i+1:]
		if a.User == "" {
			return a, fmt.Errorf("empty user name before '@' in %q", arg)
		}
	}
	port := ""
	switch {
	case strings.HasPrefix(rest, "["):
		end := strings.Index(rest, "]")
		if end < 0 {
			return a, fmt.Errorf("missing ']' in %q", arg)
		}
		a.Host = rest[1:end]
		after := rest[end+1:]
		if after != "" {
			p, ok := strings.CutPrefix(after, ":")
			if !ok {
				return a, fmt.Errorf("unexpected %q after ']' in %q (want [ADDRESS]:PORT)", after, arg)
			}
			port = p
			if port == "" {
				return a, fmt.Errorf("empty port in %q", arg)
			}
		}
		if a.Host == "" {
			return a, fmt.Errorf("empty address in brackets in %q", arg)
		}
	case strings.Count(rest, ":") > 1:
		if net.ParseIP(rest) == nil {
			return a, fmt.Errorf("%q is neither host[:port] nor an IPv6 address (write IPv6 with a port as [ADDRESS]:PORT)", arg)
		}
		a.Host = rest
	default:
		h, p, found := strings.Cut(rest, ":")
		a.Host = h
		if found {
			if p == "" {
				return a, fmt.Errorf("empty port in %q", arg)
			}
			port = p
		}
	}
	if a.Host == "" {
		return a, fmt.Errorf("no host in %q", arg)
	}
	if strings.HasPrefix(a.Host, "-") || strings.HasPrefix(a.User, "-") {
		return a, fmt.Errorf("%q: a host or user cannot start with '-'", arg)
	}
	if strings.ContainsAny(a.Host+a.User, " \t\r\n'\"\\/") {
		return a, fmt.Errorf("%q: white space, quotes, '/' or '\\' in host or user", arg)
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || !isPort(port) || n < 1 || n > 65535 {
			return a, fmt.Errorf("bad port %q in %q (want 1-65535)", port, arg)
		}
		a.Port = n
	}
	return a, nil
}

// Connectors returns the connectors of the target's hops, configured by o
// (nil = defaults): the first one the controller runs, each later one a
// connectors.Remote that the previous hop's agent runs.
func (t Target) Connectors(o *connectOptions) ([]spindle.Connector, error) {
	out, _, err := t.chain(o)
	return out, err
}

// chain is Connectors, with each connector's hop as a string ("local" for
// the agent a first become or container hop starts from).
func (t Target) chain(o *connectOptions) ([]spindle.Connector, []string, error) {
	if len(t.Hops) == 0 {
		return nil, nil, targetErr(t.Raw, "no hops")
	}
	if o == nil {
		o = &connectOptions{}
	}
	var out []spindle.Connector
	var names []string
	for i, h := range t.Hops {
		k := hopKinds[h.Kind]
		if i == 0 && k.connector == nil && k.remote != nil {
			// "sudo:postgres" alone: become on this machine.
			out, names = append(out, local.Options{}), append(names, "local")
		} else if i == 0 {
			if k.connector == nil {
				return nil, nil, targetErr(t.Raw, "%s cannot be the first hop", h.Kind)
			}
			c, err := k.connector(h, o)
			if err != nil {
				return nil, nil, err
			}
			out, names = append(out, c), append(names, h.String())
			continue
		}
		c, err := k.remote(h, o)
		if err != nil {
			return nil, nil, err
		}
		out, names = append(out, c), append(names, h.String())
	}
	return out, names, nil
}
