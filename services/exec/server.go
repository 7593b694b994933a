package exec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	osexec "os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/pyrunner"
	"github.com/spindle-rpc/spindle/internal/tether"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/agentfwd"
	"github.com/spindle-rpc/spindle/services/modules/store"
	"github.com/spindle-rpc/spindle/services/modules/upcall"
	"golang.org/x/sys/unix"
)

// Register registers exec.Run and exec.Start on reg.
func Register(reg *rpc.Registry) {
	reg.Handle(MethodRun, handleRun)
	reg.Handle(MethodStart, handleStart)
	reg.Handle(MethodAttach, handleAttach)
}

// joinStdinParts makes c.Stdin of c.StdinParts, storing the parts that
// come with their bytes and fetching those named by hash from the
// module store.
func joinStdinParts(ctx context.Context, c *Cmd, method string) (parts [][]byte, err error) {
	if len(c.StdinParts) == 0 {
		return nil, nil
	}
	if len(c.Stdin) > 0 {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: Stdin and StdinParts both set", method)
	}
	parts = make([][]byte, len(c.StdinParts))
	n := 0
	for i, p := range c.StdinParts {
		if parts[i], err = stdinPart(ctx, p, store.Default); err != nil {
			return nil, fmt.Errorf("%s: stdin part %d: %w", method, i, err)
		}
		if n += len(parts[i]); n > MaxStdinParts {
			return nil, errkind.Errorf(errkind.ErrTooLarge, "%s: stdin parts make more than %d bytes: send a larger stdin on the circuit", method, MaxStdinParts)
		}
	}
	c.Stdin = make([]byte, 0, n)
	for _, p := range parts {
		c.Stdin = append(c.Stdin, p...)
	}
	c.StdinParts = nil
	return parts, nil
}

// exePath is the path of Cmd.Exe's program, materialised from the
// module store.
func exePath(ctx context.Context, p *StdinPart) (string, error) {
	if p.Offset != 0 || p.Length != 0 {
		return "", errkind.Errorf(errkind.ErrBadArgs, "a slice of stored bytes is no program")
	}
	sum := p.SHA256
	if p.Data != nil {
		stored, err := putPart(store.Default, p)
		if err != nil {
			return "", err
		}
		if sum != nil && !bytes.Equal(sum, stored[:]) {
			return "", errkind.Errorf(errkind.ErrBadArgs, "its bytes hash to %x, not %x", stored, sum)
		}
		sum = stored[:]
	}
	if sum == nil {
		return "", errkind.Errorf(errkind.ErrBadArgs, "no bytes and no sha256")
	}
	path, err := store.Materialize(store.Default, sum)
	if errors.Is(err, errkind.ErrNotFound) {
		// Neither on disk nor in the store: asked of the parent agent,
		// stored, and materialised from there.
		if _, ferr := upcall.Fetch(ctx, store.Default, sum); ferr != nil {
			return "", ferr
		}
		path, err = store.Materialize(store.Default, sum)
	}
	return path, err
}

// putPart stores p's Data in st, shared if p says so.
func putPart(st *store.Store, p *StdinPart) ([sha256.Size]byte, error) {
	if p.Shared {
		return st.PutShared(p.Data)
	}
	return st.Put(p.Data)
}

// stdinPart is the bytes one stdin part stands for, in st.
func stdinPart(ctx context.Context, p StdinPart, st *store.Store) ([]byte, error) {
	if !p.Base64 {
		return namedBytes(ctx, p, st)
	}
	if p.Offset != 0 || p.Length != 0 {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "a slice (offset %d, length %d) is not encoded in base64", p.Offset, p.Length)
	}
	data, err := namedBytes(ctx, p, st)
	if err != nil {
		return nil, err
	}
	if n := base64.StdEncoding.EncodedLen(len(data)); n > MaxStdinParts {
		return nil, errkind.Errorf(errkind.ErrTooLarge, "%d bytes in base64 make more than %d", len(data), MaxStdinParts)
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(len(data)))
	base64.StdEncoding.Encode(out, data)
	return out, nil
}

// namedBytes is the bytes a stdin part names, before any encoding.
func namedBytes(ctx context.Context, p StdinPart, st *store.Store) ([]byte, error) {
	if p.Offset != 0 || p.Length != 0 {
		if p.SHA256 == nil || p.Data != nil {
			return nil, errkind.Errorf(errkind.ErrBadArgs, "a slice (offset %d, length %d) names stored bytes by hash, with no data", p.Offset, p.Length)
		}
	}
	switch {
	case p.SHA256 == nil:
		return p.Data, nil
	case p.Data != nil:
		sum, err := putPart(st, &p)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(sum[:], p.SHA256) {
			return nil, errkind.Errorf(errkind.ErrBadArgs, "its bytes hash to %x, not %x", sum, p.SHA256)
		}
		return p.Data, nil
	}
	data, err := upcall.Fetch(ctx, st, p.SHA256)
	if err != nil {
		return nil, err
	}
	if p.Length == 0 && p.Offset == 0 {
		return data, nil
	}
	if p.Offset < 0 || p.Length <= 0 || p.Offset > int64(len(data)) || p.Length > int64(len(data))-p.Offset {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "slice (offset %d, length %d) outside the %d bytes stored under sha256 %x", p.Offset, p.Length, len(data), p.SHA256)
	}
	return data[p.Offset : p.Offset+p.Length], nil
}

// chunkSize bounds one output frame's data, and the reads from a PTY.
const chunkSize = 32 << 10

func handleRun(ctx context.Context, call *rpc.Call) (any, error) {
	var c Cmd
	if err := call.Args(&c); err != nil {
		return nil, err
	}
	if c.PTY {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: a PTY needs exec.Start", MethodRun)
	}
	if _, err := joinStdinParts(ctx, &c, MethodRun); err != nil {
		return nil, err
	}
	limit := c.MaxOutput
	switch {
	case limit < 0:
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: negative MaxOutput", MethodRun)
	case limit == 0:
		limit = DefaultRunMaxOutput
	case limit > MaxRunOutput:
		limit = MaxRunOutput
	}
	started := time.Now()
	tctx, cancel, err := withTimeout(ctx, &c, MethodRun)
	if err != nil {
		return nil, err
	}
	defer cancel()
	// No context for os/exec: it would start a goroutine per command to
	// watch it; captured applies tctx itself.
	cmd, release, err := prepare(context.Background(), &c, MethodRun)
	if err != nil {
		return nil, err
	}
	defer release()
	if len(c.Stdin) > 0 {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	} else if null, err := devNull(); err == nil {
		cmd.Stdin = null // else os/exec opens /dev/null for every command
	}
	if c.Spill {
		return runSpilling(ctx, tctx, &c, cmd, limit, started)
	}
	stdout, stderr := &boundedBuffer{max: limit}, &boundedBuffer{max: limit}
	serr, werr := runCaptured(tctx, cmd, stdout, stderr)
	if serr != nil {
		return nil, startError(MethodRun, cmd.Path, serr)
	}
	res, err := finish(ctx, tctx, cmd, werr, MethodRun)
	if err != nil {
		return nil, err
	}
	res.Stdout, res.StdoutTruncated = stdout.buf, stdout.truncated
	res.Stderr, res.StderrTruncated = stderr.buf, stderr.truncated
	return res, nil
}

func handleStart(ctx context.Context, call *rpc.Call) (any, error) {
	var c Cmd
	if err := call.Args(&c); err != nil {
		return nil, err
	}
	circ := call.Circuit
	if circ == nil {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s needs a circuit", MethodStart)
	}
	if c.MaxOutput < 0 {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: negative MaxOutput", MethodStart)
	}
	parts, err := joinStdinParts(ctx, &c, MethodStart)
	if err != nil {
		return nil, err
	}
	tctx, cancel, err := withTimeout(ctx, &c, MethodStart)
	if err != nil {
		return nil, err
	}
	defer cancel()
	cmd, release, err := prepare(tctx, &c, MethodStart)
	if err != nil {
		return nil, err
	}
	defer release()
	fw := &frameWriter{w: circ}
	// Once the process is being killed nobody needs its stdin, and a caller
	// that stopped reading must not keep the handler blocked on output
	// forever; leave WaitDelay for output that is already on its way.
	stop := context.AfterFunc(tctx, func() {
		circ.SetReadDeadline(time.Now())
		circ.SetWriteDeadline(time.Now().Add(WaitDelay))
	})
	defer stop()

	var (
		res       *Result
		truncated [3]bool
	)
	ran := false
	if c.Python != nil && !c.PTY && c.Python.ZipPart >= 0 && c.Python.ZipPart < len(parts) {
		res, err = runPython(ctx, tctx, call, &c, cmd, parts, fw, &truncated)
		ran = !errors.Is(err, pyrunner.ErrUnavailable)
	}
	switch {
	case ran:
	case c.PTY:
		res, err = runPTY(ctx, tctx, call, &c, cmd, fw, &truncated)
	default:
		res, err = runPipes(ctx, tctx, call, &c, cmd, fw, &truncated)
	}
	if err != nil {
		return nil, err
	}
	res.StdoutTruncated, res.StderrTruncated = truncated[StreamStdout], truncated[StreamStderr]
	return res, nil
}

func runPipes(ctx, tctx context.Context, call *rpc.Call, c *Cmd, cmd *osexec.Cmd, fw *frameWriter, truncated *[3]bool) (*Result, error) {
	// stdin is our own pipe rather than cmd.Stdin = circuit: os/exec would
	// wait for its copying goroutine, which only returns when the caller
	// half-closes, so a process that ignores stdin would hang the call.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdout := &streamWriter{fw: fw, id: StreamStdout, max: c.MaxOutput}
	stderr := &streamWriter{fw: fw, id: StreamStderr, max: c.MaxOutput}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdout, stderr
	release, err := tether.Start(cmd)
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, startError(MethodStart, cmd.Path, err)
	}
	stdinR.Close()
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		feedStdin(stdinW, c.Stdin, call.Circuit)
		stdinW.Close()
	}()
	stopControls := handleControls(call, cmd.Process.Pid, nil)
	werr := cmd.Wait() // also waits until all output is on the circuit
	release()
	stopControls()
	call.Circuit.SetReadDeadline(time.Now())
	<-stdinDone
	truncated[StreamStdout], truncated[StreamStderr] = stdout.truncated, stderr.truncated
	return finish(ctx, tctx, cmd, werr, MethodStart)
}

func runPTY(ctx, tctx context.Context, call *rpc.Call, c *Cmd, cmd *osexec.Cmd, fw *frameWriter, truncated *[3]bool) (*Result, error) {
	master, tty, err := openPTY(c.Rows, c.Cols)
	if err != nil {
		return nil, fmt.Errorf("%s: open pty: %w", MethodStart, err)
	}
	defer master.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	// Setsid makes the process a session and group leader, so the group
	// kill in cmd.Cancel still reaches its children; Setpgid would fail
	// for a session leader.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	release, err := tether.Start(cmd)
	tty.Close() // else the master never sees EIO when the process exits
	if err != nil {
		return nil, startError(MethodStart, cmd.Path, err)
	}
	out := &streamWriter{fw: fw, id: StreamStdout, max: c.MaxOutput}
	outDone := make(chan error, 1)
	go func() { outDone <- copyPTY(out, master) }()
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		feedStdin(master, c.Stdin, call.Circuit)
	}()
	stopControls := handleControls(call, cmd.Process.Pid, master)
	werr := cmd.Wait()
	release()
	stopControls()
	// A descendant may keep the terminal open; as os/exec does for pipes,
	// give it WaitDelay and then stop reading.
	var outErr error
	t := time.NewTimer(WaitDelay)
	select {
	case outErr = <-outDone:
	case <-t.C:
		master.SetReadDeadline(time.Now())
		<-outDone
	}
	t.Stop()
	call.Circuit.SetReadDeadline(time.Now())
	master.SetWriteDeadline(time.Now()) // a full terminal input queue
	<-stdinDone
	truncated[StreamStdout] = out.truncated
	if werr == nil && outErr != nil && !errors.Is(outErr, os.ErrDeadlineExceeded) {
		werr = outErr
	}
	return finish(ctx, tctx, cmd, werr, MethodStart)
}

// copyPTY forwards the PTY's output. Linux returns EIO from the master once
// every holder of the terminal has closed it: that is the end of output.
func copyPTY(w *streamWriter, master *os.File) error {
	buf := make([]byte, chunkSize)
	for {
		n, err := master.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			if err == io.EOF || errors.Is(err, syscall.EIO) {
				return nil
			}
			return err
		}
	}
}

// openPTY opens a terminal pair with the master in non-blocking mode:
// pty.Open leaves it blocking (its ioctls use File.Fd), and only a
// non-blocking master can be read with a deadline and closed while a read
// is pending.
func openPTY(rows, cols uint16) (master, tty *os.File, err error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	m.Close()
	if err == nil {
		err = unix.SetNonblock(fd, true)
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		tty.Close()
		return nil, nil, err
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if rows == 0 {
		rows = 24
	}
	if cols == 0 {
		cols = 80
	}
	if err := setWinsize(master, rows, cols); err != nil {
		master.Close()
		tty.Close()
		return nil, nil, err
	}
	return master, tty, nil
}

func setWinsize(master *os.File, rows, cols uint16) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
	if err != nil {
		return err
	}
	return ierr
}

// feedStdin copies the process's stdin. If the process stops reading, the
// circuit is still drained so that the caller's writes do not block.
func feedStdin(w io.Writer, first []byte, circ io.Reader) {
	if len(first) > 0 {
		if _, err := w.Write(first); err != nil {
			io.Copy(io.Discard, circ)
			return
		}
	}
	if _, err := io.Copy(w, circ); err != nil {
		io.Copy(io.Discard, circ)
	}
}

// handleControls applies signal and resize requests until the returned
// function is called.
func handleControls(call *rpc.Call, pgid int, master *os.File) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case ctl := <-call.Controls():
				switch ctl.Op {
				case rpc.OpSignal:
					if ctl.Signal > 0 && ctl.Signal < 65 {
						syscall.Kill(-pgid, syscall.Signal(ctl.Signal))
					}
				case rpc.OpResize:
					if master != nil && ctl.Rows > 0 && ctl.Cols > 0 {
						setWinsize(master, ctl.Rows, ctl.Cols)
					}
				}
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

func withTimeout(ctx context.Context, c *Cmd, method string) (context.Context, context.CancelFunc, error) {
	switch {
	case c.Timeout < 0:
		return nil, nil, errkind.Errorf(errkind.ErrBadArgs, "%s: negative Timeout", method)
	case c.Timeout > 0:
		tctx, cancel := context.WithTimeout(ctx, c.Timeout)
		return tctx, cancel, nil
	}
	return ctx, func() {}, nil
}

// prepare validates c and builds the command, in its own process group and
// killed as a group when ctx is done. Started with tether.Start, the group
// is also killed when the agent dies. release frees what the command
// needed to start (Cmd.ExeMemfd's memfd): call it once it started, or
// will not.
func prepare(ctx context.Context, c *Cmd, method string) (cmd *osexec.Cmd, release func(), err error) {
	var argv []string
	switch {
	case len(c.Argv) > 0 && c.Shell != "":
		return nil, nil, errkind.Errorf(errkind.ErrBadArgs, "%s: both Argv and Shell are set", method)
	case c.Shell != "":
		argv = []string{"/bin/sh", "-c", c.Shell}
	case len(c.Argv) > 0 && c.Argv[0] != "":
		argv = c.Argv
	default:
		return nil, nil, errkind.Errorf(errkind.ErrBadArgs, "%s: no command (set Argv or Shell)", method)
	}
	env, err := buildEnv(c)
	if err != nil {
		return nil, nil, errkind.Errorf(errkind.ErrBadArgs, "%s: %v", method, err)
	}
	prog := argv[0]
	var memfd *os.File
	var memfdExtra bool
	switch {
	case c.Exe == nil && c.ExeMemfd:
		return nil, nil, errkind.Errorf(errkind.ErrBadArgs, "%s: ExeMemfd without Exe", method)
	case c.Exe != nil && len(c.Argv) == 0:
		return nil, nil, errkind.Errorf(errkind.ErrBadArgs, "%s: Exe needs Argv (its first word the process's argv[0])", method)
	case c.Exe != nil && c.ExeMemfd:
		if prog, memfd, memfdExtra, err = exeMemfd(ctx, c.Exe); err != nil {
			return nil, nil, fmt.Errorf("%s %s: executable: %w", method, argv[0], err)
		}
	case c.Exe != nil:
		if prog, err = exePath(ctx, c.Exe); err != nil {
			return nil, nil, fmt.Errorf("%s %s: executable: %w", method, argv[0], err)
		}
	}
	release = func() {}
	if memfd != nil {
		release = func() { memfd.Close() }
		defer func() {
			if err != nil {
				memfd.Close()
			}
		}()
	}
	if c.Dir != "" {
		// The child's chdir error would be reported as "fork/exec <argv0>:
		// no such file or directory", blaming the program.
		fi, err := os.Stat(c.Dir)
		if err != nil {
			return nil, nil, startError(method, argv[0], fmt.Errorf("working directory: %w", err))
		}
		if !fi.IsDir() {
			return nil, nil, errkind.Errorf(errkind.ErrNotFound, "%s %s: working directory %s is not a directory", method, argv[0], c.Dir)
		}
	}
	cmd = osexec.CommandContext(ctx, prog, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The group outlives the leader while any member lives, so its id
		// cannot have been reused by an unrelated process.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			return err
		}
		return nil
	}
	cmd.WaitDelay = WaitDelay
	if memfdExtra {
		cmd.ExtraFiles = []*os.File{memfd}
	}
	return cmd, release, nil
}

func buildEnv(c *Cmd) ([]string, error) {
	var env []string
	if !c.ClearEnv {
		env = os.Environ()
		// While the controller forwards its ssh-agent here, the agent's
		// environment includes the forwarded socket, as an ssh -A session's
		// does (Unset and Env still apply).
		if sock := agentfwd.Socket(); sock != "" {
			env = append(slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "SSH_AUTH_SOCK=") }),
				"SSH_AUTH_SOCK="+sock)
		}
	}
	unset := func(key string) {
		env = slices.DeleteFunc(env, func(kv string) bool {
			return len(kv) > len(key) && kv[len(key)] == '=' && strings.HasPrefix(kv, key)
		})
	}
	set := func(key, val string) {
		unset(key)
		env = append(env, key+"="+val)
	}
	for _, k := range c.Unset {
		unset(k)
	}
	if c.PTY {
		term := c.Term
		if term == "" {
			term = DefaultTerm
		}
		set("TERM", term)
	}
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("bad environment variable name %q", k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys) // a deterministic environment, whatever the map order
	for _, k := range keys {
		set(k, c.Env[k])
	}
	return env, nil
}

// devNull is /dev/null opened once, the stdin of every exec.Run command
// that is given none.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })

// startError gives a start failure the kind the caller can test for.
func startError(method, prog string, err error) error {
	switch {
	case errors.Is(err, osexec.ErrNotFound), errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return errkind.Errorf(errkind.ErrNotFound, "%s %s: %v", method, prog, err)
	case isMemfdPath(prog) && (errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)):
		return fmt.Errorf("%s %s: %w", method, prog, memfdRefused("execve of the memfd", err))
	case errors.Is(err, fs.ErrPermission), errors.Is(err, osexec.ErrDot):
		return errkind.Errorf(errkind.ErrPermission, "%s %s: %v", method, prog, err)
	}
	return fmt.Errorf("%s %s: %w", method, prog, err)
}

// finish turns the end of a started process into the reply. ctx is the
// call's, tctx the one with Cmd.Timeout.
func finish(ctx, tctx context.Context, cmd *osexec.Cmd, werr error, method string) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, cmd.Path, err)
	}
	timedOut := tctx.Err() != nil
	var ee *osexec.ExitError
	if werr != nil && !errors.As(werr, &ee) && !errors.Is(werr, osexec.ErrWaitDelay) && !timedOut {
		return nil, fmt.Errorf("%s %s: %w", method, cmd.Path, werr)
	}
	res := &Result{TimedOut: timedOut}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		res.ExitCode = -1
		res.Signal = unix.SignalName(ws.Signal())
		if res.Signal == "" {
			res.Signal = fmt.Sprintf("SIG%d", int(ws.Signal()))
		}
	} else {
		res.ExitCode = ws.ExitStatus()
	}
	return res, nil
}

// boundedBuffer keeps the first max bytes written to it and swallows the
// rest, so that the process is never blocked by its output.
type boundedBuffer struct {
	buf       []byte
	max       int64
	truncated bool
}

func (b *boundedBuffer) write(p []byte) (full bool) {
	b.Write(p) //nolint:errcheck // never fails
	return false
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	room := b.max - int64(len(b.buf))
	if int64(len(p)) > room {
		b.truncated = true
		b.buf = append(b.buf, p[:room]...)
	} else {
		b.buf = append(b.buf, p...)
	}
	return len(p), nil
}

// frameWriter writes output frames to the circuit; stdout and stderr are
// written from two goroutines.
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (f *frameWriter) frame(id byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(p) > 0 {
		n := min(len(p), chunkSize)
		// One Write per frame: on a yamux stream every Write is a message.
		f.buf = append(f.buf[:0], id, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(f.buf[1:], uint32(n))
		f.buf = append(f.buf, p[:n]...)
		if _, err := f.w.Write(f.buf); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// streamWriter is one output stream of exec.Start, limited to max bytes
// when max > 0 (the rest is swallowed so the process keeps running).
type streamWriter struct {
	fw        *frameWriter
	id        byte
	max, n    int64
	truncated bool
}

func (s *streamWriter) Write(p []byte) (int, error) {
	q := p
	if s.max > 0 {
		room := s.max - s.n
		if int64(len(q)) > room {
			s.truncated = true
			q = q[:room]
		}
	}
	if len(q) > 0 {
		if err := s.fw.frame(s.id, q); err != nil {
			return 0, err
		}
		s.n += int64(len(q))
	}
	return len(p), nil
}
