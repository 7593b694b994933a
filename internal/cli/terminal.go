package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// shellTerminal is the local side of a shell: the terminal whose size the
// remote pseudo-terminal takes, put in raw mode while the shell runs, and
// what the user types into it, escape sequences acted on here. The remote
// side is either a process this CLI started or one the daemon runs.
type shellTerminal struct {
	inFd, sizeFd int
	inTTY, sized bool // stdin is a terminal; some terminal gives the size
}

func newShellTerminal(g *globals) *shellTerminal {
	inFd, inTTY := ttyFd(g.stdin)
	outFd, outTTY := ttyFd(g.stdout)
	t := &shellTerminal{inFd: inFd, sizeFd: inFd, inTTY: inTTY, sized: inTTY || outTTY}
	if !inTTY && outTTY {
		t.sizeFd = outFd
	}
	return t
}

// termName is $TERM, for the remote terminal ("" for its default).
func (t *shellTerminal) termName() string { return os.Getenv("TERM") }

// size is the local terminal's size, if there is one.
func (t *shellTerminal) size() (rows, cols uint16, ok bool) {
	if !t.sized {
		return 0, 0, false
	}
	c, r, err := term.GetSize(t.sizeFd)
	if err != nil {
		return 0, 0, false
	}
	return uint16(r), uint16(c), true
}

// attach puts the terminal in raw mode (when stdin is one), copies stdin
// to in (through the escape filter, on a terminal; in is closed at its
// end), and sends size changes to resize; <esc>. calls disconnect. stop
// puts the terminal back and ends the size watch.
func (t *shellTerminal) attach(g *globals, esc shellEscape, in io.WriteCloser, resize func(rows, cols uint16), disconnect func()) (stop func(), err error) {
	var mu sync.Mutex // the terminal's state: raw, or restored while suspended
	var old *term.State
	stdin := g.stdin
	if t.inTTY {
		if old, err = term.MakeRaw(t.inFd); err != nil {
			return nil, fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		if esc.on {
			stdin = newEscapeReader(stdin, esc.c, escapeActions{
				disconnect: disconnect,
				suspend: func() {
					mu.Lock()
					term.Restore(t.inFd, old) //nolint:errcheck // best effort
					mu.Unlock()
					stopUntilContinued()
					mu.Lock()
					term.MakeRaw(t.inFd) //nolint:errcheck // as before the suspension
					mu.Unlock()
					if rows, cols, ok := t.size(); ok { // resized meanwhile?
						resize(rows, cols)
					}
				},
				help: func(text string) { io.WriteString(g.stderr, text) }, //nolint:errcheck // the terminal
			})
		}
	}
	winch := make(chan os.Signal, 1)
	if t.sized {
		signal.Notify(winch, syscall.SIGWINCH)
	}
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-winch:
				if rows, cols, ok := t.size(); ok {
					resize(rows, cols)
				}
			case <-done:
				return
			}
		}
	}()
	// Not waited for: a read from a terminal cannot be interrupted.
	go func() {
		io.Copy(in, stdin) //nolint:errcheck // the shell may exit first
		in.Close()
	}()
	return func() {
		signal.Stop(winch)
		close(done)
		<-watched
		if old != nil {
			mu.Lock()
			term.Restore(t.inFd, old) //nolint:errcheck // best effort
			mu.Unlock()
		}
	}, nil
}

// stopUntilContinued stops the process as a job (SIGTSTP) and returns once
// the shell continues it (fg, bg), as ssh's ~^Z does. The signal is sent
// to this very thread: a signal sent to the process could be taken by
// another thread after kill returned, and the terminal made raw again
// before the stop, for the shell to put back. Sent to itself, the thread
// takes it on its way out of tgkill, stopping the process there. A
// process group with no job-controlling shell above it is not stopped
// at all (the kernel discards the signal): then it returns at once.
func stopUntilContinued() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Tgkill(unix.Getpid(), unix.Gettid(), unix.SIGTSTP) //nolint:errcheck // nothing to do if it fails
}
