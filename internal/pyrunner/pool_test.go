package pyrunner

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit/ansiballz"
	"golang.org/x/sys/unix"
)

// run runs payload in a fork of p's runner for env and returns its
// output; the run must succeed.
func run(t *testing.T, p *Pool, payload []byte, env []string) string {
	t.Helper()
	_, zip, _ := ansiballz.Split(t, payload)
	out, rc := runSpec(t, p, Spec{Interpreter: ansiballz.Python, Env: env, Zip: zip}, payload)
	if rc != 0 {
		t.Fatalf("exit status %d: %s", rc, out)
	}
	return out
}

// runSpec runs spec in a fork of p's runner with stdin, and returns its
// output (stdout and stderr together) and exit status.
func runSpec(t *testing.T, p *Pool, spec Spec, stdin []byte) (string, int) {
	t.Helper()
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	defer outR.Close()
	proc, err := p.Start(context.Background(), spec, inR, outW, outW)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		t.Fatal(err)
	}
	go func() {
		inW.Write(stdin)
		inW.Close()
	}()
	out, _ := io.ReadAll(outR)
	st, err := proc.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return string(out), st.ExitStatus()
}

func pids(p *Pool) (out []int) {
	for _, s := range p.Stats() {
		out = append(out, s.Pid)
	}
	return out
}

func TestPoolBounds(t *testing.T) {
	payload := ansiballz.Payload(t, "command", map[string]any{"_raw_params": "echo hi"}, ansiballz.Python)
	env := os.Environ()

	p := &Pool{MaxRunners: 1}
	defer p.Close()
	if out := run(t, p, payload, env); !strings.Contains(out, `"stdout": "hi"`) {
		t.Fatalf("output %q", out)
	}
	first := pids(p)
	run(t, p, payload, append(env, "SPINDLE_OTHER=1")) // another environment: another runner
	if second := pids(p); len(first) != 1 || len(second) != 1 || second[0] == first[0] {
		t.Errorf("runners %v, then %v: want one, replaced", first, second)
	}

	small := &Pool{MaxRSS: 1}
	defer small.Close()
	for range 2 {
		run(t, small, payload, env)
		if left := pids(small); len(left) != 0 {
			t.Errorf("a runner past MaxRSS was kept: %v", left)
		}
	}
}

// TestEarlyStatus: a run reports its exit status itself before its
// teardown, and it is the status a fresh interpreter would exit with.
func TestEarlyStatus(t *testing.T) {
	p := &Pool{}
	defer p.Close()
	env := os.Environ()
	ok := ansiballz.Payload(t, "command", map[string]any{"_raw_params": "true"}, ansiballz.Python)
	failed := ansiballz.Payload(t, "command", map[string]any{"_raw_params": "false"}, ansiballz.Python)
	run(t, p, ok, env)
	_, zip, _ := ansiballz.Split(t, failed)
	if _, rc := runSpec(t, p, Spec{Interpreter: ansiballz.Python, Env: env, Zip: zip}, failed); rc != 1 {
		t.Fatalf("the failing module: exit status %d, want 1", rc)
	}
	stats := p.Stats()
	if len(stats) != 1 || stats[0].Runs != 2 || stats[0].EarlyStatuses != 2 {
		t.Fatalf("stats %+v: want one runner, two runs, both reported early", stats)
	}
}

// TestForkedAhead: a runner forks its next run while nothing runs, so
// the first run, asked for once the runner is up, was forked ahead.
func TestForkedAhead(t *testing.T) {
	p := &Pool{}
	defer p.Close()
	payload := ansiballz.Payload(t, "command", map[string]any{"_raw_params": "echo hi"}, ansiballz.Python)
	if out := run(t, p, payload, os.Environ()); !strings.Contains(out, `"stdout": "hi"`) {
		t.Fatalf("output %q", out)
	}
	if stats := p.Stats(); len(stats) != 1 || stats[0].Runs != 1 || stats[0].Ahead != 1 {
		t.Fatalf("stats %+v: want one runner whose one run was forked ahead", stats)
	}
	// The next one is forked once the run ended, and its memory is
	// reported beside the runner's.
	r := onlyRunner(p)
	spare := make(chan int, 1)
	go func() { spare <- r.nextSpare() }()
	select {
	case pid := <-spare:
		if pid == 0 {
			t.Fatal("the runner died before it forked its next run")
		}
	case <-time.After(time.Minute):
		t.Fatal("no next run forked ahead a minute after the run")
	}
	if stats := p.Stats(); len(stats) != 1 || stats[0].SpareRSS <= 0 {
		t.Fatalf("stats %+v: want the next run's memory", stats)
	}
}

// onlyRunner is p's one runner.
func onlyRunner(p *Pool) *runner {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.runners {
		return r
	}
	return nil
}

// runApart runs the script prefix+zip+suffix with its zip apart from
// its stdin (Spec.Apart), and returns its output and exit status.
func runApart(t *testing.T, p *Pool, prefix, zip, suffix []byte) (string, int) {
	t.Helper()
	spec := Spec{Interpreter: ansiballz.Python, Env: os.Environ(), Zip: zip, Apart: true, ZipAt: len(prefix)}
	return runSpec(t, p, spec, append(append([]byte{}, prefix...), suffix...))
}

// TestZipApart: a script whose zip the runner holds, not its stdin,
// runs as the whole script would, down to a syntax error on the zip's
// own line.
func TestZipApart(t *testing.T) {
	p := &Pool{}
	defer p.Close()
	payload := ansiballz.Payload(t, "command", map[string]any{"_raw_params": "echo apart"}, ansiballz.Python)
	prefix, zip, suffix := ansiballz.Split(t, payload)
	for range 2 { // the zip written for the runner, then held by it
		if out, rc := runApart(t, p, prefix, zip, suffix); rc != 0 || !strings.Contains(out, `"stdout": "apart"`) {
			t.Fatalf("rc %d, output %q", rc, out)
		}
	}

	// Syntax errors, after the literal on its line and elsewhere: told
	// as for the whole script on stdin.
	for _, bad := range [][]byte{
		append(append([]byte{}, suffix[:3]...), []byte(" +\n")...),
		append(append([]byte{}, suffix...), []byte("\nif:\n")...),
	} {
		out, rc := runApart(t, p, prefix, zip, bad)
		whole, wrc := runWhole(t, p, append(append(append([]byte{}, prefix...), zip...), bad...))
		if rc != 1 || wrc != 1 || out != whole || !strings.HasSuffix(out, "SyntaxError: invalid syntax\n") {
			t.Fatalf("rc %d, output ending %q; want 1 and as the whole script: rc %d, ending %q",
				rc, out[max(0, len(out)-300):], wrc, whole[max(0, len(whole)-300):])
		}
	}
}

// runWhole runs script from stdin, its zip in it, and returns its
// output and exit status.
func runWhole(t *testing.T, p *Pool, script []byte) (string, int) {
	t.Helper()
	_, zip, _ := ansiballz.Split(t, script)
	return runSpec(t, p, Spec{Interpreter: ansiballz.Python, Env: os.Environ(), Zip: zip}, script)
}

// TestCodeCache: a runner compiles its zip's module_utils once; the
// next runner for them takes the compiled code from the cache, and runs
// as well.
func TestCodeCache(t *testing.T) {
	dir := t.TempDir()
	payload := ansiballz.Payload(t, "command", map[string]any{"_raw_params": "echo cached"}, ansiballz.Python)
	for i, want := range []string{"none cached", "cached"} {
		p := &Pool{CodeCacheDir: dir}
		if out := run(t, p, payload, os.Environ()); !strings.Contains(out, `"stdout": "cached"`) {
			t.Fatalf("runner %d: output %q", i, out)
		}
		stats := p.Stats()
		p.Close()
		if len(stats) != 1 || (want == "cached") != (stats[0].CachedCode > 0) {
			t.Fatalf("runner %d: stats %+v; want %s", i, stats, want)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.marshal"))
	if len(files) != 1 {
		t.Fatalf("cache files %v: want one", files)
	}
}

// TestRunnerEndsWithAgent: a runner whose agent closed its socket ends,
// with its fork made ahead, which was reading that socket.
func TestRunnerEndsWithAgent(t *testing.T) {
	p := &Pool{}
	defer p.Close()
	payload := ansiballz.Payload(t, "command", map[string]any{"_raw_params": "true"}, ansiballz.Python)
	run(t, p, payload, os.Environ())
	r := onlyRunner(p)
	// The runner's end of file, as the agent's exit gives it; our end
	// stays open for readLoop to see the runner's.
	rc, err := r.ctl.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Shutdown(int(fd), unix.SHUT_WR) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	select {
	case <-r.exited:
	case <-time.After(time.Minute):
		t.Fatal("the runner outlived its agent's socket by a minute")
	}
}
