package exec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/spindle-rpc/spindle/internal/pyrunner"
	"github.com/spindle-rpc/spindle/internal/testkit/ansiballz"
)

// pyRun is one module run's outcome.
type pyRun struct {
	stdout, stderr string
	rc             int
}

// runModule runs a pipelined payload the way the Ansible endpoint does:
// the command Ansible sends, the zip as a stdin part, and with the
// runner when warm is set.
func runModule(t testing.TB, interp string, payload []byte, warm bool) pyRun {
	t.Helper()
	prefix, zip, suffix := ansiballz.Split(t, payload)
	sum := sha256.Sum256(zip)
	cmd := Cmd{
		Shell:      interp + " && sleep 0",
		StdinParts: []StdinPart{{Data: prefix}, {Data: zip, SHA256: sum[:]}, {Data: suffix}},
	}
	if warm {
		cmd.Python = &Python{Interpreter: interp, ZipPart: 1}
	}
	p, err := Start(context.Background(), newLocalCaller(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	var out, errb bytes.Buffer
	if err := p.CopyOutput(&out, &errb); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return pyRun{out.String(), errb.String(), res.ExitCode}
}

// runs is the number of forks of the live runners.
func runs() (n int64) {
	for _, s := range pyrunner.Default.Stats() {
		n += s.Runs
	}
	return n
}

var (
	payloadDir = regexp.MustCompile(`ansible_[A-Za-z0-9_.]+?_payload_[A-Za-z0-9_]+`)
	timeFields = regexp.MustCompile(`"(start|end|delta)": "[^"]*"`)
)

// normal removes what differs between any two runs of a module: its
// timestamps and the name of its temporary directory.
func normal(s string) string {
	return timeFields.ReplaceAllString(payloadDir.ReplaceAllString(s, "PAYLOAD"), `"$1": "T"`)
}

func modulePath(name string) string {
	p, _ := filepath.Abs(filepath.Join("testdata", "modules", name+".py"))
	return p
}

func TestPythonRunnerSameAsFresh(t *testing.T) {
	py := ansiballz.Python
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		module string
		args   map[string]any
		rc     int
	}{
		{"command", "command", map[string]any{"_raw_params": "echo out; echo err >&2", "_uses_shell": true}, 0},
		{"command fails", "command", map[string]any{"_raw_params": "false"}, 1},
		{"stat", "stat", map[string]any{"path": dir, "get_checksum": false}, 0},
		{"file", "file", map[string]any{"path": dir, "state": "directory"}, 0},
		{"bad arguments", "file", map[string]any{"state": "nonsense"}, 1},
		{"exception", modulePath("spindle_boom"), map[string]any{}, 1},
		{"exit", modulePath("spindle_exit"), map[string]any{"path": filepath.Join(dir, "exit")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := ansiballz.Payload(t, tc.module, tc.args, py)
			before := runs()
			warm := runModule(t, py, payload, true)
			if runs() != before+1 {
				t.Fatalf("the run did not go through the runner (forks %d, then %d)", before, runs())
			}
			if tc.name == "exit" {
				// What the run left for its exit was done. A file
				// left open is flushed too, which a fresh
				// interpreter does only when its teardown reaches it
				// (not for a global of a module run by AnsiballZ).
				for ext, want := range map[string]string{".buffered": "flushed at exit\n", ".thread": "joined at exit\n", ".atexit": "atexit ran\n"} {
					if b, err := os.ReadFile(filepath.Join(dir, "exit"+ext)); err != nil || string(b) != want {
						t.Errorf("%s: %q, %v; want %q", ext, b, err, want)
					}
				}
			}
			fresh := runModule(t, py, payload, false)
			if warm.rc != tc.rc || fresh.rc != tc.rc {
				t.Errorf("rc %d warm, %d fresh; want %d\nwarm stderr: %s", warm.rc, fresh.rc, tc.rc, warm.stderr)
			}
			if normal(warm.stdout) != normal(fresh.stdout) {
				t.Errorf("stdout differs:\nwarm:  %s\nfresh: %s", warm.stdout, fresh.stdout)
			}
			if normal(warm.stderr) != normal(fresh.stderr) {
				t.Errorf("stderr differs:\nwarm:  %s\nfresh: %s", warm.stderr, fresh.stderr)
			}
			if tc.name == "exception" && !strings.Contains(warm.stderr, "RuntimeError: boom") {
				t.Errorf("no traceback in stderr: %q", warm.stderr)
			}
			if tc.name == "exit" && (!strings.Contains(warm.stdout, "atexit output") || warm.stderr != "exit message\n") {
				t.Errorf("exit: stdout %q, stderr %q", warm.stdout, warm.stderr)
			}
		})
	}
}

// TestPythonRunnerIsolation runs a module that leaves behind everything
// it can, then one that reports: through the runner, the report must be
// what a fresh interpreter gives.
func TestPythonRunnerIsolation(t *testing.T) {
	py := ansiballz.Python
	mark := filepath.Join(t.TempDir(), "mark")
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	leak := ansiballz.Payload(t, modulePath("spindle_leak"), map[string]any{"mark": mark}, py)
	report := ansiballz.Payload(t, modulePath("spindle_report"), map[string]any{}, py)

	fresh := runModule(t, py, report, false)
	before := runs()
	if r := runModule(t, py, leak, true); r.rc != 0 {
		t.Fatalf("leak: rc %d: %s %s", r.rc, r.stdout, r.stderr)
	}
	warm := runModule(t, py, report, true)
	if runs() != before+2 {
		t.Fatalf("the runs did not go through the runner (forks %d, then %d)", before, runs())
	}
	if warm.rc != 0 || fresh.rc != 0 {
		t.Fatalf("report: rc %d warm, %d fresh: %s %s", warm.rc, fresh.rc, warm.stderr, fresh.stderr)
	}
	var w, f map[string]any
	if err := json.Unmarshal([]byte(warm.stdout), &w); err != nil {
		t.Fatal(err, warm.stdout)
	}
	if err := json.Unmarshal([]byte(fresh.stdout), &f); err != nil {
		t.Fatal(err, fresh.stdout)
	}
	for k, fv := range f {
		if k == "invocation" {
			continue
		}
		if fmt.Sprint(w[k]) != fmt.Sprint(fv) && normal(fmt.Sprint(w[k])) == normal(fmt.Sprint(fv)) {
			continue // the module's own temporary directory
		}
		if !reflect.DeepEqual(w[k], fv) {
			t.Errorf("%s: %v after spindle_leak in the runner, %v in a fresh interpreter", k, w[k], fv)
		}
	}
	for _, k := range []string{"basic_leak", "json_leak", "builtins_leak", "path_leak"} {
		if w[k] != false {
			t.Errorf("%s leaked: %v", k, w[k])
		}
	}
	// The hook ran once, when the leaking module exited, as it would have
	// in its own interpreter; the report's exit did not run it again.
	got, err := os.ReadFile(mark)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), "atexit "); n != 1 {
		t.Errorf("the atexit hook ran %d times, want 1: %q", n, got)
	}
}

func TestPythonRunnerRestartedAfterKill(t *testing.T) {
	py := ansiballz.Python
	payload := ansiballz.Payload(t, "command", map[string]any{"_raw_params": "echo hi"}, py)
	if r := runModule(t, py, payload, true); r.rc != 0 {
		t.Fatalf("rc %d: %s", r.rc, r.stderr)
	}
	pids := map[int]bool{}
	// What modules.Runners reports (package modules imports exec; the
	// ansiballz tests call it on an agent).
	for _, s := range pyrunner.Default.Stats() {
		pids[s.Pid] = true
		if s.RSS <= 0 || s.Interpreter != py || s.Runs < 1 || !slices.Contains(s.Preloaded, "ansible.module_utils.basic") {
			t.Errorf("runner %d: reported as %+v", s.Pid, s)
		}
		t.Logf("runner %d of %s: %d KiB resident, %d runs", s.Pid, s.Interpreter, s.RSS>>10, s.Runs)
		if err := syscall.Kill(s.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	if len(pids) == 0 {
		t.Fatal("no runner")
	}
	r := runModule(t, py, payload, true)
	if r.rc != 0 || !strings.Contains(r.stdout, `"stdout": "hi"`) {
		t.Fatalf("after the kill: rc %d: %s %s", r.rc, r.stdout, r.stderr)
	}
	var fresh bool
	for _, s := range pyrunner.Default.Stats() {
		if pids[s.Pid] {
			t.Errorf("killed runner %d still listed", s.Pid)
		}
		fresh = fresh || s.Runs == 1
	}
	if !fresh {
		t.Errorf("the run after the kill did not go through a new runner: %+v", pyrunner.Default.Stats())
	}
}

// TestPythonRunnerFallback: an interpreter without os.fork cannot host a
// runner; the command runs as sent, with the same result.
func TestPythonRunnerFallback(t *testing.T) {
	dir := t.TempDir()
	site := filepath.Join(dir, "site")
	if err := os.Mkdir(site, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site, "sitecustomize.py"), []byte("import os\ndel os.fork\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nofork := filepath.Join(dir, "python3-nofork")
	if err := os.WriteFile(nofork, []byte("#!/bin/sh\nPYTHONPATH="+site+" exec "+ansiballz.Python+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	payload := ansiballz.Payload(t, "command", map[string]any{"_raw_params": "echo hi"}, nofork)
	before := runs()
	warm := runModule(t, nofork, payload, true)
	fresh := runModule(t, nofork, payload, false)
	if warm.rc != 0 || !strings.Contains(warm.stdout, `"stdout": "hi"`) || normal(warm.stdout) != normal(fresh.stdout) {
		t.Errorf("without os.fork: rc %d: %s %s\nfresh: %s", warm.rc, warm.stdout, warm.stderr, fresh.stdout)
	}
	if runs() != before {
		t.Error("a runner forked for an interpreter without os.fork")
	}
	missing := filepath.Join(dir, "python-missing")
	r := runModule(t, missing, payload, true)
	if r.rc != 127 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("a missing interpreter: rc %d, stderr %q; want the shell's 127", r.rc, r.stderr)
	}
}

// BenchmarkPythonModule is a pipelined `command: hostname` run on the
// agent (no link): in a fork of the warm runner, and in a fresh
// interpreter as Ansible starts it.
func BenchmarkPythonModule(b *testing.B) {
	py := ansiballz.Python
	payload := ansiballz.Payload(b, "command", map[string]any{"_raw_params": "hostname"}, py)
	for _, warm := range []bool{true, false} {
		name := "fresh"
		if warm {
			name = "runner"
		}
		b.Run(name, func(b *testing.B) {
			runModule(b, py, payload, warm)
			for b.Loop() {
				if r := runModule(b, py, payload, warm); r.rc != 0 {
					b.Fatal(r.stderr)
				}
			}
		})
	}
}
