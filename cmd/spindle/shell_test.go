package main

import (
	"bytes"
	"errors"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyRun is the built CLI running on a terminal of its own: what a user
// would type goes to term, and output collects what it prints.
type ptyRun struct {
	t    *testing.T
	cmd  *osexec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	more chan struct{} // a token whenever output grows
	done chan error
	// type_ writes what a user types.
	type_ func(s string)
}

// readyCat is a remote command that says it is ready, then echoes: the
// CLI prints output only once the terminal is raw, so after "ready" what
// is typed reaches it as typed (before, the terminal would echo it, and
// turn CR into LF).
var readyCat = []string{"--", "sh", "-c", "echo ready; exec cat"}

func startOnPTY(t *testing.T, args ...string) *ptyRun {
	t.Helper()
	cmd := osexec.Command(filepath.Join(binDir, "spindle"), args...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		t.Fatalf("start on a pty: %v", err)
	}
	r := &ptyRun{t: t, cmd: cmd, more: make(chan struct{}, 1), done: make(chan error, 1)}
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
	r.type_ = func(s string) {
		if _, err := tty.Write([]byte(s)); err != nil {
			t.Fatalf("type %q: %v", s, err)
		}
	}
	return r
}

// output is everything printed so far.
func (r *ptyRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitFor waits until the output contains s, at most 20 s.
func (r *ptyRun) waitFor(s string) { r.t.Helper(); r.waitForN(s, 1) }

// waitForN waits until the output contains s n times, at most 20 s.
func (r *ptyRun) waitForN(s string, n int) {
	r.t.Helper()
	deadline := time.After(20 * time.Second)
	for strings.Count(r.output(), s) < n {
		select {
		case <-r.more:
		case <-deadline:
			r.t.Fatalf("no %q in the output after 20 s:\n%q", s, r.output())
		}
	}
}

// exitCode waits for the CLI to exit, at most 20 s.
func (r *ptyRun) exitCode() int {
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
	case <-time.After(20 * time.Second):
		r.t.Fatalf("still running after 20 s; output:\n%q", r.output())
	}
	return -1
}

// On a terminal, ~~ sends one ~, ~? lists the sequences and ~. closes the
// connection with ssh's 255, the remote command killed.
func TestShellEscapes(t *testing.T) {
	r := startOnPTY(t, append([]string{"shell", "local"}, readyCat...)...)
	r.waitFor("ready\r\n")
	r.type_("hello\r")
	r.waitFor("hello\r\nhello\r\n") // the remote terminal's echo, then cat's
	// Escapes count only at a line start. The remote terminal's echo of
	// one line and cat's copy of the one before may come in either order.
	r.type_("a~b ~~\r~~x\r")
	r.waitForN("a~b ~~\r\n", 2)
	r.waitForN("~x\r\n", 2)
	if out := r.output(); strings.Contains(out, "~~x") {
		t.Fatalf("~~ at a line start went through as typed:\n%q", out)
	}
	r.type_("~?")
	r.waitFor("~.   - terminate the connection")
	r.type_("~.")
	if code := r.exitCode(); code != 255 {
		t.Errorf("exit status %d after ~., want 255; output:\n%q", code, r.output())
	}
	if out := r.output(); !strings.Contains(out, "spindle: connection to local closed (~.)") {
		t.Errorf("no closing message:\n%q", out)
	}
}

// -e picks another escape character, and ~ is an ordinary one then; -e
// none turns escapes off.
func TestShellEscapeChar(t *testing.T) {
	r := startOnPTY(t, append([]string{"shell", "-e", "^]", "local"}, readyCat...)...)
	r.waitFor("ready\r\n")
	r.type_("~.\r")
	r.waitFor("~.\r\n~.\r\n")
	r.type_("\x1d.")
	if code := r.exitCode(); code != 255 {
		t.Errorf("exit status %d after ^]., want 255; output:\n%q", code, r.output())
	}
	if out := r.output(); !strings.Contains(out, "closed (^].)") {
		t.Errorf("no closing message:\n%q", out)
	}

	r = startOnPTY(t, append([]string{"shell", "-o", "EscapeChar=none", "local"}, readyCat...)...)
	r.waitFor("ready\r\n")
	r.type_("~.\r")
	r.waitFor("~.\r\n~.\r\n")
	r.type_("\x04") // end of file at a line start: cat exits
	if code := r.exitCode(); code != 0 {
		t.Errorf("exit status %d, want cat's 0; output:\n%q", code, r.output())
	}
}
