package ansible

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/ansible/ansiballz"
	"github.com/spindle-rpc/spindle/ansible/wire"
	"github.com/spindle-rpc/spindle/daemon"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/hostvars"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/fs"
	"github.com/spindle-rpc/spindle/services/modules"
	"github.com/spindle-rpc/spindle/services/sys"
	"github.com/spindle-rpc/spindle/target"
	"github.com/spindle-rpc/spindle/version"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// ProtocolVersion is the protocol's "v".
const ProtocolVersion = 1

// RequestTimeout bounds the time from a client's connection to the end
// of its request's bytes, between two reads (at least nine tenths of it,
// timedReader): a client that connects and
// says nothing would otherwise hold a goroutine, and the daemon's exit,
// for ever. The command itself has no time limit.
var RequestTimeout = 10 * time.Second

// clientWatchDelay is how long a request runs before the daemon starts
// watching for its client's going away, which cancels it.
const clientWatchDelay = 20 * time.Millisecond

// Endpoint serves the Ansible connection plugin's protocol on a daemon's
// socket (daemon.Server.Serve).
type Endpoint struct {
	// Registry keeps the hosts' connections; shared with the daemon's
	// other endpoints if it has any.
	Registry *daemon.Registry
	// NewController makes the controller of connections with settings
	// not seen yet, and its logger.
	NewController func() (*spindle.Controller, *zap.Logger)
	// Log hears of requests refused, connections made, reused and lost,
	// and of SSH arguments ignored; nil: nothing is said. Passwords
	// never reach it.
	Log *zap.Logger
	// Version is the daemon's version, which a plugin stamped with
	// another refuses; default version.Version.
	Version string

	homes    homes
	zips     storedZips
	resolved resolvedHosts
}

func (e *Endpoint) log() *zap.Logger {
	if e.Log == nil {
		return zap.NewNop()
	}
	return e.Log
}

func (e *Endpoint) version() string {
	if e.Version == "" {
		return version.Version
	}
	return e.Version
}

// timedReader gives each Read at least nine tenths of RequestTimeout,
// moving the deadline only when a tenth of it has passed: most requests
// arrive in one read, and pay for one deadline.
type timedReader struct {
	c   net.Conn
	set time.Time // when the deadline was last moved
}

func (r *timedReader) Read(p []byte) (int, error) {
	if now := time.Now(); now.Sub(r.set) > RequestTimeout/10 {
		r.c.SetReadDeadline(now.Add(RequestTimeout)) //nolint:errcheck // a closed conn fails the read
		r.set = now
	}
	return r.c.Read(p)
}

// requestReaders are the buffers requests are read through, kept
// between requests: a fresh one costs page faults on every call, a
// tenth of a warm exec's time in the daemon.
var requestReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// readRequest reads conn's request through a pooled buffer (a request's
// header and a small stdin come in one read).
func readRequest(conn net.Conn) (*wire.Request, error) {
	br := requestReaders.Get().(*bufio.Reader)
	br.Reset(&timedReader{c: conn})
	req, err := wire.ReadRequest(br)
	br.Reset(nil)
	requestReaders.Put(br)
	return req, err
}

// ServeConn implements daemon.Endpoint: it reads one request, answers it
// and returns.
func (e *Endpoint) ServeConn(ctx context.Context, conn net.Conn, s *daemon.Server) {
	req, err := readRequest(conn)
	if err != nil {
		if errors.Is(err, wire.ErrBadRequest) {
			e.reply(conn, nil, nil, nil, &Error{Kind: KindBadRequest, Message: "spindle daemon: " + err.Error()})
		}
		e.log().Warn("ansible: client refused", zap.Error(err))
		return
	}
	conn.SetReadDeadline(time.Time{}) //nolint:errcheck // as above
	end := s.Begin(0)
	defer end()

	// The client reads the response, then closes: its closing first
	// means it is gone (the worker was killed), and the request ends.
	// Watched from clientWatchDelay on: a quicker request is answered
	// without a goroutine (and its wake-up) more.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watched := make(chan struct{})
	watch := time.AfterFunc(clientWatchDelay, func() {
		defer close(watched)
		var b [1]byte
		conn.Read(b[:]) //nolint:errcheck // any return means the client is done
		cancel()
	})
	defer func() {
		if watch.Stop() {
			return // never started
		}
		conn.SetReadDeadline(time.Now()) //nolint:errcheck // ends the watch
		<-watched
	}()

	head, out, errb, rerr := e.handle(ctx, req, s)
	e.reply(conn, head, out, errb, rerr)
}

// reply writes a response: head and the output, or the error.
func (e *Endpoint) reply(conn net.Conn, head map[string]any, out, errb []byte, rerr *Error) {
	if rerr != nil {
		head, out, errb = map[string]any{"error": rerr}, nil, nil
	}
	if head == nil {
		head = map[string]any{}
	}
	if _, isExec := head["rc"]; isExec || len(out) > 0 || len(errb) > 0 {
		head["stdout_len"], head["stderr_len"] = len(out), len(errb)
	}
	if err := wire.WriteResponse(conn, head, out, errb); err != nil {
		e.log().Info("ansible: the client went away before its response", zap.Error(err))
	}
}

// request are the fields an op may have.
type request struct {
	// HostJSON is the host object as sent; Host is it decoded, and
	// resolved its resolution (decodeHost), when the request has one.
	HostJSON json.RawMessage  `json:"host"`
	Host     *hostvars.Host   `json:"-"`
	resolved *resolvedHost    `json:"-"`
	Become   *hostvars.Become `json:"become"`
	Cmd      *string          `json:"cmd"`
	PTY      bool             `json:"pty"`
	Src      string           `json:"src"`
	Dst      string           `json:"dst"`
	// ModuleRunner (absent: true) lets a pipelined module run in a fork
	// of the agent's warm Python runner.
	ModuleRunner *bool `json:"module_runner"`
}

func (e *Endpoint) handle(ctx context.Context, req *wire.Request, s *daemon.Server) (map[string]any, []byte, []byte, *Error) {
	if req.V != ProtocolVersion {
		return nil, nil, nil, &Error{Kind: KindVersion, Message: fmt.Sprintf(
			"spindle daemon %s speaks protocol version %d, the plugin %d: reinstall the plugin with this spindle (spindle ansible install)",
			e.version(), ProtocolVersion, req.V)}
	}
	if req.Spindle != "" && req.Spindle != "dev" && req.Spindle != e.version() {
		return nil, nil, nil, &Error{Kind: KindVersion, Message: fmt.Sprintf(
			"the spindle daemon is version %s, the plugin %s: the plugin restarts the daemon; if this persists, reinstall the plugin (spindle ansible install) with the spindle it should use",
			e.version(), req.Spindle)}
	}
	var r request
	if err := req.Decode(&r); err != nil {
		return nil, nil, nil, &Error{Kind: KindBadRequest, Message: "spindle daemon: " + err.Error()}
	}
	if err := e.decodeHost(&r); err != nil {
		return nil, nil, nil, &Error{Kind: KindBadRequest, Message: "spindle daemon: " + err.Error()}
	}
	needHost := func() *Error {
		if r.Host == nil {
			return &Error{Kind: KindBadRequest, Message: fmt.Sprintf("spindle daemon: %q needs a \"host\"", req.Op)}
		}
		return nil
	}
	switch req.Op {
	case "hello":
		return map[string]any{"version": e.version(), "pid": os.Getpid()}, nil, nil, nil
	case "stop":
		e.log().Info("ansible: asked to stop")
		s.Stop()
		return nil, nil, nil, nil
	case "reset":
		if err := needHost(); err != nil {
			return nil, nil, nil, err
		}
		rh, err := e.resolveHost(&r)
		if err != nil {
			return nil, nil, nil, classify(stageResolve, err, r.Host, nil)
		}
		e.Registry.Forget(rh.key)
		e.log().Info("ansible: connection reset", zap.String("host", r.Host.Name), zap.String("chain", rh.res.Chain()))
		return nil, nil, nil, nil
	case "exec":
		if err := needHost(); err != nil {
			return nil, nil, nil, err
		}
		if r.Cmd == nil {
			return nil, nil, nil, &Error{Kind: KindBadRequest, Message: "spindle daemon: exec needs a \"cmd\""}
		}
		return e.exec(ctx, &r, req.Stdin)
	case "put", "fetch":
		if err := needHost(); err != nil {
			return nil, nil, nil, err
		}
		if !filepath.IsAbs(r.Src) || r.Dst == "" || (req.Op == "fetch" && !filepath.IsAbs(r.Dst)) {
			return nil, nil, nil, &Error{Kind: KindBadRequest, Message: fmt.Sprintf(
				"spindle daemon: %s needs \"src\" and \"dst\", the local one an absolute path (got %q, %q)", req.Op, r.Src, r.Dst)}
		}
		if req.Op == "put" {
			return nil, nil, nil, e.put(ctx, &r)
		}
		return nil, nil, nil, e.fetch(ctx, &r)
	}
	return nil, nil, nil, &Error{Kind: KindBadRequest, Message: fmt.Sprintf("spindle daemon: unknown op %q (want hello, exec, put, fetch, reset or stop)", req.Op)}
}

// hostKey names a host's kept connection: its chain with its settings.
// Every Ansible host's settings begin alike, apart from other endpoints'.
func hostKey(r *hostvars.Resolved) daemon.Key {
	return daemon.Key{Settings: "ansible " + r.Settings(), Target: r.Chain()}
}

// conn is where a request runs: the host's kept connection, and the
// become child on it when the request asks for one.
type conn struct {
	key    daemon.Key
	kept   *daemon.Conn
	reused bool
	cx     *spindle.Context
}

// connect returns the host's connection (made now, or kept), and the
// become child on it if r asks for one.
func (e *Endpoint) connect(ctx context.Context, r *request) (*conn, *Error) {
	rh, err := e.resolveHost(r)
	if err != nil {
		return nil, classify(stageResolve, err, r.Host, r.Become)
	}
	var bc spindle.Connector
	if r.Become != nil {
		if bc, err = r.Become.Connector(); err != nil {
			return nil, classify(stageResolve, err, r.Host, r.Become)
		}
	}
	log := e.log().With(zap.String("host", r.Host.Name))
	key := rh.key
	kept, reused, err := e.Registry.Get(ctx, key, daemon.Dialer{
		NewGroup: e.NewController,
		Open: func(ctx context.Context, g *daemon.Group) (*spindle.Context, []target.Step, error) {
			// A resolution of its own: the connectors built from it
			// share nothing with the remembered one.
			res, err := rh.host.Resolve()
			if err != nil {
				return nil, nil, err
			}
			if len(res.Ignored) > 0 {
				log.Info("ansible: ssh arguments with no effect here", zap.Strings("ignored", res.Ignored))
			}
			steps, err := res.Steps()
			if err != nil {
				return nil, nil, err
			}
			cx, err := g.Routes.Open(ctx, steps)
			return cx, steps, err
		},
		Log: log,
	})
	if err != nil {
		return nil, classify(stageHost, err, r.Host, r.Become)
	}
	c := &conn{key: key, kept: kept, reused: reused, cx: kept.Context}
	if bc != nil {
		// The host's context keeps one child per connector and options
		// (password included), and starts it once for concurrent asks.
		if c.cx, err = kept.Context.Connect(ctx, bc); err != nil {
			if reused && errors.Is(err, errkind.ErrDisconnected) {
				// The kept connection died since: the caller retries.
				return c, &Error{Kind: KindUnreachable, Message: errDeadKept}
			}
			return nil, classify(stageBecome, err, r.Host, r.Become)
		}
	}
	return c, nil
}

// alive says whether the kept connection answers a ping within
// aliveTimeout: a request that lost its context may have lost only a
// become child, and the host's connection serves other requests.
func (e *Endpoint) alive(ctx context.Context, kept *daemon.Conn) bool {
	ctx, cancel := context.WithTimeout(ctx, aliveTimeout)
	defer cancel()
	return sys.Ping(ctx, kept.Context) == nil
}

const aliveTimeout = 5 * time.Second

// errDeadKept marks connect's error for a kept connection found dead.
const errDeadKept = "the kept connection died"

// withConn runs f on r's connection; when a kept connection turns out to
// have died before f could start anything (f's error is
// ErrDisconnected and started is false), it is replaced once.
func (e *Endpoint) withConn(ctx context.Context, r *request, stage stage, f func(c *conn) (started bool, err error)) *Error {
	for attempt := 0; ; attempt++ {
		c, cerr := e.connect(ctx, r)
		if cerr != nil && c != nil && attempt == 0 {
			e.log().Info("ansible: kept connection lost", zap.String("host", r.Host.Name))
			e.Registry.Drop(c.key, c.kept)
			continue
		}
		if cerr != nil {
			if c != nil {
				cerr.Message = fmt.Sprintf("%s: the connection was lost twice while starting %s on it", c.kept.Context.Name(), r.Become.Method)
			}
			return cerr
		}
		started, err := f(c)
		if err == nil {
			return nil
		}
		if !started && c.reused && attempt == 0 && errors.Is(err, errkind.ErrDisconnected) {
			e.log().Info("ansible: kept connection lost", zap.String("host", r.Host.Name), zap.Error(err))
			e.Registry.Drop(c.key, c.kept)
			continue
		}
		if errors.Is(err, errkind.ErrDisconnected) && !e.alive(ctx, c.kept) {
			// The command may have started, so it is not run again;
			// but the next request must not find the dead connection
			// kept, which its death may not have reached yet.
			e.log().Info("ansible: kept connection lost", zap.String("host", r.Host.Name), zap.Error(err))
			e.Registry.Drop(c.key, c.kept)
		}
		return classify(stage, err, r.Host, r.Become)
	}
}

// exec runs the command through /bin/sh -c with stdin, and returns its
// status and output, as produced.
func (e *Endpoint) exec(ctx context.Context, r *request, stdin []byte) (map[string]any, []byte, []byte, *Error) {
	var res *exec.Result
	var out, errb bytes.Buffer
	prefix, zip, suffix, zipped := ansiballz.Split(stdin)
	zipped = zipped && !r.PTY
	user, askHome := echoHomeUser(*r.Cmd)
	askHome = askHome && r.Become == nil && len(stdin) == 0 && !r.PTY
	var answered bool
	rerr := e.withConn(ctx, r, stageOp, func(c *conn) (bool, error) {
		if askHome {
			if home, ok := e.homes.answer(ctx, c.cx, user); ok {
				out.WriteString(home)
				answered = true
				return true, nil
			}
		}
		if zipped {
			cmd := exec.Cmd{Shell: *r.Cmd}
			if interp, env, ok := pythonOnly(*r.Cmd); ok && (r.ModuleRunner == nil || *r.ModuleRunner) {
				// The environment the command sets is the runner's too;
				// for the command itself it changes nothing.
				cmd.Python = &exec.Python{Interpreter: interp, ZipPart: 1}
				cmd.Env = env
			}
			return e.execAnsiballz(ctx, c.cx, cmd, prefix, zip, suffix, &out, &errb, &res)
		}
		if r.PTY || len(stdin) > maxInlineStdin {
			return e.run(ctx, c.cx, exec.Cmd{Shell: *r.Cmd, PTY: r.PTY}, stdin, &out, &errb, &res)
		}
		return collect(ctx, c.cx, exec.Cmd{Shell: *r.Cmd, Stdin: stdin}, &out, &errb, &res)
	})
	if rerr != nil {
		return nil, nil, nil, rerr
	}
	if answered {
		return map[string]any{"rc": 0}, out.Bytes(), nil, nil
	}
	return map[string]any{"rc": exitStatus(res)}, out.Bytes(), errb.Bytes(), nil
}

// run runs cmd on cx with stdin (sent on the call's circuit) and
// collects its output; started says whether the command may have run.
func (e *Endpoint) run(ctx context.Context, cx *spindle.Context, cmd exec.Cmd, stdin []byte, out, errb *bytes.Buffer, res **exec.Result) (started bool, err error) {
	p, err := exec.Start(ctx, cx, cmd)
	if err != nil {
		return false, err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w := p.Stdin()
		w.Write(stdin) //nolint:errcheck // a command that exits early need not read it all
		w.Close()
	}()
	out.Reset()
	errb.Reset()
	cerr := p.CopyOutput(out, errb)
	*res, err = p.Wait()
	wg.Wait()
	if err == nil {
		err = cerr
	}
	return true, err
}

// maxInlineStdin bounds the stdin sent in a command's request (a bus
// frame, router.DefaultMaxFrameSize); more goes on a circuit.
const maxInlineStdin = 1 << 20

// collect runs cmd on cx, its stdin given whole, in one round trip
// unless its output outgrows the reply (exec.Collect). A context known
// to be dead before the call has started nothing.
func collect(ctx context.Context, cx *spindle.Context, cmd exec.Cmd, out, errb *bytes.Buffer, res **exec.Result) (started bool, err error) {
	if err := cx.Err(); err != nil {
		return false, err
	}
	out.Reset()
	errb.Reset()
	*res, err = exec.Collect(ctx, cx, cmd, out, errb)
	return true, err
}

// execAnsiballz runs cmd with an AnsiballZ payload's stdin, its zip
// named by hash when cx's agent has it or can fetch it from the first
// agent of its chain (zipAtRoot), sent with it otherwise (and again if
// the agent lost it); its wrapper sent as its differences from the one
// the agent holds for the zip, or in full for the agent to hold.
func (e *Endpoint) execAnsiballz(ctx context.Context, cx *spindle.Context, cmd exec.Cmd, prefix, zip, suffix []byte, out, errb *bytes.Buffer, res **exec.Result) (bool, error) {
	z := ansiballz.NewZip(zip)
	sum := z.Sum
	root := cx
	for root.Parent() != nil {
		root = root.Parent()
	}
	for attempt := 0; ; attempt++ {
		withZip := attempt > 0 || !e.zips.has(cx, sum)
		if withZip && attempt == 0 && root != cx && e.zipAtRoot(ctx, root, z) {
			withZip = false // cx's agent fetches it up its chain
		}
		held := e.zips.wrapper(cx, sum)
		var zipPart int
		if attempt > 0 || held == nil {
			held = ansiballz.NewWrapper(prefix, suffix)
			cmd.StdinParts, zipPart = held.StdinParts(z, withZip)
		} else {
			cmd.StdinParts, zipPart = held.Delta(prefix, z, suffix, withZip)
		}
		if cmd.Python != nil {
			cmd.Python = &exec.Python{Interpreter: cmd.Python.Interpreter, ZipPart: zipPart}
		}
		started, err := e.run(ctx, cx, cmd, nil, out, errb, res)
		if err == nil {
			e.zips.set(cx, sum, true, held)
			return true, nil
		}
		if attempt > 0 || !ansiballz.IsNotStored(err) {
			return started, err
		}
		// Evicted from the agent's store (or from the root's): nothing
		// ran; send it along.
		e.zips.set(cx, sum, false, nil)
		if root != cx {
			e.zips.hold(root, sum, false)
		}
	}
}

// zipAtRoot makes sure that root, the first agent of a chain (a direct
// child of the controller), holds z, for a context further down that
// chain: that context's agent, which lacks it, asks its parent, which
// asks its own, up to root (services/modules/upcall), and every agent
// on the way keeps it. So a zip that several contexts of one chain run
// (become users, later hops) crosses the controller's link once, and
// each link below once. It says whether root holds it; false when root
// could not store it (the zip then goes with the call).
func (e *Endpoint) zipAtRoot(ctx context.Context, root *spindle.Context, z ansiballz.Zip) bool {
	if e.zips.has(root, z.Sum) {
		return true
	}
	if _, err := modules.Put(ctx, root, z.Bytes()); err != nil {
		e.log().Debug("zip not stored in the first agent of the chain", zap.String("context", root.Name()), zap.Error(err))
		return false
	}
	e.zips.hold(root, z.Sum, true)
	return true
}

// exitStatus is a command's status as a shell reports it: 128+N for a
// process killed by signal N.
func exitStatus(res *exec.Result) int {
	if res.Signal != "" {
		if n := unix.SignalNum(res.Signal); n != 0 {
			return 128 + int(n)
		}
		return 255
	}
	return res.ExitCode
}

// put copies the local file r.Src to r.Dst, atomically: a new file gets
// mode 0600, a replaced one keeps its mode.
func (e *Endpoint) put(ctx context.Context, r *request) *Error {
	st, err := os.Stat(r.Src)
	if err != nil {
		return classify(stageOp, errkind.In("", "put", err), r.Host, r.Become)
	}
	if !st.Mode().IsRegular() {
		return &Error{Kind: KindNotFound, Message: fmt.Sprintf("put %s: not a regular file", r.Src)}
	}
	// A missing directory on the host is no missing source.
	return e.withConn(ctx, r, stageWrite, func(c *conn) (bool, error) {
		// A new file 0600, a replaced one keeps its mode, in the put itself.
		_, err := fs.PutFile(ctx, c.cx, r.Src, r.Dst, false, fs.PutOptions{WriteOptions: fs.WriteOptions{NewMode: 0o600}})
		return !errors.Is(err, errkind.ErrDisconnected), err
	})
}

// fetch copies r.Src on the host to the local file r.Dst, atomically.
func (e *Endpoint) fetch(ctx context.Context, r *request) *Error {
	return e.withConn(ctx, r, stageOp, func(c *conn) (bool, error) {
		_, err := fs.GetFile(ctx, c.cx, r.Src, r.Dst, false)
		return false, err
	})
}
