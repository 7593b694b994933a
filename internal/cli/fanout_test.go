package cli

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Lines of several writers interleave whole, each with its prefix; a
// line written in pieces is one line, and a last unterminated one is
// written at Close.
func TestLineWriter(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	a := &lineWriter{mu: &mu, out: &out, prefix: "a: "}
	b := &lineWriter{mu: &mu, out: &out, prefix: "b: "}
	a.Write([]byte("one "))
	b.Write([]byte("x\ny\n"))
	a.Write([]byte("line\ntwo\nthr"))
	b.Write([]byte("no newline"))
	a.Write([]byte("ee\n"))
	a.Close()
	b.Close()
	want := "b: x\nb: y\na: one line\na: two\na: three\nb: no newline\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// A line's control characters are escaped unless raw: nothing a target
// prints moves the cursor over a prefix.
func TestLineWriterEscapes(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	w := &lineWriter{mu: &mu, out: &out, prefix: "a: "}
	w.Write([]byte("x\rb: forged\x1b[1A\tü\r\nlast\r"))
	w.Close()
	if want := "a: x\\rb: forged\\x1b[1A\tü\r\na: last\\r\n"; out.String() != want {
		t.Errorf("escaped: %q, want %q", out.String(), want)
	}
	out.Reset()
	w = &lineWriter{mu: &mu, out: &out, prefix: "a: ", raw: true}
	w.Write([]byte("x\rb: raw\x1b[1A\n"))
	w.Close()
	if want := "a: x\rb: raw\x1b[1A\n"; out.String() != want {
		t.Errorf("raw: %q, want %q", out.String(), want)
	}
}

// spindle run T1 T2 -- CMD: every target's lines, prefixed; the largest
// exit status; a target that cannot be reached is 255 and listed, the
// others still run.
func TestE2ERunMany(t *testing.T) {
	// local,local: an agent started by the first one (a route shared).
	out, errs, code := spindleCmd(t, "ignored", "run", "local", "local,local", "--", "sh", "-c", `echo "out $PPID"; echo err >&2; read x || echo "stdin closed"; exit 3`)
	if code != 3 {
		t.Errorf("exit %d, want 3; stderr:\n%s", code, errs)
	}
	for _, want := range []string{"local: out ", "local,local: out ", "local: stdin closed\n", "local,local: stdin closed\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, "local: err\n") || !strings.Contains(errs, "local,local: err\n") ||
		!strings.Contains(errs, "2 of 2 targets failed: local (exit 3), local,local (exit 3)") {
		t.Errorf("stderr:\n%s", errs)
	}

	out, errs, code = spindleCmd(t, "", "--timeout", "10s", "run", "--fanout", "1", "ssh:nobody@127.0.0.1:1", "local", "--", "echo", "hi")
	if code != 255 || out != "local: hi\n" || !strings.Contains(errs, "spindle: ssh:nobody@127.0.0.1:1: ") ||
		!strings.Contains(errs, "1 of 2 targets failed: ssh:nobody@127.0.0.1:1 (not reached)") {
		t.Errorf("an unreachable target: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}

	// --group: each distinct output once, with its exit status, under its
	// targets. The agent's parent is the CLI for local, an agent beyond.
	out, errs, code = spindleCmd(t, "", "run", "--group", "local", "local,local", "local,local,local", "--", "sh", "-c",
		`p=$(cut -d" " -f4 /proc/$PPID/stat); if [ "$(cat /proc/$p/comm)" = spindle ]; then echo "started by the CLI"; exit 4; fi; echo "started by an agent"`)
	want := "==== local (exit 4) ====\nstarted by the CLI\n==== local,local local,local,local (2 targets) ====\nstarted by an agent\n"
	if code != 4 || out != want || !strings.Contains(errs, "1 of 3 targets failed: local (exit 4)") {
		t.Errorf("--group: exit %d, stdout\n%s\nwant\n%s\nstderr:\n%s", code, out, want, errs)
	}

	// @FILE and @- (stdin) list targets; # starts a comment.
	list := filepath.Join(t.TempDir(), "targets")
	if err := os.WriteFile(list, []byte("# web tier\nlocal   # the first\n\nlocal,local\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code = spindleCmd(t, "", "run", "@"+list, "--", "echo", "hi")
	if code != 0 || out != "local: hi\nlocal,local: hi\n" && out != "local,local: hi\nlocal: hi\n" {
		t.Errorf("@FILE: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	out, errs, code = spindleCmd(t, "local,local\n", "run", "@-", "--", "echo", "hi")
	if code != 0 || out != "local,local: hi\n" {
		t.Errorf("@-: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	// --stdin: every command reads a copy of standard input; @- cannot
	// take it then.
	out, errs, code = spindleCmd(t, "two\nlines\n", "run", "--stdin", "local", "local,local", "--", "wc", "-l")
	if code != 0 || sorted(out) != sorted("local: 2\nlocal,local: 2\n") {
		t.Errorf("--stdin: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if _, errs, code := spindleCmd(t, "local\n", "run", "--stdin", "@-", "--", "true"); code != 2 || !strings.Contains(errs, "--stdin") {
		t.Errorf("--stdin with @-: exit %d, stderr:\n%s", code, errs)
	}

	empty := filepath.Join(t.TempDir(), "none")
	os.WriteFile(empty, []byte("# nothing\n"), 0o600)

	for _, bad := range [][]string{
		{"run", "@" + empty, "--", "true"},
		{"run", "@" + empty + ".missing", "--", "true"},
		{"run", "local", "local", "--"},
		{"run", "-L", "8080:localhost:80", "local", "local", "--", "true"},
		{"run", "--fanout", "0", "local", "local", "--", "true"},
	} {
		if _, errs, code := spindleCmd(t, "", bad...); code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage); stderr:\n%s", bad, code, errs)
		}
	}
}

// Ctrl-C on a run over several targets ends it with 130 and kills every
// remote command, with no failure summary.
func TestE2ERunManySignal(t *testing.T) {
	t.Run("direct", func(t *testing.T) { testRunManySignal(t, nil) })
	t.Run("persist", func(t *testing.T) { testRunManySignal(t, persistEnv(t), "--persist", "1m") })
}

func testRunManySignal(t *testing.T, env []string, flags ...string) {
	args := append(append([]string{"run"}, flags...), "local", "local,local", "--", "sh", "-c", "echo $$; exec sleep 60")
	cmd := osexec.Command(filepath.Join(binDir, "spindle"), args...)
	cmd.Env = env
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	r := bufio.NewReader(out)
	var pids []int
	for len(pids) < 2 {
		line, err := r.ReadString('\n')
		_, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		pid, perr := strconv.Atoi(v)
		if err != nil || perr != nil {
			t.Fatalf("remote pid: %q, %v", line, err)
		}
		pids = append(pids, pid)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	var ee *osexec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("after SIGINT: %v, want exit status 130; stderr:\n%s", err, errb.String())
	}
	if strings.Contains(errb.String(), "targets failed") {
		t.Errorf("a failure summary after Ctrl-C:\n%s", errb.String())
	}
	for _, pid := range pids {
		pollUntil(t, "the remote process killed", func() bool { return syscall.Kill(pid, 0) != nil })
	}
}

// spindle run --persist over many targets: each runs through the daemon,
// on connections it keeps for the next run, and chains share their routes
// there as they do in one process: local,local,local's agent is started by
// local,local's, itself started by local's.
func TestPersistRunMany(t *testing.T) {
	env := persistEnv(t)
	args := []string{"run", "--persist", "1m", "local,local,local", "local,local", "local", "--", "sh", "-c",
		`echo "$PPID $(cut -d" " -f4 /proc/$PPID/stat)"; read x || echo "stdin closed"; echo err >&2`}
	first, errs, code := spindleEnv(t, env, "", args...)
	if code != 0 || strings.Count(errs, ": err\n") != 3 {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
	agent, parent := map[string]string{}, map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(first), "\n") {
		target, rest, _ := strings.Cut(line, ": ")
		if rest == "stdin closed" {
			continue
		}
		a, p, _ := strings.Cut(rest, " ")
		agent[target], parent[target] = a, p
	}
	if len(agent) != 3 || parent["local,local"] != agent["local"] || parent["local,local,local"] != agent["local,local"] ||
		strings.Count(first, "stdin closed\n") != 3 {
		t.Errorf("want one chain of agents, local's starting local,local's, starting local,local,local's; stdin closed everywhere:\n%s", first)
	}
	again, _, _ := spindleEnv(t, env, "", args...)
	if sorted(again) != sorted(first) {
		t.Errorf("a second run's agents:\n%s\nthe first's:\n%s", again, first)
	}

	out, errs, code := spindleEnv(t, env, "two\nlines\n", "run", "--persist", "1m", "--stdin", "local", "local,local", "--", "wc", "-l")
	if code != 0 || sorted(out) != sorted("local: 2\nlocal,local: 2\n") {
		t.Errorf("--stdin through the daemon: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}

	// --group, exit statuses and a target not reached, through the daemon
	// as without it.
	out, errs, code = spindleEnv(t, env, "", "--timeout", "10s", "run", "--persist", "1m", "--group",
		"ssh:nobody@127.0.0.1:1", "local", "local,local", "--", "sh", "-c", "echo hi; exit 3")
	want := "==== local local,local (2 targets) (exit 3) ====\nhi\n"
	if code != 255 || out != want || !strings.Contains(errs, "spindle: ssh:nobody@127.0.0.1:1: ") ||
		!strings.Contains(errs, "3 of 3 targets failed: local (exit 3), local,local (exit 3), ssh:nobody@127.0.0.1:1 (not reached)") {
		t.Errorf("exit %d, stdout\n%s\nwant\n%s\nstderr:\n%s", code, out, want, errs)
	}
}

// sorted is s's lines in order.
func sorted(s string) string {
	lines := strings.Split(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// With several targets, what the targets print reaches the terminal with
// its control characters escaped, on both streams and with --group;
// --raw passes them through, and so does a run on one target, as ssh
// does.
func TestE2ERunManyEscapesControls(t *testing.T) {
	const script = `printf 'ok\r\033[2Jdone\t\303\251\n'; printf 'err\033]0;title\007\n' >&2`
	const raw, escaped = "ok\r\x1b[2Jdone\té\n", `ok\r\x1b[2Jdone` + "\té\n"
	const rawErr, escapedErr = "err\x1b]0;title\a\n", `err\x1b]0;title\x07` + "\n"
	out, errs, code := spindleCmd(t, "", "run", "local", "local,local", "--", "sh", "-c", script)
	for _, tg := range []string{"local: ", "local,local: "} {
		if code != 0 || !strings.Contains(out, tg+escaped) || !strings.Contains(errs, tg+escapedErr) {
			t.Errorf("escaped: exit %d, stdout %q, stderr %q; want %q and %q for %s", code, out, errs, escaped, escapedErr, tg)
		}
	}
	out, errs, code = spindleCmd(t, "", "run", "--raw", "local", "local,local", "--", "sh", "-c", script)
	for _, tg := range []string{"local: ", "local,local: "} {
		if code != 0 || !strings.Contains(out, tg+raw) || !strings.Contains(errs, tg+rawErr) {
			t.Errorf("--raw: exit %d, stdout %q, stderr %q; want %q and %q for %s", code, out, errs, raw, rawErr, tg)
		}
	}
	out, errs, code = spindleCmd(t, "", "run", "--group", "local", "local,local", "--", "printf", `ok\r\033[2J\n`)
	if want := "==== local local,local (2 targets) ====\n" + `ok\r\x1b[2J` + "\n"; code != 0 || out != want {
		t.Errorf("--group: exit %d, stdout %q, want %q; stderr %q", code, out, want, errs)
	}
	out, errs, code = spindleCmd(t, "", "run", "local", "--", "sh", "-c", script)
	if code != 0 || out != raw || errs != rawErr {
		t.Errorf("one target: exit %d, stdout %q, stderr %q; want %q, %q", code, out, errs, raw, rawErr)
	}
}
