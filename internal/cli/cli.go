// Package cli is the spindle command (cmd/spindle is Execute): its cobra
// commands, flags and output: run (on one target or many at once), shell,
// cp, forward, ping, info, and daemon, which serves --persist through
// package daemon. Targets are parsed and opened through package target,
// configured by the connection flags (ConnectFlags, which other commands
// that connect like the CLI reuse).
//
//	spindle run local -- uname -a
//	spindle shell local
//	spindle ping -c 10 local
//	spindle info --json local
package cli

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spindle-rpc/spindle/daemon"
	slog "github.com/spindle-rpc/spindle/services/log"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/target"
	"github.com/spindle-rpc/spindle/version"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Exit statuses of the CLI itself (a remote command's own status is passed
// through by run and shell).
const (
	exitOK         = 0
	exitFailure    = 1   // any other failure
	exitUsage      = 2   // bad flags or arguments
	exitCannotExec = 126 // the remote command exists but cannot run
	exitNotFound   = 127 // the remote command does not exist
	exitSignalBase = 128 // 128+N: killed by signal N
	exitConnect    = 255 // cannot connect / disconnected, like ssh
)

// globals are the root command's persistent flags.
type globals struct {
	verbose int
	timeout time.Duration
	via     string // -J: hops before every TARGET
	conn    connectOptions

	stdin          io.Reader
	stdout, stderr io.Writer
	// logOut, if set, takes the logs instead of stderr: the daemon's
	// connections outlive the command whose stderr they began with.
	logOut io.Writer
	// logAlso, if set, gets the logs too (the daemon: its client's -v).
	logAlso zapcore.Core
	// persist is --persist (run through the daemon; 0: not).
	persist time.Duration
	// rawLogs is --raw-logs: agents' log records as they sent them.
	rawLogs bool
}

// Execute runs the CLI with args and returns the process's exit status.
func Execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	_, g.conn.interactive = ttyFd(stdin)
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return g.report(root.Execute(), stderr)
}

// report prints what the user should read about err on stderr and
// returns the exit status it means.
func (g *globals) report(err error, stderr io.Writer) int {
	code := exitCode(err)
	if err != nil && !errors.Is(err, errSilent) {
		var ee *exitError
		if !errors.As(err, &ee) || ee.err != nil {
			fmt.Fprintf(stderr, "spindle: %v\n", err)
		}
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", ue.cmd)
		}
		if hint := g.hint(err); hint != "" {
			fmt.Fprintf(stderr, "spindle: hint: %s\n", hint)
		}
	}
	return code
}

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "spindle",
		Short: "Run code on remote machines fast, through one connection and a small agent",
		Long: `spindle starts a small agent at the far end of a connection and runs
commands, shells, copies and port forwards through it.

TARGET is a comma-separated chain of hops, from here outward; every hop
after the first is started by the previous hop's agent:

  local                         an agent on this machine
  ssh:[user@]host[:port]        an SSH hop; IPv6 as ssh:[::1]:22
  host, user@host:port          the same: a bare host is an SSH hop,
                                resolved through ~/.ssh/config (or -F
                                FILE) like ssh does
  sudo[:USER], su:USER,         another user on the previous hop (alone
  doas[:USER]                   or first: on this machine); default root
  docker:[USER@]CONTAINER       a container on the previous hop, through
  podman:[USER@]CONTAINER       the tool's exec; setns enters a docker
  lxc:[UID@]CONTAINER           container's (or a PID's) namespaces
  lxd:[USER@]INSTANCE           itself, as root
  machinectl:[USER@]MACHINE
  kubectl:[NAMESPACE/]POD[/CONTAINER]
  setns:[USER@]CONTAINER|PID

  e.g. bastion,web1,docker:app1,sudo:postgres  (or -J bastion,web1 with
  TARGET docker:app1,sudo:postgres). An SSH hop dialled by an agent signs
  with this machine's keys and checks this machine's known_hosts: no
  private key leaves it.

SSH hops use the -F, -i, -o, --host-key-policy and --password-env flags;
a password or key passphrase that is needed is asked for on the terminal
(never echoed) when standard input is one. Connection, authentication and
host key failures exit with 255, like ssh.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		Version:           version.Version,
		CompletionOptions: cobra.CompletionOptions{},
	}
	root.SetVersionTemplate("spindle {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{cmd: c.CommandPath(), err: err}
	})
	pf := root.PersistentFlags()
	pf.CountVarP(&g.verbose, "verbose", "v", "more logging on stderr (-v info, -vv debug, -vvv more); agents' logs follow the same level")
	pf.BoolVar(&g.rawLogs, "raw-logs", false, "show the agents' log records (-v) as they sent them, control characters included, instead of escaped")
	pf.DurationVar(&g.timeout, "timeout", 30*time.Second, "time limit for connecting to the target (0 = none)")
	pf.StringVarP(&g.via, "via", "J", "", "reach TARGET through these hops first, comma-separated (like ssh -J, but each hop runs an agent that starts the next: -J bastion,web1 docker:app1)")
	g.conn.addFlags(pf)

	root.AddCommand(newRunCmd(g), newShellCmd(g), newPingCmd(g), newInfoCmd(g), newVersionCmd(g))
	root.AddCommand(newCpCmd(g), newForwardCmd(g), newDaemonCmd(g), newAnsibleCmd(g))
	return root
}

// hint suggests the flag that avoids err, for the failures whose fix is a
// CLI flag the library's message cannot name.
func (g *globals) hint(err error) string {
	var ce *spindle.Error
	var conn *connectError
	if errors.Is(err, spindle.ErrTimeout) && errors.As(err, &conn) && g.timeout > 0 {
		return fmt.Sprintf("the whole connect (SSH login, the login shell's start-up files, the agent's start) must finish within --timeout %v: give a slow host more", g.timeout)
	}
	if !errors.Is(err, spindle.ErrAuth) || !errors.As(err, &ce) {
		return ""
	}
	hops := strings.Split(ce.Chain, " → ")
	kind, _, _ := strings.Cut(hops[len(hops)-1], ":")
	b := g.conn.become
	if (kind == "sudo" || kind == "su" || kind == "doas") && !b.ask && b.passwordEnv == "" {
		return fmt.Sprintf("%s asked for a password: give it with -K (asked on the terminal) or --become-password-env VAR", kind)
	}
	return ""
}

// usageError is a bad flag or argument: exit status 2 and a hint.
type usageError struct {
	cmd string
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// targetArgs is an Args validator: one TARGET, plus whatever follows "--"
// when dash is true.
func targetArgs(dash bool) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		n := len(args)
		if at := c.ArgsLenAtDash(); dash && at >= 0 {
			n = at
		}
		if n != 1 {
			return &usageError{cmd: c.CommandPath(), err: fmt.Errorf("%s needs exactly one TARGET, got %d arguments", c.Name(), n)}
		}
		return nil
	}
}

// exitError carries an exit status; err, if set, is printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// errSilent ends the program with exit status 1 and no message (the
// message was already printed).
var errSilent = errors.New("silent failure")

// connectError marks a failure to reach the target.
type connectError struct{ err error }

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// exitCode maps an error from a command to the process's exit status.
func exitCode(err error) int {
	var ee *exitError
	var ue *usageError
	var ce *connectError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ce),
		errors.Is(err, spindle.ErrDisconnected),
		errors.Is(err, spindle.ErrAuth),
		errors.Is(err, spindle.ErrHostKey):
		return exitConnect
	case errors.Is(err, target.ErrBadTarget):
		return exitUsage
	case errors.Is(err, spindle.ErrNotFound):
		return exitNotFound
	case errors.Is(err, spindle.ErrPermission):
		return exitCannotExec
	}
	return exitFailure
}

// logger builds the CLI's zap logger: warnings and errors by default, -v
// info, -vv debug.
func (g *globals) logger() *zap.Logger {
	out := g.stderr
	if g.logOut != nil {
		out = g.logOut
	}
	core := consoleCore(out, g.verbose)
	if g.logAlso != nil {
		core = zapcore.NewTee(core, g.logAlso)
	}
	return zap.New(core)
}

// controllerOptions are the options of the CLI's controllers, logging to
// log.
func (g *globals) controllerOptions(log *zap.Logger) spindle.Options {
	o := spindle.Options{Logger: log, Verbosity: g.verbose, AgentLogs: slog.ReceiveOptions{Raw: g.rawLogs}}
	o.Router.KeepaliveInterval, o.Router.KeepaliveCountMax, _ = g.conn.keepalive() // connectAll reports a bad value
	return o
}

// consoleCore writes logs for a person to w at the level of -v verbose.
func consoleCore(w io.Writer, verbose int) zapcore.Core {
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	return zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), slog.LevelFor(verbose))
}

// session is one connected target.
type session struct {
	ctl *spindle.Controller
	// shared: ctl is the daemon's, whose other contexts other sessions
	// use; closing the session closes only cx.
	shared bool
	kept   *daemon.Conn // the daemon's, when shared
	cx     *spindle.Context
	log    *zap.Logger
	// last is the connector of cx's last hop (connect), lasts those of
	// every target's (connectAll), in order.
	last  spindle.Connector
	lasts []spindle.Connector
	// hops are every target's connectors, in order (connectAll).
	hops [][]spindle.Connector

	fwdMu   sync.Mutex
	fwdSock map[bool]string // agentToForward's answers, by -A
}

// lastSSH is the last SSH hop of cx's chain (connect), whose ssh_config
// settings that concern the user's side (EscapeChar) apply, as ssh's do
// for the host it is given.
func (s *session) lastSSH() (ssh.Options, bool) {
	if len(s.hops) == 0 {
		return ssh.Options{}, false
	}
	for i := len(s.hops[0]) - 1; i >= 0; i-- {
		if so, ok := s.hops[0][i].(ssh.Options); ok {
			return so, true
		}
	}
	return ssh.Options{}, false
}

// abandonGrace bounds how long a command ended by a signal, or by the
// loss of its connection, waits for that connection to close: its agents get that long to exit once their link
// ends, and one that does not answer (stopped, or behind a wedged hop) is
// left to the end of its connection when this process exits (end of
// file on its stdin; SIGHUP and SIGCONT from the kernel for a stopped
// local agent, whose process group is then orphaned). With
// context.CancelGrace, it keeps Ctrl-C's exit within a second.
const abandonGrace = 300 * time.Millisecond

// closeAfter closes the session, within abandonGrace if sig says a
// signal ended the command, or if the connection was lost (its link
// declared dead: the agent may not be there to exit).
func (s *session) closeAfter(sig func() syscall.Signal) {
	lost := s.cx != nil && s.cx.Err() != nil
	closeWithin(sig() != 0 || lost, s.log, s.Close)
}

// closeWithin runs closeFn, a close of the command's connections, and
// waits for it: for abandonGrace at most if bounded.
func closeWithin(bounded bool, log *zap.Logger, closeFn func()) {
	if !bounded {
		closeFn()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		closeFn()
	}()
	t := time.NewTimer(abandonGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		log.Debug("connection abandoned: its agents did not exit in time", zap.Duration("grace", abandonGrace))
	}
}

func (s *session) Close() {
	if s.shared {
		s.cx.Close() //nolint:errcheck // dead already, or as good as
		return
	}
	s.ctl.Close()
	s.log.Sync() //nolint:errcheck // stderr cannot always be synced
}

// connect parses target and connects to it within --timeout.
func (g *globals) connect(ctx stdctx.Context, target string) (*session, error) {
	s, cxs, err := g.connectAll(ctx, target)
	if err != nil {
		return nil, err
	}
	s.cx, s.last = cxs[0], s.lasts[0]
	return s, nil
}

// connectAll connects to every target through one controller, within
// --timeout, and returns their contexts in order. Chains that begin with
// the same hops share them: copying from bastion,web1 to bastion,web2
// dials the bastion once (and asks for its password once).
func (g *globals) connectAll(ctx stdctx.Context, targets ...string) (*session, []*spindle.Context, error) {
	chains, err := g.chains(targets)
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := g.conn.keepalive(); err != nil {
		return nil, nil, &usageError{cmd: "spindle", err: err}
	}
	log := g.logger()
	ctl := spindle.NewController(g.controllerOptions(log))
	cctx := ctx
	if g.timeout > 0 {
		var cancel stdctx.CancelFunc
		cctx, cancel = stdctx.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	r := target.NewRoutes(ctl)
	var cxs []*spindle.Context
	var lasts []spindle.Connector
	var hops [][]spindle.Connector
	for _, c := range chains {
		lasts = append(lasts, c.last())
		hops = append(hops, c.connectors())
		cx, err := r.Open(cctx, c.steps)
		if err != nil {
			ctl.Close()
			return nil, nil, &connectError{err: err}
		}
		cxs = append(cxs, cx)
	}
	return &session{ctl: ctl, log: log, lasts: lasts, hops: hops}, cxs, nil
}

// targetChain is a TARGET's steps (-J's first).
type targetChain struct {
	steps []target.Step
}

// connectors are the chain's connectors, in order.
func (c targetChain) connectors() []spindle.Connector {
	cs := make([]spindle.Connector, len(c.steps))
	for i, s := range c.steps {
		cs[i] = s.Connector
	}
	return cs
}

// last is the connector of the chain's last hop.
func (c targetChain) last() spindle.Connector { return c.steps[len(c.steps)-1].Connector }

// chains parses targets into their chains of connectors.
func (g *globals) chains(targets []string) ([]targetChain, error) {
	chains := make([]targetChain, len(targets))
	for i, tgt := range targets {
		if g.via != "" {
			tgt = g.via + "," + tgt
		}
		t, err := target.Parse(tgt)
		if err != nil {
			return nil, err
		}
		o, err := g.conn.targetOptions(t)
		if err != nil {
			return nil, err
		}
		if chains[i].steps, err = t.Steps(o); err != nil {
			return nil, err
		}
	}
	return chains, nil
}

// SignalContext is cancelled by SIGINT, SIGTERM or SIGHUP; sig reports which
// one arrived (0 if none).
func SignalContext(parent stdctx.Context) (ctx stdctx.Context, sig func() syscall.Signal, stop func()) {
	ctx, cancel := stdctx.WithCancel(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	var got atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-ch:
			got.Store(int32(s.(syscall.Signal)))
			cancel()
		case <-ctx.Done():
		}
	}()
	stop = func() {
		signal.Stop(ch)
		cancel()
		<-done
	}
	sig = func() syscall.Signal { return syscall.Signal(got.Load()) }
	return ctx, sig, stop
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintf(g.stdout, "spindle %s\n", version.Version)
			return nil
		},
	}
}
