// Package become is the machinery shared by the privilege-changing
// connectors (sudo, su, doas): it runs the tool with a hybrid terminal
// (below; docs/architecture.md, "Become"), answers its password prompt,
// bootstraps the agent over the tool's stdio and turns the tool's
// complaints into clear errors.
//
// The child's stdin and stdout are pipes that carry the link; its stderr
// and controlling terminal are a PTY, used only to answer the password
// prompt and to read the tool's error messages. Passwords are never logged
// and are redacted from every error and log line.
package become

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/errkind"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Placeholders in the argv given to Start, replaced (anywhere in an
// element) by the first stage of each attempt (a retry after
// bootstrap.ErrStaleAgent uses fresh args).
const (
	// Script is replaced by the first stage's script alone, for tools that
	// take an argv: `sudo -u USER -- sh -c SCRIPT`.
	Script = "\x00spindle-script\x00"
	// Command is replaced by the whole one-line `exec sh -c '…'` command, for
	// tools that hand a command line to the target user's login shell
	// (`su USER -c COMMAND`): it survives sh, bash, fish, tcsh.
	Command = "\x00spindle-command\x00"
)

// DefaultTimeout bounds a start (password prompt, handshake and agent
// upload) when Prompter.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Error kinds. Each wraps the rpc kind callers test with errors.Is.
var (
	// ErrWrongPassword: the tool rejected the password (it asked again or
	// said so).
	ErrWrongPassword = fmt.Errorf("wrong password (%w)", errkind.ErrAuth)
	// ErrPasswordRequired: the tool needs a password and none was given.
	ErrPasswordRequired = fmt.Errorf("a password is required but none was given (%w)", errkind.ErrAuth)
	// ErrNotAllowed: the invoking user may not become the target user
	// (sudoers, doas.conf, pam_wheel).
	ErrNotAllowed = fmt.Errorf("the user is not allowed to become the target user (%w)", errkind.ErrPermission)
	// ErrNeedTTY: the tool insists on a terminal (sudoers requiretty).
	ErrNeedTTY = fmt.Errorf("the tool requires a terminal, e.g. sudoers requiretty (%w)", errkind.ErrPermission)
	// ErrNoSuchUser: the target user does not exist.
	ErrNoSuchUser = fmt.Errorf("no such target user (%w)", errkind.ErrNotFound)
	// ErrNotInstalled: the tool is not installed on the host.
	ErrNotInstalled = fmt.Errorf("tool not installed: %w", errkind.ErrNotFound)
	// ErrTimeout: no agent within the timeout; the child was killed.
	ErrTimeout = fmt.Errorf("timed out (%w)", errkind.ErrTimeout)
)

// Prompter describes the tool to Start: how to recognise its password
// prompt, what to answer, and how to read its complaints.
type Prompter struct {
	// Tool names the program for messages ("sudo"); Package is the
	// package that provides it ("sudo", "opendoas").
	Tool, Package string
	// Password answers the first prompt; empty means none is known (a
	// prompt then fails the start with ErrPasswordRequired).
	Password string
	// IsPrompt reports whether out, the terminal output since the last
	// answer (carriage returns removed), ends with a password prompt.
	IsPrompt func(out string) bool
	// Classify maps what the tool printed on the terminal to one of the
	// error kinds above, or nil when it recognises nothing.
	Classify func(out string) error
	// Timeout bounds the start; default DefaultTimeout.
	Timeout time.Duration
	// AnswerOnStdin writes the password to the child's stdin instead of
	// its terminal: PAM's misc_conv (util-linux su) prints the prompt on
	// stderr but reads the answer from stdin. The pipe is idle then: the
	// first stage has not started.
	AnswerOnStdin bool
}

// maxOutput bounds the terminal output kept for error messages.
const maxOutput = 4 << 10

// exitGrace is how long a closed agent gets to exit before it is killed.
const exitGrace = 5 * time.Second

// Start runs argv (argv[0] looked up in $PATH; the Script or Command
// placeholder replaced by the first stage) as req's new agent and returns
// its stream, positioned after the hello. A cached agent that fails its
// self-check is replaced by one retry with fresh args.
//
// Errors name the tool, not the context (the caller names the context, as
// for bootstrap.RemoteStart), wrap one of the Err* kinds above when the
// tool's complaint is recognised, quote what the tool printed on the
// terminal, and never contain the password. Cancelling ctx kills the
// child and returns ctx.Err().
func Start(ctx context.Context, req connectors.StartRequest, argv []string, p Prompter) (*bootstrap.Conn, error) {
	log := req.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if len(argv) == 0 {
		return nil, errors.New("become: empty argv")
	}
	if p.Tool == "" {
		p.Tool = argv[0]
	}
	if p.Package == "" {
		p.Package = p.Tool
	}
	name := req.Name
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not on this host's PATH: install the %q package (%v)", ErrNotInstalled, p.Tool, p.Package, err)
	}
	conn, err := start(ctx, req, path, argv, p, log)
	if err != nil && errors.Is(err, bootstrap.ErrStaleAgent) {
		log.Debug("cached agent failed its self-check: starting a fresh one", zap.String("context", name))
		req.Fresh = true
		conn, err = start(ctx, req, path, argv, p, log)
	}
	return conn, err
}

// start is one attempt: one child, one handshake.
func start(ctx context.Context, req connectors.StartRequest, path string, argv []string, p Prompter, log *zap.Logger) (*bootstrap.Conn, error) {
	name := req.Name
	args := req.Args()
	script, err := bootstrap.RemoteScript(args, req.Agent)
	if err != nil {
		return nil, err
	}
	command, err := bootstrap.RemoteCommand(args, req.Agent)
	if err != nil {
		return nil, err
	}
	av := make([]string, len(argv))
	for i, a := range argv {
		av[i] = strings.ReplaceAll(strings.ReplaceAll(a, Script, script), Command, command)
	}

	master, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open a pseudo-terminal for %s: %w", p.Tool, err)
	}
	// No echo from the start: a tool that turns echo off for the password
	// restores this state afterwards, so what we type is never echoed.
	if t, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS); err == nil {
		t.Lflag &^= unix.ECHO | unix.ECHONL
		unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, t)
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		master.Close()
		tty.Close()
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		master.Close()
		tty.Close()
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	cmd := exec.Command(path, av[1:]...)
	cmd.Args[0] = av[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, tty
	cmd.Env = cEnv(os.Environ())
	// A session of its own with the PTY (fd 2 in the child) as its
	// controlling terminal: /dev/tty is the PTY, and so is requiretty's
	// check; a Ctrl-C on our terminal does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 2}
	log.Debug("starting become child", zap.String("context", name), zap.String("tool", p.Tool),
		zap.Strings("argv", argvForLog(av, script, command, p.Password)))
	err = cmd.Start()
	stdinR.Close()
	stdoutW.Close()
	// Our copy of the slave stays open until the child has exited and the
	// terminal has gone quiet: Linux pushes what the child wrote to the
	// master asynchronously, and once no slave fd is left a master read
	// can fail with EIO before the child's last words (doas's "Authorization
	// required") arrive. Seen under load in CI.
	if err != nil {
		tty.Close()
		master.Close()
		stdinW.Close()
		stdoutR.Close()
		return nil, fmt.Errorf("start %s: %w", p.Tool, err)
	}

	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	w := &watcher{master: master, stdin: stdinW, p: p, pid: cmd.Process.Pid, log: log.With(zap.String("context", name)),
		done: make(chan struct{})}
	go w.run()

	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var closeOnce sync.Once
	var started atomic.Bool // set once RemoteStart succeeded: Close, not a failure
	closeFn := func() error {
		closeOnce.Do(func() {
			if started.Load() {
				// stdin is closed: the agent exits when its link ends.
				t := time.NewTimer(exitGrace)
				select {
				case <-exited:
				case <-t.C:
					log.Debug("become child did not exit in time: killing it", zap.String("context", name))
				}
				t.Stop()
			}
			w.terminate()
			select {
			case <-exited:
			case <-time.After(2 * time.Second):
				w.hangup()
				select {
				case <-exited:
				case <-time.After(exitGrace):
					log.Warn("become child survived SIGKILL and hangup: giving up on it",
						zap.String("context", name), zap.Int("pid", w.pid))
				}
			}
			// The child is gone: read what it wrote until the terminal
			// has been quiet a moment, then let the master see EOF.
			w.lastRead.Store(time.Now().UnixNano()) // the quiet window starts now
			w.quiesce(50*time.Millisecond, time.Second)
			tty.Close()
			select {
			case <-w.done:
			case <-time.After(time.Second):
			}
			w.hangup()
			<-w.done
			stdoutR.Close()
		})
		return nil
	}
	conn, err := bootstrap.RemoteStart(tctx, stdinW, stdoutR, args, req.Agent, name, log, closeFn, bootstrap.OverLocalPipe)
	if err == nil {
		started.Store(true)
		w.live.Store(true)
		return conn, nil
	}
	// RemoteStart has closed stdin and run closeFn: the child is gone and
	// the terminal read to its end.
	out := w.output()
	redact := func(s string) string {
		// The tool may quote the command back ("not allowed to execute
		// '/bin/sh -c …'"): shorten it.
		s = strings.ReplaceAll(s, command, "exec sh -c '<first stage>'")
		s = strings.ReplaceAll(s, script, "<first stage>")
		return redactString(s, p.Password)
	}
	said := ""
	if o := strings.TrimSpace(redact(out)); o != "" {
		said = fmt.Sprintf(" (%s said: %q)", p.Tool, tail(o, 512))
	}
	if aerr := w.authErr(); aerr != nil {
		return nil, fmt.Errorf("%s: %w%s", p.Tool, aerr, said)
	}
	if p.Classify != nil {
		if cerr := p.Classify(out); cerr != nil {
			return nil, fmt.Errorf("%s: %w%s", p.Tool, cerr, said)
		}
		// Some complaints arrive on stdout, e.g. nologin's "This account
		// is currently not available.": RemoteStart's error quotes them.
		if cerr := p.Classify(err.Error()); cerr != nil {
			return nil, fmt.Errorf("%s: %w%s: %s", p.Tool, cerr, said, redact(err.Error()))
		}
	}
	if ctx.Err() == nil && tctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w: no agent after %s; the child was killed%s", p.Tool, ErrTimeout, timeout, said)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, &redactedError{msg: redact(err.Error()) + said, err: err}
}

// redactedError keeps the wrapped error's kinds (ErrStaleAgent for the
// retry, ErrAgent) while its text has the password removed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// watcher reads the PTY master: it answers the password prompt once,
// keeps the tool's output (bounded) for errors, and drains the agent's
// stderr afterwards so that it never blocks.
type watcher struct {
	master *os.File
	stdin  *os.File // the child's stdin, for Prompter.AnswerOnStdin
	p      Prompter
	pid    int
	log    *zap.Logger
	done   chan struct{}
	live   atomic.Bool // the hello arrived: output is the agent's stderr
	// lastRead is when output last arrived (unix ns), for quiesce.
	lastRead atomic.Int64

	mu       sync.Mutex
	out      []byte // tail of the terminal output, at most maxOutput
	err      error  // ErrWrongPassword, ErrPasswordRequired
	hungup   bool
	answered bool
}

func (w *watcher) run() {
	defer close(w.done)
	buf := make([]byte, 4096)
	var pending []byte // output since the last answer
	for {
		n, err := w.master.Read(buf)
		if n > 0 {
			w.lastRead.Store(time.Now().UnixNano())
			chunk := []byte(strings.ReplaceAll(string(buf[:n]), "\r", ""))
			if w.live.Load() {
				// The agent's own stderr: no prompt to answer any more.
				for _, l := range strings.Split(strings.TrimRight(string(chunk), "\n"), "\n") {
					w.log.Debug("agent stderr", zap.String("line", redactString(l, w.p.Password)))
				}
				continue
			}
			w.mu.Lock()
			w.out = appendTail(w.out, chunk, maxOutput)
			pending = appendTail(pending, chunk, maxOutput)
			if w.err == nil && w.p.IsPrompt != nil && w.p.IsPrompt(string(pending)) {
				pending = pending[:0]
				switch {
				case w.answered:
					w.err = ErrWrongPassword // it asked again
				case w.p.Password == "":
					w.err = ErrPasswordRequired
				default:
					w.answered = true
					to := w.master
					if w.p.AnswerOnStdin {
						to = w.stdin
					}
					if _, werr := to.Write([]byte(w.p.Password + "\n")); werr != nil {
						w.log.Debug("could not answer the password prompt", zap.Error(werr))
					}
				}
				if w.err != nil {
					w.mu.Unlock()
					w.terminate()
					continue
				}
			}
			w.mu.Unlock()
		}
		if err != nil {
			// EOF, or EIO once every slave fd is closed (Linux), or the
			// master closed by hangup.
			return
		}
	}
}

// quiesce waits until no output has arrived for quiet (or the reader has
// ended), at most max: the bounded drain of a terminal whose writer has
// exited, whose last bytes the kernel may still be pushing.
func (w *watcher) quiesce(quiet, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		select {
		case <-w.done:
			return
		default:
		}
		idle := time.Since(time.Unix(0, w.lastRead.Load()))
		if idle >= quiet {
			return
		}
		time.Sleep(quiet - idle)
	}
}

// terminate sends SIGKILL to the child's process group (Setsid made the
// child its leader). A setuid tool run by an unprivileged user cannot be
// signalled: then the terminal is hung up, which sends the session SIGHUP.
func (w *watcher) terminate() {
	// Only EPERM calls for the hang-up. ESRCH means the child is already
	// gone, and closing the master then would throw away its last words
	// (su's "user … does not exist") before they are read: seen in CI.
	if err := syscall.Kill(-w.pid, syscall.SIGKILL); err == syscall.EPERM {
		w.hangup()
	}
}

// hangup closes the master: the session gets SIGHUP and reads end.
func (w *watcher) hangup() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.hungup {
		w.hungup = true
		w.master.Close()
	}
}

func (w *watcher) output() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.out)
}

func (w *watcher) authErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func appendTail(b, chunk []byte, max int) []byte {
	b = append(b, chunk...)
	if len(b) > max {
		b = append(b[:0], b[len(b)-max:]...)
	}
	return b
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// redactString removes password from s.
func redactString(s, password string) string {
	if password == "" {
		return s
	}
	return strings.ReplaceAll(s, password, "********")
}

// cEnv is env with the locale forced to C, so that prompts and messages
// are the English ones Classify matches.
func cEnv(env []string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "LANG" || k == "LANGUAGE" || strings.HasPrefix(k, "LC_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "LC_ALL=C", "LANG=C")
}

// argvForLog shortens the first stage in a logged argv and redacts the
// password.
func argvForLog(av []string, script, command, password string) []string {
	out := make([]string, len(av))
	for i, a := range av {
		a = strings.ReplaceAll(a, command, "exec sh -c '<first stage>'")
		a = strings.ReplaceAll(a, script, "<first stage>")
		out[i] = redactString(a, password)
	}
	return out
}
