package main

import (
	"bytes"
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/internal/daemonproto"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
	"github.com/spindle-rpc/spindle/services/tunnel"
	"github.com/spindle-rpc/spindle/version"
	"go.uber.org/zap"
)

// The daemon keeps the connections of `spindle run/shell/cp --persist` open
// between commands, like OpenSSH's ControlPersist: the first command
// starts it (in the background, with the command's environment), and
// every later one with the same environment and connection flags runs on
// the connection and agents already there, for the price of one call.
// It exits once no command has run for the persist time.

// daemonYamux is the yamux configuration of a client's session: a local
// socket, so no keepalive (a client that dies closes it).
func daemonYamux() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.EnableKeepAlive = false
	cfg.LogOutput = io.Discard
	cfg.StreamOpenTimeout = 0
	return cfg
}

// maxDaemonLog is the size past which a daemon starting on a log file
// moves it aside (to FILE.1, replacing the one before) and starts anew,
// so that a daemon restarted day after day keeps at most two.
const maxDaemonLog = 1 << 20

// openDaemonLog opens logFile for appending, moving it aside first when it
// has grown past maxDaemonLog.
func openDaemonLog(logFile string) (*os.File, error) {
	if fi, err := os.Stat(logFile); err == nil && fi.Mode().IsRegular() && fi.Size() > maxDaemonLog {
		if err := os.Rename(logFile, logFile+".1"); err != nil {
			return nil, fmt.Errorf("rotating the daemon log: %w", err)
		}
	}
	return os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
}

func newDaemonCmd(g *globals) *cobra.Command {
	var socket, logFile string
	var idle time.Duration
	var readyFd int
	var stop bool
	c := &cobra.Command{
		Use:   "daemon [--stop]",
		Short: "Keep connections open between commands (started by run, shell and cp --persist)",
		Long: `Serve the 'spindle run', 'shell' and 'cp' commands given --persist,
keeping their connections and agents open between commands until none has
run for --idle. Those commands start it by themselves when it is not
running, on the socket of their environment; run it by hand only to watch
its logs (-v). --stop stops the daemon of this environment (closing every
connection it keeps) and waits until it has.`,
		Example: `  spindle daemon --stop
  spindle daemon -v --idle 1h        # in the foreground, logging`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if socket == "" {
				var err error
				if socket, err = daemonSocket(); err != nil {
					return err
				}
			}
			if stop {
				return stopDaemon(g, socket)
			}
			if logFile != "" {
				f, err := openDaemonLog(logFile)
				if err != nil {
					return err
				}
				defer func() {
					// An empty log (nothing went wrong) goes with the
					// daemon: one is made per environment.
					if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
						os.Remove(logFile)
					}
					f.Close()
				}()
				g.stderr = f
			}
			var ready *os.File
			if readyFd > 0 {
				ready = os.NewFile(uintptr(readyFd), "ready")
			}
			d := newDaemonServer(g.stderr, g.logger(), g.verbose, idle)
			return d.run(socket, ready)
		},
	}
	c.Flags().StringVar(&socket, "socket", "", "the Unix socket to serve (default: this environment's, as --persist finds it)")
	c.Flags().BoolVar(&stop, "stop", false, "stop the daemon serving the socket, and wait until it has")
	c.Flags().DurationVar(&idle, "idle", 10*time.Minute, "exit when no command has run for this long")
	c.Flags().StringVar(&logFile, "log", "", "append logs to this file instead of stderr")
	c.Flags().IntVar(&readyFd, "ready-fd", 0, "write \"ok\" (or why not) to this descriptor once serving")
	c.Flags().MarkHidden("ready-fd") //nolint:errcheck // it exists
	return c
}

// daemonServer runs clients' commands on connections it keeps by key.
type daemonServer struct {
	log     *zap.Logger
	logOut  io.Writer // where the kept connections log
	verbose int

	mu       sync.Mutex
	sessions map[string]*daemonSession
	groups   map[string]*daemonGroup
	active   int           // commands running
	idle     time.Duration // the latest client's persist time
	idleT    *time.Timer
	quit     chan struct{} // closed when the daemon should stop
	quitOnce sync.Once
	// ctx is the commands' parent: cancelled by a signal to the daemon,
	// which kills them; not when it stops for being idle.
	ctx    stdctx.Context
	cancel stdctx.CancelFunc
}

// daemonGroup is the kept connections made with one set of connection
// flags: one controller, whose routes every target's chain shares, so
// that web1 and web2 behind one bastion dial it once, whether they come
// in one command (run over many targets, cp between them) or in two.
type daemonGroup struct {
	ctl    *spindle.Controller
	routes *routes
	log    *zap.Logger
}

// daemonSession is one kept connection; mu is held while connecting, so
// that clients asking for the same one at once make one connection.
type daemonSession struct {
	mu sync.Mutex
	s  *session
}

func newDaemonServer(logOut io.Writer, log *zap.Logger, verbose int, idle time.Duration) *daemonServer {
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	return &daemonServer{log: log, logOut: logOut, verbose: verbose, idle: idle, sessions: map[string]*daemonSession{},
		groups: map[string]*daemonGroup{}, quit: make(chan struct{}), ctx: ctx, cancel: cancel}
}

func (d *daemonServer) stop() { d.quitOnce.Do(func() { close(d.quit) }) }

// run serves socket until idle or a signal; ready hears "ok" once the
// socket listens, or why it cannot ("busy" when another daemon serves it).
func (d *daemonServer) run(socket string, ready *os.File) error {
	say := func(s string) {
		if ready != nil {
			fmt.Fprintln(ready, s)
			ready.Close()
			ready = nil
		}
	}
	ln, err := tunnel.ListenUnixPrivate(socket)
	if err != nil {
		if c, derr := net.Dial("unix", socket); derr == nil {
			c.Close()
			say("busy")
			return nil
		}
		say(err.Error())
		return err
	}
	defer ln.Close()
	// The pid beside the socket: kill it to close every kept connection.
	pidFile := socket + ".pid"
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		say(err.Error())
		return err
	}
	defer os.Remove(pidFile)
	d.mu.Lock()
	d.idleT = time.AfterFunc(d.idle, d.expire)
	d.mu.Unlock()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	signal.Ignore(syscall.SIGHUP) // started by a terminal's command, it outlives it
	go func() {
		select {
		case <-sigs:
			d.cancel() // the commands running end too
			d.stop()
		case <-d.quit:
		}
		ln.Close()
	}()
	d.log.Info("daemon serving", zap.String("socket", socket), zap.Duration("idle", d.idle))
	say("ok")
	var wg sync.WaitGroup
	for {
		conn, err := ln.Accept()
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.serve(conn)
		}()
	}
	d.stop()
	wg.Wait()
	d.cancel()
	d.mu.Lock()
	for _, grp := range d.groups {
		grp.ctl.Close()
		grp.log.Sync() //nolint:errcheck // stderr cannot always be synced
	}
	d.mu.Unlock()
	d.log.Info("daemon stopped")
	return nil
}

// expire stops the daemon if no command runs.
func (d *daemonServer) expire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.active == 0 {
		d.stop()
	}
}

func (d *daemonServer) begin(persist time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.active++
	if persist > 0 {
		d.idle = persist
	}
	d.idleT.Stop()
}

func (d *daemonServer) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.active--
	if d.active == 0 {
		d.idleT.Reset(d.idle)
	}
}

// clientStreams are a client's four streams.
type clientStreams struct {
	control, stdin, stdout, stderr net.Conn
}

// acceptStreams accepts the client's four streams and sorts them by
// their role byte.
func acceptStreams(ys *yamux.Session) (*clientStreams, error) {
	var cs clientStreams
	slots := map[daemonproto.Role]*net.Conn{daemonproto.RoleControl: &cs.control, daemonproto.RoleStdin: &cs.stdin,
		daemonproto.RoleStdout: &cs.stdout, daemonproto.RoleStderr: &cs.stderr}
	for range slots {
		st, err := ys.Accept()
		if err != nil {
			return nil, err
		}
		var role [1]byte
		if _, err := io.ReadFull(st, role[:]); err != nil {
			return nil, err
		}
		slot, ok := slots[daemonproto.Role(role[0])]
		if !ok || *slot != nil {
			return nil, fmt.Errorf("unexpected stream role %q", role[0])
		}
		*slot = st
	}
	return &cs, nil
}

// clientHelloTimeout bounds the time from a client's connection to its
// request.
var clientHelloTimeout = 10 * time.Second

// serve runs one client's command.
func (d *daemonServer) serve(conn net.Conn) {
	defer conn.Close()
	ys, err := yamux.Server(conn, daemonYamux())
	if err != nil {
		return
	}
	defer ys.Close()
	// A client has a few seconds to say what it wants: one that connects
	// and says nothing would otherwise hold this goroutine, and the
	// daemon's exit, for ever.
	hello := time.AfterFunc(clientHelloTimeout, func() { ys.Close() })
	cs, err := acceptStreams(ys)
	if err != nil {
		d.log.Warn("daemon client refused", zap.Error(err))
		return
	}
	m, err := daemonproto.ReadMsg(cs.control)
	if !hello.Stop() || err != nil || m.Kind != daemonproto.KindRun {
		d.log.Warn("daemon client refused: no run request", zap.Error(err))
		return
	}
	d.begin(time.Duration(m.Run.PersistNS))
	defer d.end()
	ctx, cancel := stdctx.WithCancel(d.ctx)
	defer cancel()
	cl := &daemonClient{streams: cs, answers: make(chan *daemonproto.Msg, 1), cancel: cancel, gone: make(chan struct{})}
	go cl.readControl()
	code, text := d.runFor(ctx, m.Run, cl)
	cs.stdout.Close()
	cs.stderr.Close()
	cl.write(&daemonproto.Msg{Kind: daemonproto.KindExit, Code: code, Text: text}) //nolint:errcheck // the client may be gone
	// The client closes the session once it has the exit: closing it here
	// first could drop the frame.
	select {
	case <-cl.gone:
	case <-time.After(5 * time.Second):
	}
}

// daemonClient is the daemon's side of one client's control stream.
type daemonClient struct {
	streams *clientStreams
	wmu     sync.Mutex
	answers chan *daemonproto.Msg
	cancel  stdctx.CancelFunc
	signal  syscall.Signal // the client's Ctrl-C or kill, once
	closed  bool           // the client's user typed <escape>.
	resize  func(rows, cols uint16)
	sigMu   sync.Mutex
	gone    chan struct{} // closed when the client's control stream ends
}

// onResize sets what the client's size changes do (once the terminal
// command runs).
func (c *daemonClient) onResize(f func(rows, cols uint16)) {
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	c.resize = f
}

func (c *daemonClient) wasClosed() bool {
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	return c.closed
}

func (c *daemonClient) write(m *daemonproto.Msg) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return daemonproto.WriteMsg(c.streams.control, m)
}

// readControl handles the client's frames: answers go to whoever asked,
// a signal cancels the command. The client's going away cancels it too.
func (c *daemonClient) readControl() {
	defer close(c.gone)
	defer c.cancel()
	for {
		m, err := daemonproto.ReadMsg(c.streams.control)
		if err != nil {
			close(c.answers)
			return
		}
		switch m.Kind {
		case daemonproto.KindAnswer:
			select {
			case c.answers <- m:
			default: // nobody asked
			}
		case daemonproto.KindSignal:
			c.sigMu.Lock()
			if c.signal == 0 {
				c.signal = syscall.Signal(m.Signal)
			}
			c.sigMu.Unlock()
			c.cancel()
		case daemonproto.KindClose:
			c.sigMu.Lock()
			c.closed = true
			c.sigMu.Unlock()
			c.cancel()
		case daemonproto.KindResize:
			c.sigMu.Lock()
			resize := c.resize
			c.sigMu.Unlock()
			if resize != nil && m.Rows > 0 && m.Cols > 0 {
				resize(m.Rows, m.Cols)
			}
		}
	}
}

func (c *daemonClient) sig() syscall.Signal {
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	return c.signal
}

// ask puts a question to the client's user.
func (c *daemonClient) ask(ctx stdctx.Context, text string, echo bool) (string, error) {
	if err := c.write(&daemonproto.Msg{Kind: daemonproto.KindPrompt, Text: text, Echo: echo}); err != nil {
		return "", err
	}
	select {
	case m, ok := <-c.answers:
		if !ok {
			return "", errors.New("the client went away")
		}
		if m.Err != "" {
			return "", errors.New(m.Err)
		}
		return m.Text, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// sessionKey names a connection: the same target through the same flags.
func sessionKey(r *daemonproto.Run) string {
	return fmt.Sprintf("%q", []any{r.Via, r.Target, r.ConfigFile, r.Identities, r.Options, r.HostKeyPolicy,
		r.PasswordEnv, r.BecomePasswordEnv, r.AskBecomePass})
}

// groupKey names r's connection flags: sessionKey less the target, and
// less -J, whose hops the routes' names hold.
func groupKey(r *daemonproto.Run) string {
	rt := *r
	rt.Target, rt.Via = "", ""
	return sessionKey(&rt)
}

// group is the kept connections for r's flags, made with g's (the first
// request's) logger.
func (d *daemonServer) group(g *globals, r *daemonproto.Run) *daemonGroup {
	key := groupKey(r)
	d.mu.Lock()
	defer d.mu.Unlock()
	grp := d.groups[key]
	if grp == nil {
		log := g.logger()
		ctl := spindle.NewController(spindle.Options{Logger: log, Verbosity: g.verbose})
		grp = &daemonGroup{ctl: ctl, routes: newRoutes(ctl), log: log}
		grp.routes.retryFailed = true
		d.groups[key] = grp
	}
	return grp
}

// connect connects to target on r's group's controller, within
// --timeout, sharing the routes its chain begins with.
func (d *daemonServer) connect(ctx stdctx.Context, g *globals, r *daemonproto.Run, target string) (*session, error) {
	chains, err := g.chains([]string{target})
	if err != nil {
		return nil, err
	}
	grp := d.group(g, r)
	if g.timeout > 0 {
		var cancel stdctx.CancelFunc
		ctx, cancel = stdctx.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	hops := chains[0].hops
	cx, err := grp.routes.connect(ctx, hops, chains[0].names)
	if err != nil {
		return nil, &connectError{err: err}
	}
	return &session{ctl: grp.ctl, shared: true, cx: cx, log: grp.log, last: hops[len(hops)-1],
		lasts: []spindle.Connector{hops[len(hops)-1]}, hops: [][]spindle.Connector{hops}}, nil
}

// runFor runs r's command on its kept connection (made now if there is
// none, or if it died) and returns the CLI's exit status and what the CLI
// would have printed on stderr.
func (d *daemonServer) runFor(ctx stdctx.Context, r *daemonproto.Run, cl *daemonClient) (int, string) {
	if r.Version != version.Version {
		return exitConnect, fmt.Sprintf("spindle: the daemon is version %s, this spindle %s\n", version.Version, r.Version)
	}
	g := &globals{verbose: d.verbose, timeout: time.Duration(r.TimeoutNS), via: r.Via,
		stdin: cl.streams.stdin, stdout: cl.streams.stdout, stderr: cl.streams.stderr, logOut: d.logOut}
	g.conn = connectOptions{configFile: r.ConfigFile, identities: r.Identities, sshOpts: r.Options,
		hostKeyPolicy: r.HostKeyPolicy, passwordEnv: r.PasswordEnv, interactive: r.Interactive,
		become: becomeOptions{passwordEnv: r.BecomePasswordEnv, ask: r.AskBecomePass},
		prompt: func(p string) (string, error) { return cl.ask(ctx, p, false) },
		ask:    func(q string) (string, error) { return cl.ask(ctx, q, true) }}
	// The client's -v: what happens for its request (a connection made,
	// reused or lost, the connection's own logs meanwhile) goes to its
	// stderr too, until the request ends.
	rl := &requestLog{w: cl.streams.stderr}
	defer rl.end()
	if r.Verbose > 0 {
		g.logAlso = consoleCore(rl, r.Verbose)
	}
	err := d.runOn(ctx, g, r, cl, g.logger())
	var msg bytes.Buffer
	code := g.report(err, &msg)
	return code, msg.String()
}

// slot is the kept connection for r's flags and target.
func (d *daemonServer) slot(r *daemonproto.Run, target string) *daemonSession {
	rt := *r
	rt.Target = target
	key := sessionKey(&rt)
	d.mu.Lock()
	defer d.mu.Unlock()
	ds := d.sessions[key]
	if ds == nil {
		ds = &daemonSession{}
		d.sessions[key] = ds
	}
	return ds
}

func (d *daemonServer) runOn(ctx stdctx.Context, g *globals, r *daemonproto.Run, cl *daemonClient, log *zap.Logger) error {
	if r.Copy != nil {
		return d.copyOn(ctx, g, r, cl, log)
	}
	ds := d.slot(r, r.Target)

	// A kept connection may have died since (the network, the agent
	// killed): a command that cannot start on it gets a new one, once.
	var s *session
	var p *exec.Process
	for attempt := 0; p == nil; attempt++ {
		var reused bool
		var err error
		s, reused, err = d.sessionFor(ctx, g, r, ds, r.Target, log)
		if err != nil {
			return err
		}
		p, err = exec.Start(ctx, s.cx, exec.Cmd{Argv: r.Argv, PTY: r.PTY, Term: r.Term, Rows: r.Rows, Cols: r.Cols})
		if err != nil {
			if !reused || attempt > 0 || !errors.Is(err, spindle.ErrDisconnected) {
				return commandExit(nil, err, cl.sig())
			}
			log.Info("daemon: kept connection lost", zap.String("target", r.Target), zap.Error(err))
			d.drop(ds, s)
		}
	}
	stopFwd, err := g.startForwards(ctx, s, &forwardFlags{agent: r.ForwardAgent}, portSpecs{})
	if err != nil {
		p.Close()
		return err
	}
	defer stopFwd()
	started := &daemonproto.Msg{Kind: daemonproto.KindStarted}
	var esc shellEscape
	if r.PTY {
		if esc, err = s.escapeChar(ctx, r.Escape); err != nil {
			p.Close()
			return err
		}
		started.Text, started.Escape = s.cx.Name(), "none"
		if esc.on {
			started.Escape = escapeName(esc.c)
		}
		cl.onResize(func(rows, cols uint16) {
			p.Resize(rows, cols) //nolint:errcheck // the shell may be gone
		})
	}
	cl.write(started) //nolint:errcheck // a client gone cancels ctx
	res, err := streamProcess(p, g.stdin, g.stdout, g.stderr)
	if cl.wasClosed() {
		return &exitError{code: exitConnect, err: fmt.Errorf("connection to %s closed (%s.)", s.cx.Name(), escapeName(esc.c))}
	}
	return commandExit(res, err, cl.sig())
}

// copyOn runs r's copy on the kept connections of its remote sides.
func (d *daemonServer) copyOn(ctx stdctx.Context, g *globals, r *daemonproto.Run, cl *daemonClient, rlog *zap.Logger) error {
	c := r.Copy
	o := &cpOptions{recursive: c.Recursive, preserve: c.Preserve, parallel: max(c.Parallel, 1)}
	src := copyEndpoint{Target: c.SrcTarget, Path: c.SrcPath}
	dst := copyEndpoint{Target: c.DstTarget, Path: c.DstPath}
	job, err := newCopyJob(g, o, src, dst, cl.sig)
	if err != nil {
		return err
	}
	var cxs [2]*spindle.Context
	log := rlog
	for i, e := range []copyEndpoint{src, dst} {
		if !e.remote() {
			continue
		}
		s, err := d.liveSession(ctx, g, r, d.slot(r, e.Target), e.Target, rlog)
		if err != nil {
			return err
		}
		cxs[i], log = s.cx, s.log
	}
	cl.write(&daemonproto.Msg{Kind: daemonproto.KindStarted}) //nolint:errcheck // a client gone cancels ctx
	var bar *copyProgress
	if c.Progress {
		bar = &copyProgress{w: g.stderr, desc: path.Base(src.Path), copies: 1}
	}
	return job.run(ctx, cxs[0], cxs[1], bar, log)
}

// liveSession is sessionFor, with a kept connection checked by a ping
// first (a copy has no single call to retry) and replaced if it died.
func (d *daemonServer) liveSession(ctx stdctx.Context, g *globals, r *daemonproto.Run, ds *daemonSession, target string, log *zap.Logger) (*session, error) {
	s, reused, err := d.sessionFor(ctx, g, r, ds, target, log)
	if err != nil || !reused {
		return s, err
	}
	if err := sys.Ping(ctx, s.cx); err != nil && errors.Is(err, spindle.ErrDisconnected) {
		log.Info("daemon: kept connection lost", zap.String("target", target), zap.Error(err))
		d.drop(ds, s)
		s, _, err = d.sessionFor(ctx, g, r, ds, target, log)
		return s, err
	}
	return s, nil
}

// sessionFor returns ds's connection, made now with g's flags (r's) if
// there is none or it died; reused says it was there.
func (d *daemonServer) sessionFor(ctx stdctx.Context, g *globals, r *daemonproto.Run, ds *daemonSession, target string, log *zap.Logger) (s *session, reused bool, err error) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.s != nil {
		select {
		case <-ds.s.cx.Done():
			log.Info("daemon: kept connection lost", zap.String("target", target), zap.Error(ds.s.cx.Err()))
			ds.s.Close()
			ds.s = nil
		default:
			log.Info("daemon: reusing the connection", zap.String("target", target))
			return ds.s, true, nil
		}
	}
	if ds.s, err = d.connect(ctx, g, r, target); err != nil {
		return nil, false, err
	}
	log.Info("daemon: connected", zap.String("target", target))
	return ds.s, false, nil
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

// drop closes s, ds's connection unless another command replaced it.
func (d *daemonServer) drop(ds *daemonSession, s *session) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.s == s {
		ds.s = nil
	}
	s.Close()
}

// stopDaemon stops the daemon on socket through its pid file, and waits
// (10 s at most) until its socket is gone.
func stopDaemon(g *globals, socket string) error {
	b, err := os.ReadFile(socket + ".pid")
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(g.stderr, "spindle: no daemon runs for this environment")
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("%s.pid: no pid in %q", socket, b)
	}
	// A pid file left by a daemon that was killed may name another
	// process by now: only one serving this socket is signalled.
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	c, derr := net.Dial("unix", socket)
	if derr == nil {
		c.Close()
	}
	if derr != nil || !bytes.Contains(cmdline, []byte(socket)) {
		os.Remove(socket + ".pid")
		fmt.Fprintln(g.stderr, "spindle: no daemon runs for this environment (a stale pid file was removed)")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop the daemon (pid %d): %w", pid, err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Stat(socket); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(g.stderr, "spindle: daemon %d stopped\n", pid)
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("the daemon (pid %d) still serves %s after 10 s", pid, socket)
		}
	}
}
