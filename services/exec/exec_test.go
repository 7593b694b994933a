package exec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/pyrunner"
	"github.com/spindle-rpc/spindle/rpc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The warm runners stay for the agent's life: end them first.
	pyrunner.Default.Close()
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

// runDirect calls the exec.Run handler as rpc.Server would.
func runDirect(t *testing.T, ctx context.Context, cmd Cmd) (*Result, error) {
	t.Helper()
	call, _, err := rpc.NewCall(MethodRun, &cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := handleRun(ctx, call)
	if err != nil {
		return nil, err
	}
	return res.(*Result), nil
}

func TestRunExitCodeAndStreams(t *testing.T) {
	res, err := Run(context.Background(), newLocalCaller(), Cmd{Shell: "echo out; echo err >&2; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Signal != "" || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("got %+v", res)
	}
}

func TestRunStdin(t *testing.T) {
	res, err := runDirect(t, context.Background(), Cmd{Argv: []string{"cat"}, Stdin: []byte("hello\x00world")})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "hello\x00world" || res.ExitCode != 0 {
		t.Fatalf("got %+v", res)
	}
}

func TestRunEnv(t *testing.T) {
	t.Setenv("SPINDLE_KEEP", "kept")
	t.Setenv("SPINDLE_DROP", "dropped")
	res, err := runDirect(t, context.Background(), Cmd{
		Shell: `echo "$SPINDLE_KEEP:${SPINDLE_DROP-unset}:$FOO"`,
		Env:   map[string]string{"FOO": "bar", "SPINDLE_KEEP": "over"},
		Unset: []string{"SPINDLE_DROP"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "over:unset:bar\n" {
		t.Fatalf("stdout %q", got)
	}
	res, err = runDirect(t, context.Background(), Cmd{Argv: []string{"/usr/bin/env"}, ClearEnv: true, Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "A=1\n" {
		t.Fatalf("clear env: %q", got)
	}
	if _, err := runDirect(t, context.Background(), Cmd{Argv: []string{"true"}, Env: map[string]string{"A=B": "1"}}); !errors.Is(err, errkind.ErrBadArgs) {
		t.Fatalf("bad name: %v", err)
	}
}

func TestRunDir(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := runDirect(t, context.Background(), Cmd{Argv: []string{"/bin/pwd"}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != dir {
		t.Fatalf("pwd %q, want %q", got, dir)
	}
	_, err = runDirect(t, context.Background(), Cmd{Argv: []string{"/bin/pwd"}, Dir: filepath.Join(dir, "missing")})
	if !errors.Is(rpc.ToRemote(err), errkind.ErrNotFound) {
		t.Fatalf("missing dir: %v", err)
	}
}

func TestRunStartErrors(t *testing.T) {
	for _, argv := range [][]string{{"spindle-no-such-binary"}, {"/nonexistent/bin/x"}} {
		_, err := Run(context.Background(), newLocalCaller(), Cmd{Argv: argv})
		if !errors.Is(rpc.ToRemote(err), errkind.ErrNotFound) {
			t.Errorf("%v: %v, want not found", argv, err)
		}
	}
	// Not executable.
	f := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Even root cannot execute a file without any x bit.
	if _, err := Run(context.Background(), newLocalCaller(), Cmd{Argv: []string{f}}); !errors.Is(rpc.ToRemote(err), errkind.ErrPermission) {
		t.Errorf("not executable: %v, want permission", err)
	}
	for _, c := range []Cmd{{}, {Argv: []string{"true"}, Shell: "true"}, {Shell: "true", PTY: true}, {Shell: "true", Timeout: -1}} {
		if _, err := Run(context.Background(), newLocalCaller(), c); !errors.Is(err, errkind.ErrBadArgs) {
			t.Errorf("%+v: %v, want bad args", c, err)
		}
	}
}

func TestRunTimeoutKillsGroup(t *testing.T) {
	res, err := runDirect(t, context.Background(), Cmd{
		Shell:   "sleep 100 & echo $$ $!; sleep 100",
		Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != -1 || res.Signal != "SIGKILL" {
		t.Fatalf("got %+v", res)
	}
	waitGone(t, pids(t, string(res.Stdout))...)
}

func pids(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Fields(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("bad pid in %q", s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		t.Fatalf("no pids in %q", s)
	}
	return out
}

func TestRunOutputLimit(t *testing.T) {
	res, err := runDirect(t, context.Background(), Cmd{
		Shell:     "head -c 100000 /dev/zero; echo done >&2",
		MaxOutput: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 10 || !res.StdoutTruncated || res.StderrTruncated || string(res.Stderr) != "done\n" || res.ExitCode != 0 {
		t.Fatalf("got %+v", res)
	}
	// The limit is capped so that the reply fits in a frame.
	res, err = runDirect(t, context.Background(), Cmd{Shell: "head -c 2000000 /dev/zero", MaxOutput: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != MaxRunOutput || !res.StdoutTruncated {
		t.Fatalf("got %d bytes, truncated %v", len(res.Stdout), res.StdoutTruncated)
	}
}

// A daemon that keeps the output pipes open must not hang the call.
func TestRunBackgroundHoldsPipes(t *testing.T) {
	start := time.Now()
	res, err := runDirect(t, context.Background(), Cmd{Shell: "sleep 100 & echo $!"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || time.Since(start) > WaitDelay+5*time.Second {
		t.Fatalf("got %+v after %v", res, time.Since(start))
	}
	for _, pid := range pids(t, string(res.Stdout)) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	go func() {
		_, err := runDirect(t, ctx, Cmd{Shell: "sleep 100 & echo $$ $! > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; wait"})
		errc <- err
	}()
	var data []byte
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		if data, err = os.ReadFile(pidFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("command did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	err := <-errc
	if !errors.Is(rpc.ToRemote(err), errkind.ErrCanceled) {
		t.Fatalf("err %v, want canceled", err)
	}
	waitGone(t, pids(t, string(data))...)
}

func TestStartStreams(t *testing.T) {
	p, err := Start(context.Background(), newLocalCaller(), Cmd{Shell: "cat; echo err >&2; exit 3", Stdin: []byte("first ")})
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := p.Stdout(), p.Stderr()
	in := p.Stdin()
	if _, err := io.WriteString(in, "second"); err != nil {
		t.Fatal(err)
	}
	in.Close()
	errc := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(stderr); errc <- b }()
	out, err := io.ReadAll(stdout)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "first second" || string(<-errc) != "err\n" || res.ExitCode != 3 || len(res.Stdout) != 0 {
		t.Fatalf("out %q res %+v", out, res)
	}
}

// Output reaches the caller while the process still runs.
func TestStartStreaming(t *testing.T) {
	p, err := Start(context.Background(), newLocalCaller(), Cmd{Shell: "echo ready; read x; echo got $x"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := bufio.NewReader(p.Stdout())
	line, err := r.ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("%q %v", line, err)
	}
	io.WriteString(p.Stdin(), "abc\n")
	p.Stdin().Close()
	rest, _ := io.ReadAll(r)
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 || string(rest) != "got abc\n" {
		t.Fatalf("%q %+v %v", rest, res, err)
	}
}

// A stream nobody asked for is discarded rather than stalling the other.
func TestStartUnreadStderr(t *testing.T) {
	p, err := Start(context.Background(), newLocalCaller(), Cmd{Shell: "head -c 3000000 /dev/zero >&2; echo out"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(p.Stdout())
	if err != nil || string(out) != "out\n" {
		t.Fatalf("%q %v", out, err)
	}
	if _, err := p.Stderr().Read(make([]byte, 1)); !errors.Is(err, ErrOutputDiscarded) {
		t.Fatalf("late stderr: %v", err)
	}
	if res, err := p.Wait(); err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestStartCopyOutputLimit(t *testing.T) {
	p, err := Start(context.Background(), newLocalCaller(), Cmd{Shell: "head -c 100000 /dev/zero; echo e >&2", MaxOutput: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if err := p.CopyOutput(&out, &errb); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil || out.Len() != 1000 || errb.String() != "e\n" || !res.StdoutTruncated || res.StderrTruncated {
		t.Fatalf("%d %q %+v %v", out.Len(), errb.String(), res, err)
	}
}

func TestStartTimeout(t *testing.T) {
	p, err := Start(context.Background(), newLocalCaller(), Cmd{Shell: "sleep 100 & echo $$ $!; sleep 100", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	res, err := p.Wait()
	if err != nil || !res.TimedOut || res.Signal != "SIGKILL" {
		t.Fatalf("%+v %v", res, err)
	}
	waitGone(t, pids(t, string(out))...)
}

func TestStartCancelKillsGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Start(ctx, newLocalCaller(), Cmd{Shell: "sleep 100 & echo $$ $!; wait"})
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := p.Wait(); !errors.Is(rpc.ToRemote(err), errkind.ErrCanceled) {
		t.Fatalf("err %v, want canceled", err)
	}
	waitGone(t, pids(t, line)...)
}

func TestStartSignal(t *testing.T) {
	p, err := Start(context.Background(), newLocalCaller(), Cmd{Shell: "echo up; exec sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(p.Stdout())
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r)
	res, err := p.Wait()
	if err != nil || res.ExitCode != -1 || res.Signal != "SIGTERM" {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestStartNeedsCircuit(t *testing.T) {
	call, _, _ := rpc.NewCall(MethodStart, &Cmd{Argv: []string{"true"}}, nil)
	if _, err := handleStart(context.Background(), call); !errors.Is(err, errkind.ErrBadArgs) {
		t.Fatal(err)
	}
}

func TestStartMissingBinary(t *testing.T) {
	p, err := Start(context.Background(), newLocalCaller(), Cmd{Argv: []string{"spindle-no-such-binary"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); !errors.Is(err, errkind.ErrNotFound) {
		t.Fatalf("%v, want not found", err)
	}
}

func TestStartClose(t *testing.T) {
	p, err := Start(context.Background(), newLocalCaller(), Cmd{Shell: "yes"})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Stdout()
	if _, err := r.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := io.ReadAll(r); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("read after close: %v", err)
	}
}

var ttyRE = regexp.MustCompile(`^/dev/pts/[0-9]+\r\n$`)

func TestPTYTty(t *testing.T) {
	p, err := Start(context.Background(), newLocalCaller(), Cmd{Argv: []string{"tty"}, PTY: true})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 || !ttyRE.Match(out) {
		t.Fatalf("%q %+v %v", out, res, err)
	}
}

func TestPTYSizeAndResize(t *testing.T) {
	p, err := Start(context.Background(), newLocalCaller(), Cmd{
		Shell: `stty -echo; stty size; echo "$TERM"; while read x; do stty size; done`,
		PTY:   true, Rows: 30, Cols: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := bufio.NewReader(p.Stdout())
	expect := func(want string) {
		t.Helper()
		line, err := r.ReadString('\n')
		if err != nil || line != want+"\r\n" {
			t.Fatalf("got %q %v, want %q", line, err, want)
		}
	}
	expect("30 100")
	expect(DefaultTerm)
	if err := p.Resize(40, 120); err != nil {
		t.Fatal(err)
	}
	// The resize and the stdin bytes take different paths, so ask until
	// the new size shows.
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("resize not seen")
		}
		io.WriteString(p.Stdin(), "\n")
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "40 120\r\n" {
			break
		}
		if line != "30 100\r\n" {
			t.Fatalf("unexpected %q", line)
		}
	}
	io.WriteString(p.Stdin(), "\x04") // ^D: end of file for read
	io.Copy(io.Discard, r)
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
}

// A background process keeping the terminal open must not hang the call.
func TestPTYBackgroundHoldsTerminal(t *testing.T) {
	p, err := Start(context.Background(), newLocalCaller(), Cmd{Shell: "sleep 100 & echo $!", PTY: true})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%q %+v %v", out, res, err)
	}
	for _, pid := range pids(t, string(out)) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
