package main

import (
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/ptytest"
)

// readyCat is a remote command that says it is ready, then echoes: the
// CLI prints output only once the terminal is raw, so after "ready" what
// is typed reaches it as typed (before, the terminal would echo it, and
// turn CR into LF).
var readyCat = []string{"--", "sh", "-c", "echo ready; exec cat"}

// startOnPTY runs the built CLI with args on a terminal of its own.
func startOnPTY(t *testing.T, args ...string) *ptytest.Run {
	t.Helper()
	return ptytest.Start(t, osexec.Command(filepath.Join(binDir, "spindle"), args...))
}

// On a terminal, ~~ sends one ~, ~? lists the sequences and ~. closes the
// connection with ssh's 255, the remote command killed.
func TestShellEscapes(t *testing.T) {
	r := startOnPTY(t, append([]string{"shell", "local"}, readyCat...)...)
	r.WaitFor("ready\r\n")
	r.Type("hello\r")
	r.WaitFor("hello\r\nhello\r\n") // the remote terminal's echo, then cat's
	// Escapes count only at a line start. The remote terminal's echo of
	// one line and cat's copy of the one before may come in either order.
	r.Type("a~b ~~\r~~x\r")
	r.WaitForN("a~b ~~\r\n", 2)
	r.WaitForN("~x\r\n", 2)
	if out := r.Output(); strings.Contains(out, "~~x") {
		t.Fatalf("~~ at a line start went through as typed:\n%q", out)
	}
	r.Type("~?")
	r.WaitFor("~.   - terminate the connection")
	r.Type("~.")
	if code := r.ExitCode(); code != 255 {
		t.Errorf("exit status %d after ~., want 255; output:\n%q", code, r.Output())
	}
	if out := r.Output(); !strings.Contains(out, "spindle: connection to local closed (~.)") {
		t.Errorf("no closing message:\n%q", out)
	}
}

// -e picks another escape character, and ~ is an ordinary one then; -e
// none turns escapes off.
func TestShellEscapeChar(t *testing.T) {
	r := startOnPTY(t, append([]string{"shell", "-e", "^]", "local"}, readyCat...)...)
	r.WaitFor("ready\r\n")
	r.Type("~.\r")
	r.WaitFor("~.\r\n~.\r\n")
	r.Type("\x1d.")
	if code := r.ExitCode(); code != 255 {
		t.Errorf("exit status %d after ^]., want 255; output:\n%q", code, r.Output())
	}
	if out := r.Output(); !strings.Contains(out, "closed (^].)") {
		t.Errorf("no closing message:\n%q", out)
	}

	r = startOnPTY(t, append([]string{"shell", "-o", "EscapeChar=none", "local"}, readyCat...)...)
	r.WaitFor("ready\r\n")
	r.Type("~.\r")
	r.WaitFor("~.\r\n~.\r\n")
	r.Type("\x04") // end of file at a line start: cat exits
	if code := r.ExitCode(); code != 0 {
		t.Errorf("exit status %d, want cat's 0; output:\n%q", code, r.Output())
	}
}
