package cli

import (
	"bytes"
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/daemon"
	"github.com/spindle-rpc/spindle/daemon/proto"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/target"
	"github.com/spindle-rpc/spindle/version"
	"go.uber.org/zap"
)

// The daemon keeps the connections of `spindle run/shell/cp --persist` open
// between commands, like OpenSSH's ControlPersist: the first command
// starts it (in the background, with the command's environment), and
// every later one with the same environment and connection flags runs on
// the connection and agents already there, for the price of a ping (that
// they are still there) and one call.
// It exits once no command has run for the persist time. Package daemon
// serves the socket and keeps the connections; this file runs the CLI's
// commands there.

func newDaemonCmd(g *globals) *cobra.Command {
	var socket, logFile string
	var idle time.Duration
	var readyFd int
	var stop, ansibleEP bool
	c := &cobra.Command{
		Use:   "daemon [--stop]",
		Short: "Keep connections open between commands (started by run, shell and cp --persist)",
		Long: `Serve the 'spindle run', 'shell' and 'cp' commands given --persist,
keeping their connections and agents open between commands until none has
run for --idle. Those commands start it by themselves when it is not
running, on the socket of their environment; run it by hand only to watch
its logs (-v). --stop stops the daemon of this environment (closing every
connection it keeps) and waits until it has.

With --ansible it serves Spindle's Ansible connection plugin instead, on
the socket given by --socket (the plugin starts it by itself; see
'spindle ansible install'). A daemon started while another serves the
socket reports "ok" on --ready-fd and exits.`,
		Example: `  spindle daemon --stop
  spindle daemon -v --idle 1h        # in the foreground, logging`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if socket == "" {
				var err error
				if socket, err = daemon.Socket(PersistEnv); err != nil {
					return err
				}
			}
			if stop {
				return stopDaemon(g, socket)
			}
			if ansibleEP && !c.Flags().Changed("socket") {
				return &usageError{cmd: "spindle daemon", err: errors.New("--ansible needs --socket: the plugin names the socket it connects to")}
			}
			if logFile != "" {
				f, err := openDaemonLog(logFile)
				if err != nil {
					return err
				}
				defer f.Close()
				g.stderr = f
			}
			o := daemon.Options{Socket: socket, Idle: idle, Log: g.logger(), Signals: true}
			if readyFd > 0 {
				o.Ready = os.NewFile(uintptr(readyFd), "ready")
			}
			if ansibleEP {
				return serveAnsible(g, o)
			}
			h := &daemonHandler{reg: daemon.NewRegistry(), logOut: g.stderr, verbose: g.verbose}
			defer h.reg.Close()
			return daemon.NewServer(o).Serve(&daemon.CLIEndpoint{Handle: h.handle, Log: o.Log})
		},
	}
	c.Flags().StringVar(&socket, "socket", "", "the Unix socket to serve (default: this environment's, as --persist finds it)")
	c.Flags().BoolVar(&stop, "stop", false, "stop the daemon serving the socket, and wait until it has")
	c.Flags().DurationVar(&idle, "idle", 10*time.Minute, "exit when no command has run for this long")
	c.Flags().StringVar(&logFile, "log", "", "append logs to this file instead of stderr")
	c.Flags().IntVar(&readyFd, "ready-fd", 0, "write \"ok\" (or why not) to this descriptor once serving")
	c.Flags().BoolVar(&ansibleEP, "ansible", false, "serve the Ansible connection plugin's protocol (with --socket)")
	c.Flags().MarkHidden("ready-fd") //nolint:errcheck // it exists
	return c
}

// daemonHandler runs the CLI's requests on the connections of reg.
type daemonHandler struct {
	reg     *daemon.Registry
	logOut  io.Writer // where the kept connections log
	verbose int
}

// flagsKey names r's target and connection flags.
func flagsKey(r *proto.Run) string {
	return fmt.Sprintf("%q", []any{r.Via, r.Target, r.ConfigFile, r.Identities, r.Options, r.HostKeyPolicy,
		r.PasswordEnv, r.BecomePasswordEnv, r.AskBecomePass, r.RawLogs})
}

// groupKey names r's connection flags: flagsKey less the target, and
// less -J, whose hops the routes' names hold.
func groupKey(r *proto.Run) string {
	rt := *r
	rt.Target, rt.Via = "", ""
	return flagsKey(&rt)
}

// handle runs the request's command on its kept connection (made now if there is
// none, or if it died) and returns the CLI's exit status and what the CLI
// would have printed on stderr.
func (d *daemonHandler) handle(ctx stdctx.Context, cl *daemon.CLIRequest) (int, string) {
	r := cl.Run
	if r.Version != version.Version {
		return exitConnect, fmt.Sprintf("spindle: the daemon is version %s, this spindle %s\n", version.Version, r.Version)
	}
	g := &globals{verbose: d.verbose, rawLogs: r.RawLogs, timeout: time.Duration(r.TimeoutNS), via: r.Via,
		stdin: cl.Stdin, stdout: cl.Stdout, stderr: cl.Stderr, logOut: d.logOut}
	g.conn = connectOptions{configFile: r.ConfigFile, identities: r.Identities, sshOpts: r.Options,
		hostKeyPolicy: r.HostKeyPolicy, passwordEnv: r.PasswordEnv, interactive: r.Interactive,
		become: becomeOptions{passwordEnv: r.BecomePasswordEnv, ask: r.AskBecomePass},
		prompt: func(p string) (string, error) { return cl.Ask(ctx, p, false) },
		ask:    func(q string) (string, error) { return cl.Ask(ctx, q, true) }}
	// The client's -v: what happens for its request (a connection made,
	// reused or lost, the connection's own logs meanwhile) goes to its
	// stderr too, until the request ends.
	rl := &requestLog{w: cl.Stderr}
	defer rl.end()
	if r.Verbose > 0 {
		g.logAlso = consoleCore(rl, r.Verbose)
	}
	err := d.runOn(ctx, g, r, cl, g.logger())
	var msg bytes.Buffer
	code := g.report(err, &msg)
	return code, msg.String()
}

func (d *daemonHandler) runOn(ctx stdctx.Context, g *globals, r *proto.Run, cl *daemon.CLIRequest, log *zap.Logger) error {
	if r.Copy != nil {
		return d.copyOn(ctx, g, r, cl, log)
	}

	// A kept connection that answered session's ping may still die before
	// the command's circuit opens: a command that could not even be sent
	// gets a new one, once.
	var s *session
	var p *exec.Process
	for attempt := 0; p == nil; attempt++ {
		var reused bool
		var err error
		s, reused, err = d.session(ctx, g, r, r.Target, log)
		if err != nil {
			return err
		}
		p, err = exec.Start(ctx, s.cx, exec.Cmd{Argv: r.Argv, PTY: r.PTY, Term: r.Term, Rows: r.Rows, Cols: r.Cols})
		if err != nil {
			if !reused || attempt > 0 || !errors.Is(err, spindle.ErrDisconnected) {
				return commandExit(nil, err, cl.Signal())
			}
			log.Info("daemon: kept connection lost", zap.String("target", r.Target), zap.Error(err))
			d.reg.Drop(d.key(r, r.Target), s.kept)
		}
	}
	stopFwd, err := g.startForwards(ctx, s, &forwardFlags{agent: r.ForwardAgent}, portSpecs{})
	if err != nil {
		p.Close()
		return err
	}
	defer stopFwd()
	var name, escape string
	var esc shellEscape
	if r.PTY {
		if esc, err = s.escapeChar(ctx, r.Escape); err != nil {
			p.Close()
			return err
		}
		name, escape = s.cx.Name(), "none"
		if esc.on {
			escape = escapeName(esc.c)
		}
		cl.OnResize(func(rows, cols uint16) {
			p.Resize(rows, cols) //nolint:errcheck // the shell may be gone
		})
	}
	cl.Started(name, escape) //nolint:errcheck // a client gone cancels ctx
	res, err := streamProcess(p, g.stdin, g.stdout, g.stderr)
	if cl.Closed() {
		return &exitError{code: exitConnect, err: fmt.Errorf("connection to %s closed (%s.)", s.cx.Name(), escapeName(esc.c))}
	}
	return commandExit(res, err, cl.Signal())
}

// copyOn runs r's copy on the kept connections of its remote sides.
func (d *daemonHandler) copyOn(ctx stdctx.Context, g *globals, r *proto.Run, cl *daemon.CLIRequest, rlog *zap.Logger) error {
	c := r.Copy
	o := &cpOptions{recursive: c.Recursive, preserve: c.Preserve, parallel: max(c.Parallel, 1)}
	src := copyEndpoint{Target: c.SrcTarget, Path: c.SrcPath}
	dst := copyEndpoint{Target: c.DstTarget, Path: c.DstPath}
	job, err := newCopyJob(g, o, src, dst, cl.Signal)
	if err != nil {
		return err
	}
	var cxs [2]*spindle.Context
	log := rlog
	for i, e := range []copyEndpoint{src, dst} {
		if !e.remote() {
			continue
		}
		s, _, err := d.session(ctx, g, r, e.Target, rlog)
		if err != nil {
			return err
		}
		cxs[i], log = s.cx, s.log
	}
	cl.Started("", "") //nolint:errcheck // a client gone cancels ctx
	var bar *copyProgress
	if c.Progress {
		bar = &copyProgress{w: g.stderr, desc: path.Base(src.Path), copies: 1}
	}
	return job.run(ctx, cxs[0], cxs[1], bar, log)
}

// key names r's kept connection to target: the same target through the
// same flags.
func (d *daemonHandler) key(r *proto.Run, target string) daemon.Key {
	return daemon.Key{Settings: groupKey(r), Target: fmt.Sprintf("%q", []string{r.Via, target})}
}

// session returns the kept connection to target for r's flags, made now
// with g's flags (r's) if there is none or it died (the registry's
// GetLive: a kept one answered a ping); reused says it was there.
func (d *daemonHandler) session(ctx stdctx.Context, g *globals, r *proto.Run, tgt string, log *zap.Logger) (*session, bool, error) {
	c, reused, err := d.reg.GetLive(ctx, d.key(r, tgt), daemon.Dialer{
		NewGroup: func() (*spindle.Controller, *zap.Logger) {
			l := g.logger()
			return spindle.NewController(g.controllerOptions(l)), l
		},
		Open: func(ctx stdctx.Context, grp *daemon.Group) (*spindle.Context, []target.Step, error) {
			chains, err := g.chains([]string{tgt})
			if err != nil {
				return nil, nil, err
			}
			if g.timeout > 0 {
				var cancel stdctx.CancelFunc
				ctx, cancel = stdctx.WithTimeout(ctx, g.timeout)
				defer cancel()
			}
			cx, err := grp.Routes.Open(ctx, chains[0].steps)
			if err != nil {
				return nil, nil, &connectError{err: err}
			}
			return cx, chains[0].steps, nil
		},
		Log: log,
	})
	if err != nil {
		return nil, false, err
	}
	c0 := targetChain{steps: c.Steps}
	return &session{ctl: c.Group.Controller, shared: true, kept: c, cx: c.Context, log: c.Group.Log, last: c0.last(),
		lasts: []spindle.Connector{c0.last()}, hops: [][]spindle.Connector{c0.connectors()}}, reused, nil
}

// requestLog is a client's stderr for the logs of its request; what comes
// after the request ended (a kept connection logging later) is dropped.
type requestLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *requestLog) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return len(p), nil
	}
	return r.w.Write(p)
}

func (r *requestLog) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w = nil
}

// stopDaemon stops the daemon on socket, and says what it did.
func stopDaemon(g *globals, socket string) error {
	pid, err := daemon.Stop(socket)
	switch {
	case errors.Is(err, daemon.ErrNotRunning) && err != daemon.ErrNotRunning:
		fmt.Fprintln(g.stderr, "spindle: no daemon runs for this environment (a stale pid file was removed)")
	case errors.Is(err, daemon.ErrNotRunning):
		fmt.Fprintln(g.stderr, "spindle: no daemon runs for this environment")
	case err != nil:
		return err
	default:
		fmt.Fprintf(g.stderr, "spindle: daemon %d stopped\n", pid)
	}
	return nil
}
