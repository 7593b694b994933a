package cli

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit"
	"github.com/spindle-rpc/spindle/internal/testkit/ptytest"
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
	r.WaitFor("spindle: connection to local closed (~.)") // what it printed may still be on its way
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
	r.WaitFor("closed (^].)")

	r = startOnPTY(t, append([]string{"shell", "-o", "EscapeChar=none", "local"}, readyCat...)...)
	r.WaitFor("ready\r\n")
	r.Type("~.\r")
	r.WaitFor("~.\r\n~.\r\n")
	r.Type("\x04") // end of file at a line start: cat exits
	if code := r.ExitCode(); code != 0 {
		t.Errorf("exit status %d, want cat's 0; output:\n%q", code, r.Output())
	}
}

// spindle shell --persist: the shell runs on the daemon's connection (the
// same agent for two shells), takes the terminal's size and its changes,
// and ~. still closes it with 255; Ctrl-D at a line start ends it as the
// remote shell decides.
func TestShellPersist(t *testing.T) {
	env := persistEnv(t)
	args := []string{"shell", "--persist", "1m", "local", "--", "sh", "-c", "echo ready $PPID; while read x; do stty size; done"}
	start := func() (*ptytest.Run, string) {
		cmd := osexec.Command(filepath.Join(binDir, "spindle"), args...)
		cmd.Env = env
		r := ptytest.Start(t, cmd)
		r.WaitFor("ready ")
		r.WaitFor("\r\n")
		_, rest, _ := strings.Cut(r.Output(), "ready ")
		agent, _, _ := strings.Cut(rest, "\r\n")
		return r, agent
	}
	r, first := start()
	r.Type("\r")
	r.WaitFor("24 80\r\n")
	r.Resize(30, 100)
	// The new size travels apart from what is typed: ask until it shows.
	for i := 0; !strings.Contains(r.Output(), "30 100"); i++ {
		if i == 500 {
			t.Fatalf("the remote terminal never took the new size:\n%q", r.Output())
		}
		n := strings.Count(r.Output(), "\n")
		r.Type("\r")
		r.WaitForN("\n", n+2) // the echo, then stty's line
	}
	r.Type("~.")
	if code := r.ExitCode(); code != 255 {
		t.Errorf("~. through the daemon: exit %d, output:\n%q", code, r.Output())
	}
	r.WaitFor("spindle: connection to local closed (~.)")

	r, second := start()
	if second != first {
		t.Errorf("the second shell's agent is %q, the first's %q: want the same", second, first)
	}
	r.Type("\x04")
	if code := r.ExitCode(); code != 0 {
		t.Errorf("Ctrl-D: exit %d, want the remote shell's 0; output:\n%q", code, r.Output())
	}
}

// ~^Z suspends the CLI as a job of the user's shell, the remote command
// running on; fg resumes it, raw again, and the session goes on. (The CLI
// runs under an interactive bash with job control: in a process group
// with no such shell above it, the kernel discards the stop.)
// The same through the daemon (--persist).
func TestShellEscapeSuspend(t *testing.T) {
	t.Run("direct", func(t *testing.T) { testShellEscapeSuspend(t, os.Environ(), "") })
	t.Run("persist", func(t *testing.T) { testShellEscapeSuspend(t, persistEnv(t), "--persist 1m ") })
}

func testShellEscapeSuspend(t *testing.T, env []string, flags string) {
	bash, err := osexec.LookPath("bash")
	testkit.Need(t, err == nil, "no bash for job control (package bash)")
	cmd := osexec.Command(bash, "--norc", "--noprofile", "-i")
	cmd.Env = append(env, "PS1=prompt$ ", "TERM=dumb")
	r := ptytest.Start(t, cmd)
	r.WaitFor("prompt$ ")
	r.Type(filepath.Join(binDir, "spindle") + " shell " + flags + "local -- sh -c 'echo ready; exec cat'\r")
	r.WaitFor("ready\r\n")
	r.Type("one\r")
	r.WaitFor("one\r\none\r\n")
	r.Type("~\x1a")
	r.WaitFor("Stopped")
	r.WaitForN("prompt$ ", 2)
	r.Type("fg\r")
	r.WaitRaw()
	r.Type("two\r")
	r.WaitFor("two\r\ntwo\r\n") // raw again: the remote terminal's echo, then cat's
	r.Type("~.")
	r.WaitFor("closed (~.)")
	r.WaitForN("prompt$ ", 3)
	r.Type("echo status=$?\r")
	r.WaitFor("status=255")
	r.Type("exit\r")
	if code := r.ExitCode(); code != 0 {
		t.Errorf("bash exited %d; output:\n%q", code, r.Output())
	}
}
