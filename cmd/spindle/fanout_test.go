package main

import (
	"bufio"
	"bytes"
	stdctx "context"
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

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/local"
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

// Chains that begin with the same hops get one context for them, however
// many ask at once.
func TestRoutesShared(t *testing.T) {
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	r := newRoutes(ctl)
	ctx := stdctx.Background()
	cxs := make([]*spindle.Context, 8)
	var wg sync.WaitGroup
	for i := range cxs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cx, err := r.connect(ctx, []spindle.Connector{local.Options{}}, []string{"local"})
			if err != nil {
				t.Error(err)
			}
			cxs[i] = cx
		}()
	}
	wg.Wait()
	if slices.ContainsFunc(cxs, func(cx *spindle.Context) bool { return cx == nil || cx != cxs[0] }) {
		t.Fatalf("eight connects of one route made several contexts: %v", cxs)
	}
	other, err := r.connect(ctx, []spindle.Connector{local.Options{ContextName: "local2"}}, []string{"local2"})
	if err != nil || other == cxs[0] {
		t.Fatalf("another route: %v, %v", other, err)
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
	cmd := osexec.Command(filepath.Join(binDir, "spindle"), "run", "local", "local,local", "--", "sh", "-c", "echo $$; exec sleep 60")
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
