package cli

import (
	stdctx "context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/services/tunnel"
)

// portForward is one -L or -R: listen on Listen (here for -L, on the
// target for -R), and connect each connection to Connect (from the target
// for -L, from here for -R). Either may be a Unix socket.
type portForward struct {
	ListenNet, Listen   string // "tcp" and [bind]:port as net.Listen takes it, or "unix" and a path
	ConnectNet, Connect string // "tcp" and host:port, or "unix" and a path
}

// parsePortForward parses ssh's -L and -R syntax: [BIND:]PORT:HOST:HOSTPORT,
// with IPv6 addresses in brackets, where a socket path (starting with /)
// may stand for [BIND:]PORT, for HOST:HOSTPORT, or both. flag ("-L", "-R")
// names it in errors. Without BIND it listens on 127.0.0.1 only, as ssh
// does by default.
func parsePortForward(flag, spec string) (portForward, error) {
	bad := func(why string) (portForward, error) {
		return portForward{}, fmt.Errorf("%s %s: %s", flag, spec, why)
	}
	var parts []string
	for rest := spec; rest != ""; {
		if strings.HasPrefix(rest, "[") {
			end := strings.Index(rest, "]")
			if end < 0 {
				return bad("unclosed [")
			}
			parts = append(parts, rest[1:end])
			rest = rest[end+1:]
			if rest != "" && !strings.HasPrefix(rest, ":") {
				return bad("want ':' after ]")
			}
			rest = strings.TrimPrefix(rest, ":")
			continue
		}
		part, after, found := strings.Cut(rest, ":")
		parts = append(parts, part)
		rest = after
		if found && rest == "" {
			parts = append(parts, "")
		}
	}
	isPath := func(p string) bool { return strings.HasPrefix(p, "/") }
	var f portForward
	// The connect side: a path (one part) or HOST:HOSTPORT (two).
	switch {
	case len(parts) >= 2 && isPath(parts[len(parts)-1]):
		f.ConnectNet, f.Connect = "unix", parts[len(parts)-1]
		parts = parts[:len(parts)-1]
	case len(parts) >= 3:
		host, port := parts[len(parts)-2], parts[len(parts)-1]
		n, err := strconv.Atoi(port)
		if err != nil || n < 0 || n > 65535 {
			return bad(fmt.Sprintf("bad port %q", port))
		}
		if host == "" || n == 0 {
			return bad("no host or port to connect to")
		}
		f.ConnectNet, f.Connect = "tcp", net.JoinHostPort(host, port)
		parts = parts[:len(parts)-2]
	default:
		return bad("want [BIND:]PORT:HOST:HOSTPORT (either side may be a /socket/path)")
	}
	// The listen side: a path, PORT or BIND:PORT.
	switch {
	case len(parts) == 1 && isPath(parts[0]):
		f.ListenNet, f.Listen = "unix", parts[0]
		return f, nil
	case len(parts) == 1 || len(parts) == 2:
	default:
		return bad("want [BIND:]PORT:HOST:HOSTPORT (either side may be a /socket/path)")
	}
	bind, port := "127.0.0.1", parts[len(parts)-1]
	if len(parts) == 2 {
		bind = parts[0]
		if bind == "*" {
			bind = ""
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return bad(fmt.Sprintf("bad port %q", port))
	}
	f.ListenNet, f.Listen = "tcp", net.JoinHostPort(bind, port)
	return f, nil
}

// parseDynamicForward parses -D [BIND:]PORT (127.0.0.1 without BIND).
func parseDynamicForward(spec string) (string, error) {
	bind, port := "127.0.0.1", spec
	if i := strings.LastIndex(spec, ":"); i >= 0 {
		bind, port = strings.Trim(spec[:i], "[]"), spec[i+1:]
		if bind == "*" {
			bind = ""
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("-D %s: want [BIND:]PORT", spec)
	}
	return net.JoinHostPort(bind, port), nil
}

// portFlags are -L, -R and -D, which forward, run and shell share.
type portFlags struct {
	local, remote, dynamic []string
}

// add registers the flags on c.
func (f *portFlags) add(c *cobra.Command) {
	c.Flags().StringArrayVarP(&f.local, "local", "L", nil, "[BIND:]PORT:HOST:HOSTPORT: listen on PORT here, connect to HOST:HOSTPORT from the target; either side may be a /socket/path (repeatable)")
	c.Flags().StringArrayVarP(&f.remote, "remote", "R", nil, "[BIND:]PORT:HOST:HOSTPORT: listen on PORT on the target, connect to HOST:HOSTPORT from here; either side may be a /socket/path (repeatable)")
	c.Flags().StringArrayVarP(&f.dynamic, "dynamic", "D", nil, "[BIND:]PORT: serve a SOCKS5 proxy on PORT here whose connections the target makes (repeatable)")
}

// portSpecs are parsed portFlags.
type portSpecs struct {
	local, remote []portForward
	socks         []string // listen addresses
}

func (p portSpecs) empty() bool { return len(p.local)+len(p.remote)+len(p.socks) == 0 }

// parse checks every flag's syntax; errors are usage errors of cmd.
func (f *portFlags) parse(cmd string) (portSpecs, error) {
	var p portSpecs
	for _, spec := range f.local {
		pf, err := parsePortForward("-L", spec)
		if err != nil {
			return p, &usageError{cmd: cmd, err: err}
		}
		p.local = append(p.local, pf)
	}
	for _, spec := range f.remote {
		pf, err := parsePortForward("-R", spec)
		if err != nil {
			return p, &usageError{cmd: cmd, err: err}
		}
		p.remote = append(p.remote, pf)
	}
	for _, spec := range f.dynamic {
		a, err := parseDynamicForward(spec)
		if err != nil {
			return p, &usageError{cmd: cmd, err: err}
		}
		p.socks = append(p.socks, a)
	}
	return p, nil
}

// startPorts opens every listener of p (here for -L and -D, on s's target
// for -R) and serves them until the returned stop is called, which closes
// the listeners and ends their connections. announce prints every
// listening address on stderr; otherwise only those whose port was 0 are
// printed (the user cannot know them), as ssh prints an allocated -R port.
// A listener that cannot be opened is an error (status 1), and none is
// left open.
func (g *globals) startPorts(ctx stdctx.Context, s *session, p portSpecs, announce bool) (stop func(), err error) {
	ctx, cancel := stdctx.WithCancel(ctx)
	var lns []net.Listener
	var serves []func(net.Listener, *sync.WaitGroup)
	defer func() {
		if err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			cancel()
		}
	}()
	say := func(asked string, format string, args ...any) {
		if _, port, _ := net.SplitHostPort(asked); announce || port == "0" {
			fmt.Fprintf(g.stderr, "spindle: "+format+"\n", args...)
		}
	}
	for _, f := range p.local {
		ln, err := listenHere(f.ListenNet, f.Listen)
		if err != nil {
			return nil, &exitError{code: 1, err: fmt.Errorf("-L: %w", err)}
		}
		lns = append(lns, ln)
		say(f.Listen, "forwarding %s → %s → %s", ln.Addr(), s.cx.Name(), f.Connect)
		serves = append(serves, func(ln net.Listener, wg *sync.WaitGroup) { g.serveForward(ctx, s, ln, f.ConnectNet, f.Connect, wg) })
	}
	for _, a := range p.socks {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return nil, &exitError{code: 1, err: fmt.Errorf("-D: %w", err)}
		}
		lns = append(lns, ln)
		say(a, "SOCKS5 proxy on %s → %s", ln.Addr(), s.cx.Name())
		serves = append(serves, func(ln net.Listener, wg *sync.WaitGroup) { g.serveSOCKS(ctx, s, ln, wg) })
	}
	for _, f := range p.remote {
		ln, err := tunnel.Listen(ctx, s.cx, f.ListenNet, f.Listen)
		if err != nil {
			return nil, &exitError{code: 1, err: fmt.Errorf("-R: %w", err)}
		}
		lns = append(lns, ln)
		say(f.Listen, "forwarding %s on %s → here → %s", ln.Addr(), s.cx.Name(), f.Connect)
		serves = append(serves, func(ln net.Listener, wg *sync.WaitGroup) {
			g.serveRemoteForward(ctx, s, ln, f.ConnectNet, f.Connect, wg)
		})
	}
	var wg sync.WaitGroup
	for i, ln := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			serves[i](ln, &wg)
		}()
	}
	return func() {
		for _, ln := range lns {
			ln.Close()
		}
		cancel()
		wg.Wait()
	}, nil
}

func newForwardCmd(g *globals) *cobra.Command {
	var ports portFlags
	c := &cobra.Command{
		Use:               "forward [-L [BIND:]PORT:HOST:HOSTPORT]... [-R [BIND:]PORT:HOST:HOSTPORT]... [-D [BIND:]PORT]... TARGET",
		ValidArgsFunction: g.completeTarget,
		Short:             "Forward TCP ports between here and the target (like ssh -L, -R and -D, through any chain)",
		Long: `Listen on each PORT here (on 127.0.0.1 unless BIND says otherwise; * or an
empty BIND means every address) and carry every connection to HOST:HOSTPORT
as the target connects to it: from the target's host, or from inside the
container a chain ends in, so that localhost there is the container's.
-D [BIND:]PORT serves a SOCKS5 proxy there instead (like ssh -D; CONNECT
only, no authentication), whose every connection the target makes,
resolving host names itself: curl --socks5-hostname 127.0.0.1:PORT reaches
what the target reaches.
-R [BIND:]PORT:HOST:HOSTPORT is the other way round (like ssh -R): the
target's agent listens on PORT (on its 127.0.0.1 unless BIND says
otherwise), and every connection made to it there is carried here and
connected to HOST:HOSTPORT from this machine: a target with no way out
reaches a package mirror or a web server on your side.
In -L and -R, either side may be a Unix socket path instead, as in ssh:
-L /tmp/docker.sock:/var/run/docker.sock, -L 5432:/run/postgresql/.s.PGSQL.5432.
A socket that Spindle creates (here, or on the target) is mode 0600,
serves only its user (and root), and is removed at the end; a stale one
left by a killed run is replaced.
PORT 0 picks a free port; the addresses are printed on standard error.
It runs until interrupted (exit 0) or until the target is lost (exit 255).
A connection that cannot be made is reported and closed; the others
go on. When the last hop is SSH, ssh_config's LocalForward, RemoteForward
and DynamicForward for it are applied too, as ssh applies them (so
'spindle forward db-tunnel' needs no flags); Unix-socket forwards are
skipped with a warning. 'spindle run' and 'spindle shell' take the same
flags, for as long as their command runs.`,
		Example: `  spindle forward -L 5432:localhost:5432 -J bastion web1,docker:db
  spindle forward -L 8080:intranet.example:80 -L 0:10.0.0.7:22 bastion
  spindle forward -D 1080 bastion,web1
  spindle forward -R 3128:localhost:3128 -J bastion web1
  spindle forward -L /tmp/web1-docker.sock:/var/run/docker.sock web1,sudo`,
		Args: targetArgs(false),
		RunE: func(c *cobra.Command, args []string) error {
			p, err := ports.parse(c.CommandPath())
			if err != nil {
				return err
			}
			ctx, _, stop := SignalContext(c.Context())
			defer stop()
			s, err := g.connect(ctx, args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			if err := g.addConfigForwards(ctx, s, &p); err != nil {
				return err
			}
			if p.empty() {
				return &usageError{cmd: c.CommandPath(), err: errors.New("forward needs at least one -L or -R [BIND:]PORT:HOST:HOSTPORT, or -D [BIND:]PORT (or LocalForward, RemoteForward, DynamicForward in ssh_config for an SSH target)")}
			}
			stopPorts, err := g.startPorts(ctx, s, p, true)
			if err != nil {
				return err
			}
			select {
			case <-ctx.Done(): // interrupted: a normal end
			case <-s.cx.Done():
			}
			stopPorts()
			if ctx.Err() == nil {
				return &connectError{err: s.cx.Err()}
			}
			return nil
		},
	}
	ports.add(c)
	return c
}

// stderrMu keeps the connections' reports whole.
var stderrMu sync.Mutex

// forwardReport prints one line about a connection on stderr.
func (g *globals) forwardReport(format string, args ...any) {
	stderrMu.Lock()
	defer stderrMu.Unlock()
	fmt.Fprintf(g.stderr, "spindle: "+format+"\n", args...)
}

// maxForwardConns bounds the connections one forward serves at once.
// Past it, new ones wait in the listening socket's backlog (here for -L
// and -D, on the target for -R) until one ends: a target's agent that
// answered every tunnel.Accept at once (a hostile one, or a flood on the
// target's port) cannot make this side dial without end.
var maxForwardConns = 512

// acceptEach accepts on ln until it is closed and runs serve for each
// connection in a goroutine counted by wg, maxForwardConns at most at
// once; the connection is closed when serve returns or when ctx ends.
func acceptEach(ctx stdctx.Context, ln net.Listener, wg *sync.WaitGroup, serve func(net.Conn)) {
	slots := make(chan struct{}, maxForwardConns)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer conn.Close()
			stop := stdctx.AfterFunc(ctx, func() { conn.Close() })
			defer stop()
			serve(conn)
		}()
	}
}

// serveForward accepts on ln until it is closed, and tunnels each
// connection to remote through s's target.
func (g *globals) serveForward(ctx stdctx.Context, s *session, ln net.Listener, network, remote string, wg *sync.WaitGroup) {
	acceptEach(ctx, ln, wg, func(conn net.Conn) {
		// Early: what the client sends first goes with the connect
		// request instead of a round trip after it.
		rc, err := tunnel.DialEarly(ctx, s.cx, network, remote)
		if err != nil {
			g.forwardReport("forward %s → %s: %v", ln.Addr(), remote, err)
			return
		}
		defer rc.Close()
		// Ending the run ends the tunnel too.
		stop := stdctx.AfterFunc(ctx, func() { rc.Close() })
		defer stop()
		tunnel.Splice(conn, rc)
		if err := rc.Connected(); err != nil && ctx.Err() == nil {
			g.forwardReport("forward %s → %s: %v", ln.Addr(), remote, err)
		}
	})
}

// serveRemoteForward accepts on ln (a listener on the target) until it is
// closed or the target is lost, and connects each connection to addr from
// here.
func (g *globals) serveRemoteForward(ctx stdctx.Context, s *session, ln net.Listener, network, addr string, wg *sync.WaitGroup) {
	acceptEach(ctx, ln, wg, func(conn net.Conn) {
		var d net.Dialer
		lc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			g.forwardReport("forward %s on %s → %s: %v", ln.Addr(), s.cx.Name(), addr, err)
			return
		}
		defer lc.Close()
		tunnel.Splice(conn, lc)
	})
}

// addConfigForwards adds ssh_config's LocalForward, RemoteForward and
// DynamicForward to p when the last hop is SSH, as ssh applies them to a
// connection to that host; Unix-socket forwards are skipped with a
// warning.
func (g *globals) addConfigForwards(ctx stdctx.Context, s *session, p *portSpecs) error {
	so, ok := s.last.(ssh.Options)
	if !ok {
		return nil
	}
	cf, err := so.ConfigForwards(ctx, s.log)
	if err != nil {
		return &connectError{err: fmt.Errorf("%s: ssh_config forwards: %w", s.cx.Name(), err)}
	}
	for _, sk := range cf.Skipped {
		fmt.Fprintf(g.stderr, "spindle: ssh_config's %s: Unix-socket forwarding is not supported; skipped\n", sk)
	}
	bad := func(err error) error {
		return &exitError{code: 1, err: fmt.Errorf("ssh_config for %s: %w", s.cx.Name(), err)}
	}
	for _, spec := range cf.Local {
		f, err := parsePortForward("LocalForward", spec)
		if err != nil {
			return bad(err)
		}
		p.local = append(p.local, f)
	}
	for _, spec := range cf.Remote {
		f, err := parsePortForward("RemoteForward", spec)
		if err != nil {
			return bad(err)
		}
		p.remote = append(p.remote, f)
	}
	for _, spec := range cf.Dynamic {
		a, err := parseDynamicForward(spec)
		if err != nil {
			return bad(err)
		}
		p.socks = append(p.socks, a)
	}
	return nil
}

// listenHere listens on this machine: TCP, or a Unix socket only this
// user may use (as ssh's are).
func listenHere(network, addr string) (net.Listener, error) {
	if network == "unix" {
		return tunnel.ListenUnixPrivate(addr)
	}
	return net.Listen(network, addr)
}
