package cli

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/ptytest"
)

// Ctrl-C or SIGTERM ends a command whose agent has stopped answering (it
// is SIGSTOPped: its link takes nothing, and no reply or end of output
// will come) with 128+signal, once the call is abandoned after
// context.CancelGrace, directly and through the daemon. ptytest's wait
// for the exit is the hang guard: without the abandonment, the CLI waits
// for the circuit's five-minute timeout.
func TestSignalEndsRunOfStoppedAgent(t *testing.T) {
	directAndPersist(t, func(t *testing.T, tc way) {
		t.Run("ctrl-c", func(t *testing.T) {
			r, _ := startStopped(t, tc.env(t), tc.flags)
			r.Type("\x03") // the terminal's SIGINT, to the CLI's process group (not the agent's)
			if code := r.ExitCode(); code != 130 {
				t.Errorf("Ctrl-C: exit status %d, want 130; output:\n%q", code, r.Output())
			}
		})
		t.Run("sigterm", func(t *testing.T) {
			r, cmd := startStopped(t, tc.env(t), tc.flags)
			cmd.Process.Signal(syscall.SIGTERM)
			if code := r.ExitCode(); code != 143 {
				t.Errorf("SIGTERM: exit status %d, want 143; output:\n%q", code, r.Output())
			}
		})
	})
}

// startStopped runs a remote sleep on a terminal, with flags, and stops
// the agent that runs it (the remote shell's parent) once it runs; the
// agent is killed when t ends.
func startStopped(t *testing.T, env, flags []string) (*ptytest.Run, *osexec.Cmd) {
	t.Helper()
	args := append(append([]string{"run"}, flags...), "local", "--", "sh", "-c", "echo agent=$PPID.; exec sleep 60")
	cmd := osexec.Command(filepath.Join(binDir, "spindle"), args...)
	cmd.Env = env
	r := ptytest.Start(t, cmd)
	m := r.WaitForMatch(regexp.MustCompile(`agent=(\d+)\.`))
	agent, err := strconv.Atoi(m[1])
	if err != nil || agent <= 1 {
		t.Fatalf("agent pid %q: %v", m[1], err)
	}
	if err := syscall.Kill(agent, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop the agent: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(agent, syscall.SIGKILL) })
	return r, cmd
}

// An agent that stops answering while its command runs fails the command
// by itself, once the keepalive -o ServerAliveInterval and
// ServerAliveCountMax set has gone unanswered (2 pings 1 s apart here), with ssh's
// 255 and a message that says why: directly and through the daemon.
func TestKeepaliveEndsRunOfStoppedAgent(t *testing.T) {
	ka := []string{"-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=2"}
	directAndPersist(t, func(t *testing.T, tc way) {
		r, _ := startStopped(t, tc.env(t), append(tc.flags, ka...))
		if code := r.ExitCode(); code != 255 {
			t.Errorf("exit status %d, want 255; output:\n%q", code, r.Output())
		}
		r.WaitFor("no answer to keepalives: its transport delivered nothing for 3s (2 keepalives 1s apart")
	})
}

// Ctrl-C on a command whose agent answers kills the remote process group
// and exits 130, directly and through the daemon.
func TestCtrlCKillsRemoteCommand(t *testing.T) {
	directAndPersist(t, func(t *testing.T, tc way) {
		args := append(append([]string{"run"}, tc.flags...), "local", "--", "sh", "-c", "echo remote=$$.; exec sleep 60")
		cmd := osexec.Command(filepath.Join(binDir, "spindle"), args...)
		cmd.Env = tc.env(t)
		r := ptytest.Start(t, cmd)
		m := r.WaitForMatch(regexp.MustCompile(`remote=(\d+)\.`))
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid <= 1 {
			t.Fatalf("remote pid %q: %v", m[1], err)
		}
		r.Type("\x03")
		if code := r.ExitCode(); code != 130 {
			t.Errorf("Ctrl-C: exit status %d, want 130; output:\n%q", code, r.Output())
		}
		pollUntil(t, "the remote command killed", func() bool { return syscall.Kill(pid, 0) != nil })
	})
}

// way is one way of running the CLI's commands: directly, or through the
// daemon (--persist). env gives the subtest's environment.
type way struct {
	name  string
	flags []string
	env   func(*testing.T) []string
}

// directAndPersist runs f as a subtest for each way.
func directAndPersist(t *testing.T, f func(t *testing.T, tc way)) {
	for _, tc := range []way{
		{"direct", nil, func(*testing.T) []string { return os.Environ() }},
		{"persist", []string{"--persist", "1m"}, persistEnv},
	} {
		t.Run(tc.name, func(t *testing.T) { f(t, tc) })
	}
}
