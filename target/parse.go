package target

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// defaultHostKind is the kind of a bare host.
const defaultHostKind = "ssh"

// Kind says how a kind of hop is written.
type Kind struct {
	Name    string
	Bare    bool // alone: "local", "sudo"
	WithArg bool // with an argument: "sudo:postgres", "ssh:web1"
}

// Kinds lists the hop kinds Parse accepts, sorted by name.
func Kinds() []Kind {
	var ks []Kind
	for name, k := range hopKinds {
		ks = append(ks, Kind{Name: name, Bare: k.arg != argRequired, WithArg: k.arg != argNone})
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
	return ks
}

func supportedKinds() string {
	var names []string
	for _, k := range Kinds() {
		names = append(names, k.Name)
	}
	return strings.Join(names, ", ")
}

// Parse splits and checks a chain string (see the package comment for the
// syntax). A refused string is a *ParseError.
func Parse(raw string) (Target, error) {
	t := Target{Raw: raw}
	if strings.TrimSpace(raw) == "" {
		return t, parseErr(raw, 0, ErrEmpty, "empty target (supported kinds: %s)", supportedKinds())
	}
	for i, part := range strings.Split(raw, ",") {
		part = strings.TrimSpace(part)
		n := i + 1
		if part == "" {
			return t, parseErr(raw, n, ErrEmpty, "hop %d is empty", n)
		}
		h := splitHop(part)
		k, ok := hopKinds[h.Kind]
		switch {
		case !ok:
			return t, parseErr(raw, n, ErrUnknownKind, "unknown kind %q in hop %q (supported kinds: %s)", h.Kind, part, supportedKinds())
		case k.arg == argNone && h.Arg != "":
			return t, parseErr(raw, n, ErrArgument, "%s takes no argument, got %q", h.Kind, part)
		case k.arg == argRequired && h.Arg == "":
			return t, parseErr(raw, n, ErrArgument, "%s needs an argument (%s:ARG)", h.Kind, h.Kind)
		case i > 0 && k.remote == nil:
			return t, parseErr(raw, n, ErrPlacement, "%s hops after the first are not supported yet: give %q as the first hop", h.Kind, part)
		}
		if k.check != nil {
			if err := k.check(h.Arg); err != nil {
				return t, &ParseError{Raw: raw, Hop: n, Err: wrapReason(err, "hop %q: ", part)}
			}
		}
		t.Hops = append(t.Hops, h)
	}
	return t, nil
}

// wrapReason prefixes a check's error (a *reason) with words of context,
// keeping its kind.
func wrapReason(err error, format string, args ...any) error {
	var kind error = ErrArgument
	if r, ok := err.(*reason); ok {
		kind = r.kind
	}
	return &reason{kind: kind, msg: fmt.Sprintf(format, args...) + err.Error()}
}

// splitHop splits one hop into kind and argument (see the package
// comment).
func splitHop(part string) Hop {
	kind, arg, found := strings.Cut(part, ":")
	if found && isKindName(kind) {
		_, known := hopKinds[kind]
		if known || !isPort(arg) {
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

// SSHAddr is the argument of an ssh hop: [user@]host[:port].
type SSHAddr struct {
	User string // "": from ssh_config, else the local user
	Host string // host name, ssh_config alias or IP address (no brackets)
	Port int    // 0: from ssh_config, else 22
}

func (a SSHAddr) String() string {
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

// ParseSSHAddr parses "[user@]host[:port]", with an IPv6 address as
// "[::1]" or "[::1]:22" (a bare "::1" is accepted too, with no port). Its
// errors match ErrAddress.
func ParseSSHAddr(arg string) (SSHAddr, error) {
	var a SSHAddr
	bad := func(format string, args ...any) (SSHAddr, error) {
		return a, &reason{kind: ErrAddress, msg: fmt.Sprintf(format, args...)}
	}
	rest := arg
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		a.User, rest = rest[:i], rest[i+1:]
		if a.User == "" {
			return bad("empty user name before '@' in %q", arg)
		}
	}
	port := ""
	switch {
	case strings.HasPrefix(rest, "["):
		end := strings.Index(rest, "]")
		if end < 0 {
			return bad("missing ']' in %q", arg)
		}
		a.Host = rest[1:end]
		after := rest[end+1:]
		if after != "" {
			p, ok := strings.CutPrefix(after, ":")
			if !ok {
				return bad("unexpected %q after ']' in %q (want [ADDRESS]:PORT)", after, arg)
			}
			port = p
			if port == "" {
				return bad("empty port in %q", arg)
			}
		}
		if a.Host == "" {
			return bad("empty address in brackets in %q", arg)
		}
	case strings.Count(rest, ":") > 1:
		if net.ParseIP(rest) == nil {
			return bad("%q is neither host[:port] nor an IPv6 address (write IPv6 with a port as [ADDRESS]:PORT)", arg)
		}
		a.Host = rest
	default:
		h, p, found := strings.Cut(rest, ":")
		a.Host = h
		if found {
			if p == "" {
				return bad("empty port in %q", arg)
			}
			port = p
		}
	}
	if a.Host == "" {
		return bad("no host in %q", arg)
	}
	if strings.HasPrefix(a.Host, "-") || strings.HasPrefix(a.User, "-") {
		return bad("%q: a host or user cannot start with '-'", arg)
	}
	if strings.ContainsAny(a.Host+a.User, " \t\r\n'\"\\/") {
		return bad("%q: white space, quotes, '/' or '\\' in host or user", arg)
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || !isPort(port) || n < 1 || n > 65535 {
			return bad("bad port %q in %q (want 1-65535)", port, arg)
		}
		a.Port = n
	}
	return a, nil
}
