package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"syscall"
	"time"

	"github.com/spindle-rpc/spindle/internal/pyrunner"
	"github.com/spindle-rpc/spindle/rpc"
	"golang.org/x/sys/unix"
)

// pipeSize is what the pipe w holds without a reader (a user past
// pipe-user-pages-soft gets one page), 0 if unknown.
func pipeSize(w *os.File) int {
	rc, err := w.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) { //nolint:errcheck // n stays 0
		n, _ = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
	})
	return n
}

// runPython runs c in a fork of the warm runner for its interpreter
// (Cmd.Python), with the environment and directory cmd would have had;
// parts are c's stdin parts, the zip among them, which the runner holds
// and the script's stdin lacks (pyrunner.Spec.Apart).
// An error wrapping pyrunner.ErrUnavailable means nothing ran: the
// caller starts cmd instead.
func runPython(ctx, tctx context.Context, call *rpc.Call, c *Cmd, cmd *osexec.Cmd, parts [][]byte, fw *frameWriter, truncated *[3]bool) (*Result, error) {
	zip := parts[c.Python.ZipPart]
	at := 0
	for _, p := range parts[:c.Python.ZipPart] {
		at += len(p)
	}
	var files []*os.File
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	stdinR, stdinW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", pyrunner.ErrUnavailable, err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("%w: %v", pyrunner.ErrUnavailable, err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("%w: %v", pyrunner.ErrUnavailable, err)
	}
	// c.Stdin is the parts joined: the script without its zip is what
	// comes before it and after it. Written before the run starts when
	// a pipe holds it (a wrapper's few KiB), so that the run finds it
	// there rather than waiting for a goroutine of ours to be scheduled.
	before, after := c.Stdin[:at], c.Stdin[at+len(zip):]
	if len(before)+len(after) <= pipeSize(stdinW) {
		stdinW.Write(before) //nolint:errcheck // nothing reads it yet: it fits
		stdinW.Write(after)  //nolint:errcheck // as above
		before, after = nil, nil
	}
	dir := cmd.Dir
	spec := pyrunner.Spec{Interpreter: c.Python.Interpreter, Env: cmd.Env, Dir: dir, Zip: zip, Apart: true, ZipAt: at}
	proc, err := pyrunner.Default.Start(tctx, spec, stdinR, outW, errW)
	// The fork holds its own copies now.
	stdinR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		closeAll()
		if errors.Is(err, pyrunner.ErrUnavailable) {
			return nil, err
		}
		return nil, fmt.Errorf("%s %s: %w", MethodStart, c.Python.Interpreter, err)
	}
	defer closeAll()

	stdout := &streamWriter{fw: fw, id: StreamStdout, max: c.MaxOutput}
	stderr := &streamWriter{fw: fw, id: StreamStderr, max: c.MaxOutput}
	outDone := make(chan error, 2)
	for _, s := range []struct {
		w io.Writer
		r *os.File
	}{{stdout, outR}, {stderr, errR}} {
		go func() {
			_, err := io.Copy(s.w, s.r)
			outDone <- err
		}()
	}
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		if _, err := stdinW.Write(before); err == nil {
			feedStdin(stdinW, after, call.Circuit)
		} else {
			io.Copy(io.Discard, call.Circuit) //nolint:errcheck // as feedStdin does
		}
		stdinW.Close()
	}()
	stopControls := handleControls(call, proc.Pid, nil)
	stopKill := context.AfterFunc(tctx, func() {
		syscall.Kill(-proc.Pid, syscall.SIGKILL) //nolint:errcheck // it may be gone
	})
	status, werr := proc.Wait()
	stopKill()
	stopControls()
	// As for a started command: what the module left running gets
	// WaitDelay to close its output.
	deadline := time.NewTimer(WaitDelay)
	for range 2 {
		select {
		case <-outDone:
		case <-deadline.C:
			outR.SetReadDeadline(time.Now()) //nolint:errcheck // a pipe supports deadlines
			errR.SetReadDeadline(time.Now()) //nolint:errcheck // as above
			<-outDone
		}
	}
	deadline.Stop()
	call.Circuit.SetReadDeadline(time.Now())
	stdinW.SetWriteDeadline(time.Now()) //nolint:errcheck // a script that stopped reading
	<-stdinDone
	truncated[StreamStdout], truncated[StreamStderr] = stdout.truncated, stderr.truncated

	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", MethodStart, c.Python.Interpreter, err)
	}
	if werr != nil {
		return nil, fmt.Errorf("%s %s: %w", MethodStart, c.Python.Interpreter, werr)
	}
	res := &Result{TimedOut: tctx.Err() != nil}
	if status.Signaled() {
		// The command would have been a shell running the interpreter.
		res.ExitCode = 128 + int(status.Signal())
	} else {
		res.ExitCode = status.ExitStatus()
	}
	return res, nil
}
