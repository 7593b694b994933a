package exec

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	osexec "os/exec"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
)

// A spilled command is an exec.Run (Cmd.Spill) whose output outgrew the
// reply: it waits, its output unread, in the agent's table of spilled
// commands until exec.Attach takes it (or SpillAttachTimeout kills it).
type spilled struct {
	c        *captured
	cmd      *osexec.Cmd
	deadline time.Time // Cmd.Timeout's end; zero without one
	timer    *time.Timer
}

// spillAttachTimeout is SpillAttachTimeout; tests shorten it.
var spillAttachTimeout = SpillAttachTimeout

var spills = struct {
	mu sync.Mutex
	m  map[uint64]*spilled
}{m: map[uint64]*spilled{}}

// park puts s in the table and returns its id.
func park(s *spilled) (uint64, error) {
	spills.mu.Lock()
	defer spills.mu.Unlock()
	if len(spills.m) >= MaxSpilled {
		return 0, errkind.Errorf(errkind.ErrTooLarge, "%s: %d commands with large output are waiting for exec.Attach already: this one was killed", MethodRun, MaxSpilled)
	}
	var b [8]byte
	var id uint64
	for id == 0 || spills.m[id] != nil {
		rand.Read(b[:])
		id = binary.LittleEndian.Uint64(b[:])
	}
	spills.m[id] = s
	s.timer = time.AfterFunc(spillAttachTimeout, func() {
		if s := take(id); s != nil {
			s.c.kill()
		}
	})
	return id, nil
}

// take removes id's command from the table: its owner is then the caller.
func take(id uint64) *spilled {
	spills.mu.Lock()
	defer spills.mu.Unlock()
	s := spills.m[id]
	delete(spills.m, id)
	return s
}

// spillBuffer keeps what it is given, and is full from max bytes on.
type spillBuffer struct {
	buf []byte
	max int64
}

func (b *spillBuffer) write(p []byte) (full bool) {
	b.buf = append(b.buf, p...)
	return int64(len(b.buf)) >= b.max
}

// runSpilling is exec.Run with Cmd.Spill: the output up to limit per
// stream (and at most one read more) comes back in the reply; a process
// with more is parked for exec.Attach.
func runSpilling(ctx, tctx context.Context, c *Cmd, cmd *osexec.Cmd, limit int64, started time.Time) (*Result, error) {
	cp, err := startCaptured(tctx, cmd)
	if err != nil {
		return nil, startError(MethodRun, cmd.Path, err)
	}
	stdout, stderr := &spillBuffer{max: limit}, &spillBuffer{max: limit}
	full, err := cp.pump([2]sink{stdout, stderr})
	if err != nil {
		cp.wait() //nolint:errcheck // poll's error is the one to report
		return nil, fmt.Errorf("%s %s: %w", MethodRun, cmd.Path, err)
	}
	var werr error
	switch {
	case full && tctx.Err() != nil:
		cp.kill() // killed by Cmd.Timeout or the call's end already
	case full:
		s := &spilled{c: cp, cmd: cmd}
		if c.Timeout > 0 {
			s.deadline = started.Add(c.Timeout)
		}
		cp.arm(context.Background()) // the call ends now; its process does not
		id, err := park(s)
		if err != nil {
			cp.kill()
			return nil, err
		}
		return &Result{Spilled: id, Stdout: stdout.buf, Stderr: stderr.buf}, nil
	default:
		werr = cp.wait()
	}
	res, err := finish(ctx, tctx, cmd, werr, MethodRun)
	if err != nil {
		return nil, err
	}
	res.Stdout, res.Stderr = stdout.buf, stderr.buf
	return res, nil
}

// frameSink sends a stream's output as frames on a circuit; once the
// caller stops taking them, the rest is discarded, so that the process
// still ends.
type frameSink struct {
	fw  *frameWriter
	id  byte
	err error
}

func (f *frameSink) write(p []byte) (full bool) {
	if f.err == nil {
		f.err = f.fw.frame(f.id, p)
	}
	return false
}

func handleAttach(ctx context.Context, call *rpc.Call) (any, error) {
	var a AttachArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	circ := call.Circuit
	if circ == nil {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s needs a circuit", MethodAttach)
	}
	s := take(a.ID)
	if s == nil {
		return nil, errkind.Errorf(errkind.ErrNotFound, "%s: no spilled command %d here (attached already, or killed %v after it spilled)", MethodAttach, a.ID, spillAttachTimeout)
	}
	s.timer.Stop()
	tctx := ctx
	if !s.deadline.IsZero() {
		var cancel context.CancelFunc
		tctx, cancel = context.WithDeadline(ctx, s.deadline)
		defer cancel()
	}
	s.c.arm(tctx)
	// A caller that stops reading must not hold the process for ever: as
	// exec.Start does, leave WaitDelay for output already on its way.
	stop := context.AfterFunc(tctx, func() { circ.SetWriteDeadline(time.Now().Add(WaitDelay)) })
	defer stop()
	stopControls := handleControls(call, s.cmd.Process.Pid, nil)
	defer stopControls()
	fw := &frameWriter{w: circ}
	if _, err := s.c.pump([2]sink{&frameSink{fw: fw, id: StreamStdout}, &frameSink{fw: fw, id: StreamStderr}}); err != nil {
		s.c.wait() //nolint:errcheck // poll's error is the one to report
		return nil, fmt.Errorf("%s %s: %w", MethodAttach, s.cmd.Path, err)
	}
	return finish(ctx, tctx, s.cmd, s.c.wait(), MethodRun)
}
