// Package agent is the program that runs at the far end of every Spindle
// connection, as a library: cmd/spindle-agent is agent.Main(), and a Go
// programmer can build their own agent with extra services,
//
//	func main() {
//		agent.Main(agent.WithService("hello.Greet", greet))
//	}
//
// and have the controller ship it (bootstrap.FromFile).
//
// The agent speaks only the bus on its stdin/stdout: it moves the protocol
// to private descriptors at once and points fd 0 at /dev/null and fd 1 at
// stderr, so nothing it runs or links can corrupt the stream.
package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/internal/spin"
	"github.com/spindle-rpc/spindle/internal/tether"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/agentfwd"
	"github.com/spindle-rpc/spindle/services/connect"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/modules"
	"github.com/spindle-rpc/spindle/services/modules/store"
	"github.com/spindle-rpc/spindle/services/modules/upcall"
	"github.com/spindle-rpc/spindle/services/tunnel"
	"golang.org/x/sys/unix"

	// Hops an agent can start itself (connectors.Register in their init).
	_ "github.com/spindle-rpc/spindle/connectors/doas"
	_ "github.com/spindle-rpc/spindle/connectors/docker"
	_ "github.com/spindle-rpc/spindle/connectors/kubectl"
	_ "github.com/spindle-rpc/spindle/connectors/local"
	_ "github.com/spindle-rpc/spindle/connectors/lxc"
	_ "github.com/spindle-rpc/spindle/connectors/lxd"
	_ "github.com/spindle-rpc/spindle/connectors/machinectl"
	_ "github.com/spindle-rpc/spindle/connectors/podman"
	_ "github.com/spindle-rpc/spindle/connectors/setns"
	_ "github.com/spindle-rpc/spindle/connectors/ssh"
	_ "github.com/spindle-rpc/spindle/connectors/su"
	_ "github.com/spindle-rpc/spindle/connectors/sudo"
	"github.com/spindle-rpc/spindle/services/fs"
	slog "github.com/spindle-rpc/spindle/services/log"
	"github.com/spindle-rpc/spindle/services/sys"
	"github.com/spindle-rpc/spindle/version"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Option adds to an agent.
type Option func(*config)

type config struct {
	register   []func(*rpc.Registry)
	withRouter []func(*router.Router, *rpc.Registry)
	wrapParent func(io.ReadWriteCloser) io.ReadWriteCloser
}

// WithService registers one extra method.
func WithService(method string, h rpc.Handler) Option {
	return func(c *config) {
		c.register = append(c.register, func(r *rpc.Registry) { r.Handle(method, h) })
	}
}

// WithServices registers a whole service package (its Register function).
func WithServices(register func(*rpc.Registry)) Option {
	return func(c *config) { c.register = append(c.register, register) }
}

// WithRouterServices registers services that need the agent's router
// (to open circuits of their own, or, in the project's hostile-agent
// tests, to misbehave on the bus).
func WithRouterServices(register func(rt *router.Router, reg *rpc.Registry)) Option {
	return func(c *config) { c.withRouter = append(c.withRouter, register) }
}

// WithParentConn wraps the byte stream to the parent before the link runs
// on it: for the project's hostile-agent tests, which misbehave below the
// link (writing raw yamux frames, not reading).
func WithParentConn(wrap func(io.ReadWriteCloser) io.ReadWriteCloser) Option {
	return func(c *config) { c.wrapParent = wrap }
}

// DefaultServices registers the services every agent has.
func DefaultServices(r *rpc.Registry) {
	sys.Register(r)
	exec.Register(r)
	modules.Register(r)
	fs.Register(r)
	agentfwd.Register(r)
	tunnel.Register(r)
}

// Main runs the agent on the process's stdin/stdout and exits.
func Main(opts ...Option) {
	// One P (BENCHMARKS.md, "Spin-polling and Ps": ping 23 → 17 µs,
	// exec.Run overhead over fork/exec 1.5x → 1.3x on a 2-vCPU VM), and
	// no GOMAXPROCS the user did not set left for the agent's children to
	// inherit.
	bootstrap.TakeProcs()
	args, err := bootstrap.ParseAgentArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "spindle-agent %s: started by a Spindle controller, not by hand (%v)\n", version.Version, err)
		os.Exit(2)
	}
	// Before the hello, and on the protocol stdout: a stale cached agent
	// says so (SPINDLE-STALE) and goes away; the controller retries.
	if stale, err := bootstrap.CheckSelf(os.Stdout, args); stale {
		fmt.Fprintf(os.Stderr, "spindle-agent: %v\n", err)
		os.Exit(bootstrap.StaleExitCode)
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "spindle-agent: warning: %v\n", err)
	}
	// Temporary files of atomic writes by agents that died (killed in the
	// middle of a transfer) are removed; this agent journals its own.
	journal(args)
	// Agents of other controller versions pile up in the (RAM-backed)
	// cache directory otherwise.
	if removed := bootstrap.PruneCache(bootstrap.KeepOtherAgents); len(removed) > 0 && args.Verbosity > 0 {
		fmt.Fprintf(os.Stderr, "spindle-agent: removed %d old cached agent files: %v\n", len(removed), removed)
	}
	in, out, err := takeStdio()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s %v\n", bootstrap.ErrorPrefix, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// stale says, once the self-check is over, whether it failed.
	stale := make(chan bool, 1)
	if !args.Unpacked {
		stale <- false
	} else {
		// Just unpacked by the first stage: checked beside the first
		// calls instead of before the hello (CheckUnpacked says why).
		go func() {
			bad, err := bootstrap.CheckUnpacked(args)
			if bad {
				fmt.Fprintf(os.Stderr, "spindle-agent: %v: the agent file was removed, exiting; the next connection uploads it again\n", err)
				cancel()
			} else if err != nil {
				fmt.Fprintf(os.Stderr, "spindle-agent: warning: %v\n", err)
			}
			stale <- bad
		}()
	}
	err = Run(ctx, args, in, out, os.Stderr, opts...)
	fs.CloseJournal()
	// Run killed the commands still running; the watchdog that would have
	// killed them had the agent died goes before the agent exits.
	tether.Close()
	// A short first connection must not end before the check: its memo
	// spares every later start the hash (a few ms more to exit, once).
	if <-stale {
		os.Exit(bootstrap.StaleExitCode)
	}
	if err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// journal keeps fs's journal of in-flight writes in the private cache
// directory the agent runs from (agent-* files live only there), and
// cleans up after dead agents of this user.
func journal(args bootstrap.AgentArgs) {
	exe, err := os.Executable()
	if err != nil || !strings.HasPrefix(filepath.Base(exe), "agent-") {
		return
	}
	if n, err := fs.SetJournal(filepath.Join(filepath.Dir(exe), "inflight")); err != nil {
		fmt.Fprintf(os.Stderr, "spindle-agent: warning: journal of in-flight writes: %v\n", err)
	} else if n > 0 && args.Verbosity > 0 {
		fmt.Fprintf(os.Stderr, "spindle-agent: removed %d temporary files of interrupted writes\n", n)
	}
}

// takeStdio moves the protocol off fds 0 and 1.
func takeStdio() (io.Reader, io.WriteCloser, error) {
	in, err := syscall.Dup(0)
	if err != nil {
		return nil, nil, err
	}
	out, err := syscall.Dup(1)
	if err != nil {
		return nil, nil, err
	}
	null, err := syscall.Open(os.DevNull, syscall.O_RDONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := syscall.Dup3(null, 0, 0); err != nil {
		return nil, nil, err
	}
	syscall.Close(null)
	if err := syscall.Dup3(2, 1, 0); err != nil {
		return nil, nil, err
	}
	syscall.CloseOnExec(in)
	syscall.CloseOnExec(out)
	growPipe(in, 1<<20)
	growPipe(out, 256<<10)
	// Non-blocking, so os.NewFile hands them to the netpoller (and the
	// spinning reader can poll): a blocking read would pin a thread and
	// cost a scheduler hand-off every time it returns.
	syscall.SetNonblock(in, true)
	syscall.SetNonblock(out, true)
	return os.NewFile(uintptr(in), "spindle-in"), os.NewFile(uintptr(out), "spindle-out"), nil
}

// growPipe raises one of the agent's pipes from 64 KiB: the input to
// 1 MiB (the unprivileged maximum), so that whoever feeds the agent
// (sshd, sudo, docker exec) keeps draining its own side while the agent
// is busy with a chunk (hashing it, writing it to disk) instead of
// stalling on a full pipe (BENCHMARKS.md, "Pipes": put_100m 15 % faster);
// the output to 256 KiB, so that a large reply (a get's 256 KiB chunks)
// goes out in one write instead of four, each a wake-up of sshd and of the
// agent's poller (same section: a 100 MiB get on a 2-vCPU VM 8-15 %
// faster, 12 % less CPU over the agent, sshd and the controller; 1 MiB
// did no better). Both count against the user's pipe
// budget (fs.pipe-user-pages-soft, 64 MiB), hence not more. Best effort:
// a socket or terminal, or a user over budget, keeps what it has.
func growPipe(fd, size int) {
	unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, size)
}

type stdio struct {
	io.Reader
	io.WriteCloser
}

// Run is the agent's body: hello, then serve the bus until the parent link
// ends. Every call still running is then cancelled (its processes killed).
func Run(ctx context.Context, args bootstrap.AgentArgs, in io.Reader, out io.WriteCloser, stderr io.Writer, opts ...Option) error {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	level := slog.LevelFor(args.Verbosity)
	stderrCore := zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(stderr), zapcore.ErrorLevel)
	// The router logs through the forwarding core, which sends through the
	// router: tie the knot with a late-bound sender.
	fwd := &lateSender{}
	// A record that cannot be forwarded (the link is gone) is dropped
	// quietly: zap would otherwise report each failure on stderr.
	log := zap.New(zapcore.NewTee(stderrCore, slog.NewCore(fwd, level)),
		zap.ErrorOutput(zapcore.AddSync(io.Discard))).With(zap.String("agent", args.Name))
	rt := router.New(args.ID, router.Options{Logger: log, ParentMaxFrameSize: args.ParentMaxFrame})
	fwd.rt.Store(rt)

	reg := rpc.NewRegistry()
	DefaultServices(reg)
	for _, fn := range cfg.register {
		fn(reg)
	}
	for _, fn := range cfg.withRouter {
		fn(rt, reg)
	}
	children := connect.Register(reg, connect.Host{Router: rt, Logger: log, Verbosity: args.Verbosity})
	// Children ask for module store entries they lack, and this agent
	// asks its parent when that is an agent (never the controller).
	upcalls := upcall.Serve(rt, args.Parent, store.Default, log)
	srv := rpc.NewServer(rt, reg, log)

	hello := bootstrap.Hello{Proto: router.ProtocolVersion, Version: version.Version,
		PID: os.Getpid(), UID: os.Getuid(), OS: runtime.GOOS, Arch: runtime.GOARCH, MaxFrame: rt.MaxFrameSize()}
	if err := bootstrap.WriteHello(out, args.Nonce, hello); err != nil {
		return err
	}
	log.Debug("agent up", zap.Uint32("id", args.ID), zap.Int("pid", hello.PID))
	var conn io.ReadWriteCloser = stdio{spin.Reader(in, spin.Budget()), out}
	if cfg.wrapParent != nil {
		conn = cfg.wrapParent(conn)
	}
	err := rt.Serve(ctx, conn, "parent")
	srv.Close()
	upcalls.Close()
	children.Close()
	rt.Close()
	return err
}

type lateSender struct{ rt atomic.Pointer[router.Router] }

func (l *lateSender) Send(m *router.Message) error {
	if rt := l.rt.Load(); rt != nil {
		return rt.Send(m)
	}
	return router.ErrClosed
}
