package integration_test

import (
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/ptytest"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
)

// TestCLIPersist: `spindle run --persist` against a real sshd. The first
// run connects through the daemon, which asks the host-key question on
// the terminal of the command (a pty here); the next runs share its
// connection and agent without a question; when that agent is killed,
// the next run connects again by itself.
func TestCLIPersist(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	bin := buildCLI(t)
	rt := sshtest.TempDir(t, "persist-")
	t.Cleanup(func() { stopDaemons(rt) })
	env := []string{"XDG_RUNTIME_DIR=" + rt}
	known := filepath.Join(rt, "known_hosts")
	os.WriteFile(known, nil, 0o600)
	target := fmt.Sprintf("ssh:%s@127.0.0.1:%d", tg.u.Name, tg.s.Port)
	args := []string{"-F", "none", "-i", tg.key.Path, "-o", "IdentitiesOnly=yes", "-o", "UserKnownHostsFile=" + known,
		"run", "--persist", "1m", target, "--", "sh", "-c", "echo agent=$PPID"}

	cmd := osexec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	r := ptytest.Start(t, cmd)
	r.WaitFor("(yes/no")
	r.Type("yes\r")
	first := agentPID(t, r.WaitForMatch(regexp.MustCompile(`agent=\d+\r?\n`))[0])
	if code := r.ExitCode(); code != 0 {
		t.Fatalf("first run: exit %d:\n%s", code, r.Output())
	}
	if b, _ := os.ReadFile(known); !strings.Contains(string(b), "127.0.0.1") {
		t.Errorf("the accepted host key is not in known_hosts: %q", b)
	}

	out, errs, code := cliEnv(t, bin, env, args...)
	if code != 0 || agentPID(t, out) != first {
		t.Fatalf("second run: exit %d, %q (stderr %q); want the first run's agent %d", code, out, errs, first)
	}

	syscall.Kill(first, syscall.SIGKILL)
	out, errs, code = cliEnv(t, bin, env, args...)
	if code != 0 {
		logs, _ := filepath.Glob(filepath.Join(rt, "spindle-daemon", "*.log"))
		var b []byte
		if len(logs) > 0 {
			b, _ = os.ReadFile(logs[0])
		}
		t.Fatalf("after the agent was killed: exit %d, stdout %q, stderr:\n%s\ndaemon log:\n%s", code, out, errs, b)
	}
	if again := agentPID(t, out); again == first {
		t.Errorf("after the agent was killed the command ran on %d again", again)
	}
}

// agentPID reads "agent=PID" from out.
func agentPID(t *testing.T, out string) int {
	t.Helper()
	_, v, ok := strings.Cut(out, "agent=")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(v, "\n", 2)[0]))
	if !ok || err != nil {
		t.Fatalf("no agent=PID in %q", out)
	}
	return pid
}

// stopDaemons stops the spindle daemons whose sockets are under the
// runtime dir rt, through the pid files beside them.
func stopDaemons(rt string) {
	pids, _ := filepath.Glob(filepath.Join(rt, "spindle-daemon", "*.pid"))
	for _, f := range pids {
		if b, err := os.ReadFile(f); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGTERM)
			}
		}
	}
}

// A password typed on the terminal, as a user types it: not echoed,
// asked again after a typo ("Permission denied, please try again."),
// directly and through the daemon (whose prompts the command's terminal
// answers).
func TestCLIPasswordTyped(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	bin := buildCLI(t)
	rt := sshtest.TempDir(t, "password-")
	t.Cleanup(func() { stopDaemons(rt) })
	target := fmt.Sprintf("ssh:%s@127.0.0.1:%d", tg.u.Name, tg.s.Port)
	for _, persist := range [][]string{nil, {"--persist", "1m"}} {
		t.Run(fmt.Sprintf("persist=%v", persist != nil), func(t *testing.T) {
			args := append([]string{"-F", "none", "-o", "PreferredAuthentications=password", "-o", "UserKnownHostsFile=" + tg.kh,
				"run"}, persist...)
			cmd := osexec.Command(bin, append(args, target, "--", "echo", "logged in")...)
			cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
			r := ptytest.Start(t, cmd)
			r.WaitFor("'s password: ")
			r.Type("typo-secret\r")
			r.WaitFor("Permission denied, please try again.")
			r.WaitForN("'s password: ", 2)
			r.Type(tg.u.Password + "\r")
			r.WaitFor("logged in")
			if code := r.ExitCode(); code != 0 {
				t.Fatalf("exit %d:\n%s", code, r.Output())
			}
			if out := r.Output(); strings.Contains(out, "typo-secret") || strings.Contains(out, tg.u.Password) {
				t.Errorf("a password was echoed:\n%q", out)
			}
		})
	}
}

// -K: the become password typed on the terminal (not echoed) for a sudo
// that wants the user's password, directly and through the daemon.
func TestCLIBecomePasswordTyped(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	sudoers(t, tg.u.Name+" ALL=(ALL:ALL) ALL")
	bin := buildCLI(t)
	rt := sshtest.TempDir(t, "become-")
	t.Cleanup(func() { stopDaemons(rt) })
	target := fmt.Sprintf("ssh:%s@127.0.0.1:%d,sudo", tg.u.Name, tg.s.Port)
	for _, persist := range [][]string{nil, {"--persist", "1m"}} {
		t.Run(fmt.Sprintf("persist=%v", persist != nil), func(t *testing.T) {
			args := append([]string{"-F", "none", "-i", tg.key.Path, "-o", "IdentitiesOnly=yes", "-o", "UserKnownHostsFile=" + tg.kh,
				"-K", "run"}, persist...)
			cmd := osexec.Command(bin, append(args, target, "--", "id", "-un")...)
			cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
			r := ptytest.Start(t, cmd)
			r.WaitFor("BECOME password: ")
			r.Type(tg.u.Password + "\r")
			r.WaitFor("root")
			if code := r.ExitCode(); code != 0 {
				t.Fatalf("exit %d:\n%s", code, r.Output())
			}
			if strings.Contains(r.Output(), tg.u.Password) {
				t.Errorf("the become password was echoed:\n%q", r.Output())
			}
		})
	}
}
