// Package ptytest runs a program on a pseudo-terminal of its own for
// tests: what a user would type goes in, and what it prints collects.
package ptytest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Wait bounds every wait for output or exit.
const Wait = 20 * time.Second

// Run is a program running on a terminal.
type Run struct {
	t    *testing.T
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	more chan struct{} // a token whenever output grows
	done chan error
}

// Start starts cmd on a new 80x24 terminal; it is killed when t ends.
func Start(t *testing.T, cmd *osexec.Cmd) *Run {
	t.Helper()
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		t.Fatalf("start on a pty: %v", err)
	}
	r := &Run{t: t, tty: tty, more: make(chan struct{}, 1), done: make(chan error, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			r.mu.Lock()
			r.out.Write(buf[:n])
			r.mu.Unlock()
			select {
			case r.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		tty.Close()
	})
	return r
}

// Type writes s as if typed.
func (r *Run) Type(s string) {
	r.t.Helper()
	if _, err := r.tty.Write([]byte(s)); err != nil {
		r.t.Fatalf("type %q: %v", s, err)
	}
}

// Output is everything printed so far.
func (r *Run) Output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// WaitFor waits until the output contains s.
func (r *Run) WaitFor(s string) { r.t.Helper(); r.WaitForN(s, 1) }

// WaitForN waits until the output contains s n times (not overlapping).
func (r *Run) WaitForN(s string, n int) {
	r.t.Helper()
	r.waitUntil(fmt.Sprintf("%q", s), func(out string) bool { return strings.Count(out, s) >= n })
}

// WaitForMatch waits until re matches the output, and returns the match.
func (r *Run) WaitForMatch(re *regexp.Regexp) []string {
	r.t.Helper()
	var m []string
	r.waitUntil(re.String(), func(out string) bool { m = re.FindStringSubmatch(out); return m != nil })
	return m
}

func (r *Run) waitUntil(what string, done func(out string) bool) {
	r.t.Helper()
	deadline := time.After(Wait)
	for !done(r.Output()) {
		select {
		case <-r.more:
		case <-deadline:
			r.t.Fatalf("no %s in the output after %v:\n%q", what, Wait, r.Output())
		}
	}
}

// WaitRaw waits until the program has put the terminal in raw mode (no
// line editing, no output processing; readline's mode, which keeps the
// latter, is not raw): from then on, what is typed reaches it as typed. A
// program that prints nothing when it does (one resumed by fg) can be
// waited for no other way; the terminal's mode is polled.
func (r *Run) WaitRaw() {
	r.t.Helper()
	deadline := time.Now().Add(Wait)
	for {
		var tio *unix.Termios
		var err error
		// On Linux, a pty master's TCGETS reads its slave's settings.
		if cerr := withFd(r.tty, func(fd int) { tio, err = unix.IoctlGetTermios(fd, unix.TCGETS) }); cerr != nil {
			err = cerr
		}
		if err != nil {
			r.t.Fatalf("the terminal's mode: %v", err)
		}
		if tio.Lflag&unix.ICANON == 0 && tio.Oflag&unix.OPOST == 0 { // as term.MakeRaw leaves it
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the terminal is not raw after %v; output:\n%q", Wait, r.Output())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func withFd(f *os.File, fn func(fd int)) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return sc.Control(func(fd uintptr) { fn(int(fd)) })
}

// ExitCode waits for the program to exit and returns its status. What it
// printed last may not have been collected yet: WaitFor it.
func (r *Run) ExitCode() int {
	r.t.Helper()
	select {
	case err := <-r.done:
		var ee *osexec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			r.t.Fatal(err)
		}
		return 0
	case <-time.After(Wait):
		r.t.Fatalf("still running after %v; output:\n%q", Wait, r.Output())
	}
	return -1
}

// Resize changes the terminal's size, as a user's window would: the
// program gets a SIGWINCH.
func (r *Run) Resize(rows, cols uint16) {
	r.t.Helper()
	if err := pty.Setsize(r.tty, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		r.t.Fatalf("resize: %v", err)
	}
}
