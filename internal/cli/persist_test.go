package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/daemon"
)

// persistEnv is an environment whose daemon is the test's own: its socket
// goes in a runtime dir of the test's, and the daemon is killed at the
// end (through the pid file beside its socket).
func persistEnv(t *testing.T) []string {
	env, _ := persistEnvDir(t)
	return env
}

// persistEnvDir is persistEnv, and the runtime dir in it.
func persistEnvDir(t *testing.T) (env []string, rt string) {
	t.Helper()
	rt = t.TempDir()
	t.Cleanup(func() { daemon.StopAll(rt) })
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") && !strings.HasPrefix(kv, PersistEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_RUNTIME_DIR="+rt), rt
}

// spindleEnv runs the built CLI with env and stdin; it fails t after a
// minute rather than hang.
func spindleEnv(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return spindleIn(t, "", env, stdin, args...)
}

// spindleIn is spindleEnv run in the directory dir.
func spindleIn(t *testing.T, dir string, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return commandIn(t, dir, env, stdin, filepath.Join(binDir, "spindle"), args...)
}

// commandIn runs program with args in dir with env and stdin; it fails t
// after a minute rather than hang.
func commandIn(t *testing.T, dir string, env []string, stdin, program string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := osexec.Command(program, args...)
	cmd.Env, cmd.Dir = env, dir
	var out, errb bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errb
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Run()
	var ee *osexec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %.200q: %v", program, args, err)
	}
	return out.String(), errb.String(), code
}

// Two runs with --persist share one agent (the command's parent); a run
// without it has its own. Streams and exit statuses pass as without.
func TestPersistReusesTheConnection(t *testing.T) {
	env := persistEnv(t)
	parent := []string{"--", "sh", "-c", "echo $PPID"}
	// -v shows what the daemon did for the command, as it would show the
	// connection without it.
	first, errs, code := spindleEnv(t, env, "", append([]string{"-v", "run", "--persist", "1m", "local"}, parent...)...)
	if code != 0 || !strings.Contains(errs, "through the daemon") || !strings.Contains(errs, "daemon: connected") {
		t.Fatalf("first run: exit %d, stderr:\n%s", code, errs)
	}
	second, errs, _ := spindleEnv(t, env, "", append([]string{"-v", "run", "--persist", "1m", "local"}, parent...)...)
	if first == "" || second != first {
		t.Errorf("the agent of the second run is %q, of the first %q: want the same", second, first)
	}
	if !strings.Contains(errs, "daemon: reusing the connection") {
		t.Errorf("second run's -v does not say it reused the connection:\n%s", errs)
	}
	alone, _, _ := spindleEnv(t, env, "", append([]string{"run", "local"}, parent...)...)
	if alone == first {
		t.Errorf("a run without --persist used the daemon's agent %q", alone)
	}
	// SPINDLE_PERSIST does what --persist does.
	viaEnv, _, _ := spindleEnv(t, append(env, PersistEnv+"=1m"), "", append([]string{"run", "local"}, parent...)...)
	if viaEnv != first {
		t.Errorf("with %s the agent is %q, want the daemon's %q", PersistEnv, viaEnv, first)
	}

	out, errs, code := spindleEnv(t, env, "in\n", "run", "--persist", "1m", "local", "--", "sh", "-c", "cat; echo err >&2; exit 3")
	if out != "in\n" || errs != "err\n" || code != 3 {
		t.Errorf("stdin to stdout, stderr, exit: %q, %q, %d; want \"in\\n\", \"err\\n\", 3", out, errs, code)
	}
	_, errs, code = spindleEnv(t, env, "", "run", "--persist", "1m", "local", "--", "no-such-command-here")
	if code != 127 || !strings.Contains(errs, "no-such-command-here") {
		t.Errorf("a missing command: exit %d, stderr %q; want 127 and its name", code, errs)
	}
}

// Ctrl-C on a command run through the daemon kills the remote process and
// exits 130, as without.
func TestPersistSignal(t *testing.T) {
	cmd, pid := startSleep(t, persistEnv(t), nil)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *osexec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("after SIGINT: %v, want exit status 130", err)
	}
	pollUntil(t, "the remote process killed", func() bool { return syscall.Kill(pid, 0) != nil })
}

// startSleep starts `spindle run --persist` of a remote sleep with env,
// its stderr to stderr (if not nil), and returns once the remote shell
// runs, with its pid. The CLI is killed after a minute at the latest.
func startSleep(t *testing.T, env []string, stderr io.Writer) (*osexec.Cmd, int) {
	t.Helper()
	cmd := osexec.Command(filepath.Join(binDir, "spindle"), "run", "--persist", "1m", "local", "--",
		"sh", "-c", "echo $$; exec sleep 60")
	cmd.Env, cmd.Stderr = env, stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	t.Cleanup(func() { timer.Stop() })
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		t.Fatalf("remote pid: %q, %v", line, err)
	}
	return cmd, pid
}

// pollUntil checks cond every 10 ms until it holds, and fails t after 20 s.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("not %s after 20 s", what)
		}
	}
}

// The daemon exits once idle for the persist time, and removes its socket.
func TestPersistIdleExit(t *testing.T) {
	env, rt := persistEnvDir(t)
	if _, errs, code := spindleEnv(t, env, "", "run", "--persist", "200ms", "local", "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	pollUntil(t, "the daemon's socket, pid file and empty log removed after a 200 ms persist", func() bool {
		left, _ := filepath.Glob(filepath.Join(rt, "spindle-daemon", "*"))
		return len(left) == 0
	})
	if fi, err := os.Stat(filepath.Join(rt, "spindle-daemon")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("daemon dir: %v, %v; want mode 0700", fi.Mode(), err)
	}
}

// A daemon log grown past its limit is moved aside when a daemon starts
// on it: the old lines in FILE.1, the file itself fresh (and, with
// nothing logged, removed at exit).
func TestDaemonLogRotated(t *testing.T) {
	env, rt := persistEnvDir(t)
	dir := filepath.Join(rt, "logs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "daemon.log")
	old := strings.Repeat("an old line\n", maxDaemonLog/12+1)
	if err := os.WriteFile(logFile, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := spindleEnv(t, env, "", "daemon", "--socket", filepath.Join(dir, "d.sock"), "--log", logFile, "--idle", "1ms"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(logFile + ".1"); err != nil || string(b) != old {
		t.Fatalf("the old log was not kept as %s.1: %d bytes, %v", logFile, len(b), err)
	}
	if _, err := os.Stat(logFile); !os.IsNotExist(err) {
		t.Errorf("the fresh, empty log is still there: %v", err)
	}
	// Below the limit, a log is appended to.
	if err := os.WriteFile(logFile, []byte("small\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := spindleEnv(t, env, "", "daemon", "--socket", filepath.Join(dir, "d.sock"), "--log", logFile, "--idle", "1ms"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(logFile); err != nil || !strings.HasPrefix(string(b), "small\n") {
		t.Fatalf("a small log was not kept: %q, %v", b, err)
	}
}

// In one process, under -race: clients at once share the daemon's one
// connection, each with its own streams and exit status.
func TestPersistConcurrentClients(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	socket, err := daemonSocket()
	if err != nil {
		t.Fatal(err)
	}
	d, served := serveDaemon(t, socket)
	const clients = 6
	outs := make([]string, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out, errb bytes.Buffer
			g := &globals{stdin: strings.NewReader(fmt.Sprint(i)), stdout: &out, stderr: &errb, persist: time.Minute, timeout: time.Minute}
			handled, err := g.runPersistent("local", []string{"sh", "-c", `read n; echo "$n $PPID"; exit $n`}, persistOpts{})
			if !handled {
				err = errors.New("not handled")
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != i {
				errs[i] = fmt.Errorf("client %d: %v (stderr %q), want exit %d", i, err, errb.String(), i)
			}
			outs[i] = out.String()
		}()
	}
	wg.Wait()
	agent := ""
	for i := range clients {
		if errs[i] != nil {
			t.Error(errs[i])
			continue
		}
		n, pid, _ := strings.Cut(strings.TrimSpace(outs[i]), " ")
		if n != fmt.Sprint(i) || (agent != "" && pid != agent) {
			t.Errorf("client %d printed %q; want its number and the one agent %s", i, outs[i], agent)
		}
		agent = pid
	}
	d.Stop()
	if err := <-served; err != nil {
		t.Errorf("daemon: %v", err)
	}
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after the daemon stopped: %v", err)
	}
}

// Stopping the daemon (SIGTERM, through its pid file) ends the commands
// it runs, remote processes included, and their clients say so.
func TestPersistDaemonStopped(t *testing.T) {
	env, rt := persistEnvDir(t)
	var errb bytes.Buffer
	cmd, pid := startSleep(t, env, &errb)
	daemon.StopAll(rt)
	err := cmd.Wait()
	var ee *osexec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.HasPrefix(errb.String(), "spindle: ") {
		t.Errorf("client of a stopped daemon: %v, stderr %q; want a failure saying why", err, errb.String())
	}
	pollUntil(t, "the remote process killed", func() bool { return syscall.Kill(pid, 0) != nil })
}

// serveDaemon runs a daemon in this process on socket, as `spindle
// daemon` does, and returns once it serves; served reports how its run
// ended.
func serveDaemon(t *testing.T, socket string) (d *daemon.Server, served chan error) {
	t.Helper()
	ready, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	d = daemon.NewServer(daemon.Options{Socket: socket, Idle: time.Minute, Ready: w})
	h := &daemonHandler{reg: daemon.NewRegistry(), logOut: io.Discard}
	served = make(chan error, 1)
	go func() {
		defer h.reg.Close()
		served <- d.Serve(&daemon.CLIEndpoint{Handle: h.handle})
	}()
	if line, err := bufio.NewReader(ready).ReadString('\n'); line != "ok\n" {
		t.Fatalf("daemon: %q, %v", line, err)
	}
	return d, served
}

// spindle daemon --stop stops this environment's daemon (its kept agent
// goes with it), and says so when none runs.
func TestDaemonStop(t *testing.T) {
	env := persistEnv(t)
	agent, _, code := spindleEnv(t, env, "", "run", "--persist", "1m", "local", "--", "sh", "-c", "echo $PPID")
	pid, err := strconv.Atoi(strings.TrimSpace(agent))
	if code != 0 || err != nil {
		t.Fatalf("run: exit %d, %q", code, agent)
	}
	_, errs, code := spindleEnv(t, env, "", "daemon", "--stop")
	if code != 0 || !strings.Contains(errs, "stopped") {
		t.Fatalf("daemon --stop: exit %d, %q", code, errs)
	}
	pollUntil(t, "the kept agent gone", func() bool { return syscall.Kill(pid, 0) != nil })
	_, errs, code = spindleEnv(t, env, "", "daemon", "--stop")
	if code != 0 || !strings.Contains(errs, "no daemon runs") {
		t.Errorf("daemon --stop again: exit %d, %q", code, errs)
	}
}

// spindle cp --persist copies through the daemon's connection both ways,
// with local paths relative to the command's directory (the daemon's is
// /), and one connection serves the copies and a run.
func TestCpPersist(t *testing.T) {
	env, rt := persistEnvDir(t)
	here, there := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(here, "a.txt"), []byte("payload\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	steps := [][]string{
		{"-v", "cp", "--persist", "1m", "./a.txt", "local:" + there + "/b.txt"},
		{"cp", "--persist", "1m", "-p", "local:" + there + "/b.txt", "c.txt"},
		{"run", "--persist", "1m", "local", "--", "true"},
	}
	for _, args := range steps {
		if _, errs, code := spindleIn(t, here, env, "", args...); code != 0 {
			t.Fatalf("spindle %v: exit %d: %s", args, code, errs)
		}
	}
	if b, err := os.ReadFile(filepath.Join(here, "c.txt")); string(b) != "payload\n" {
		t.Errorf("after the round trip: %q, %v", b, err)
	}
	_, errs, code := spindleIn(t, here, env, "", "cp", "--persist", "1m", "./missing", "local:"+there+"/")
	if code != 1 || !strings.Contains(errs, "missing") {
		t.Errorf("a missing source: exit %d, %q; want 1 naming it", code, errs)
	}
	logs, _ := filepath.Glob(filepath.Join(rt, "spindle-daemon", "*.log"))
	if len(logs) != 1 {
		t.Fatalf("daemon logs: %v", logs)
	}
	b, _ := os.ReadFile(logs[0])
	if n := strings.Count(string(b), "daemon: connected"); n != 1 {
		t.Errorf("the daemon connected %d times for two copies and a run, want once; its log:\n%s", n, b)
	}
}
