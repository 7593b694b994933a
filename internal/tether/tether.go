// Package tether starts child processes that die with the process that
// started them, together with everything in their process groups, even
// when that process is killed with SIGKILL and has no chance to clean up.
// An agent killed in the middle of a command must not leave the command,
// or what the command started, running for good.
//
// Two mechanisms, because neither covers the case alone:
//
// The child gets PR_SET_PDEATHSIG = SIGKILL. The kernel sends it when the
// thread that forked the child ends, not when the process does, and a Go
// program ends threads while it runs: a goroutine that exits while locked
// to its thread takes the thread with it (connectors/setns does that on
// purpose). A fork from whatever thread the calling goroutine happens to
// be on could have its child killed later by an unrelated goroutine's
// exit. So every start runs on one goroutine that stays locked to its
// thread while any child it started lives: no other goroutine can run on
// that thread, lock it, or end it meanwhile. When the last child has been
// waited for it unlocks and returns, so nothing lingers between commands.
//
// PDEATHSIG reaches only the direct child. A shell's background jobs,
// in the child's process group, would survive it, and killing a group
// needs a process alive to do it; a subreaper does not help either, as
// orphans go to the nearest living one and the dead process is none. So a
// watchdog process (this very binary re-executed through /proc/self/exe,
// in a mode that does nothing else, see the init function) is told on a
// pipe about each group as it starts and ends. The pipe's end of file
// says the starting process is gone (whichever way it went: the kernel
// closes the write end), and the watchdog SIGKILLs every group still
// listed. One watchdog serves all children; it is started with the first,
// and a process that exits cleanly ends it first (Close).
//
// The watchdog cannot be told about a group before the fork returns. A
// child that starts processes of its own in the microseconds between its
// start and its group's registration, while the parent is killed right
// then, leaves those behind; the child itself still dies by PDEATHSIG.
// The kernel also clears PDEATHSIG when the child executes a set-user-ID
// program (sudo): then only the watchdog's group kill applies.
package tether

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Start starts cmd tied to this process. cmd must lead a process group of
// its own: cmd.SysProcAttr sets Setsid, or Setpgid with Pgid 0. Start sets
// cmd.SysProcAttr.Pdeathsig. Once cmd has been waited for (and only then),
// call release: the group is no longer this process's to kill, whatever of
// it is left (a daemon the command started on purpose stays).
func Start(cmd *exec.Cmd) (release func(), err error) {
	attr := cmd.SysProcAttr
	if attr == nil || !(attr.Setsid || attr.Setpgid && attr.Pgid == 0) {
		return nil, errors.New("tether: the command must lead a process group of its own (Setsid, or Setpgid with Pgid 0)")
	}
	attr.Pdeathsig = syscall.SIGKILL
	if err := starts.start(cmd); err != nil {
		return nil, err
	}
	pgid := cmd.Process.Pid
	watch.add(pgid)
	var once sync.Once
	return func() {
		once.Do(func() {
			watch.remove(pgid)
			starts.release()
		})
	}, nil
}

// starts is the process's one starter: see the package comment for why.
var starts starter

// starter runs cmd.Start on a goroutine locked to its thread for as long
// as a child it started has not been released.
type starter struct {
	mu   sync.Mutex
	live int            // children started or being started, not released
	reqs chan *startReq // nil while no goroutine serves
}

type startReq struct {
	cmd  *exec.Cmd
	done chan error
}

func (s *starter) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	if s.reqs == nil {
		s.reqs = make(chan *startReq)
		go serve(s.reqs)
	}
	s.live++ // keeps reqs open until this start is released
	reqs := s.reqs
	s.mu.Unlock()
	r := &startReq{cmd: cmd, done: make(chan error, 1)}
	reqs <- r
	if err := <-r.done; err != nil {
		s.release()
		return err
	}
	return nil
}

func (s *starter) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live--
	if s.live < 0 {
		panic(fmt.Sprintf("tether: %d more releases than starts", -s.live))
	}
	if s.live == 0 {
		close(s.reqs)
		s.reqs = nil
	}
}

// serve starts commands until reqs is closed, which happens once every
// child it started has been waited for: only then may its thread end or
// serve another goroutine.
func serve(reqs <-chan *startReq) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for r := range reqs {
		r.done <- r.cmd.Start()
	}
}

// Track ties the process group pgid, which this process did not start
// itself (a fork of a process it started), to this process the way Start
// does, with the watchdog alone. Call release once the group is no
// longer this process's to kill.
func Track(pgid int) (release func()) {
	watch.add(pgid)
	var once sync.Once
	return func() { once.Do(func() { watch.remove(pgid) }) }
}
