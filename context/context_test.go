package context_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors/local"
	spctx "github.com/spindle-rpc/spindle/context"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if _, err := testagent.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

func connect(t *testing.T) (*spctx.Controller, *spctx.Context) {
	t.Helper()
	ctl := spctx.NewController(spctx.Options{})
	t.Cleanup(func() { ctl.Close() })
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	cx, err := ctl.Connect(ctx, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ctl, cx
}

// waitFor polls cond, bounded, for conditions that have no event to wait
// on (a process outside our control going away).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 2000; i++ {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestPingAndInfo(t *testing.T) {
	_, cx := connect(t)
	ctx := stdctx.Background()
	if err := sys.Ping(ctx, cx); err != nil {
		t.Fatal(err)
	}
	info, err := sys.Info(ctx, cx)
	if err != nil {
		t.Fatal(err)
	}
	if info.PID != cx.Hello().PID || info.UID != os.Getuid() {
		t.Fatalf("info %+v does not match hello %+v", info, cx.Hello())
	}
}

func TestThousandConcurrentCalls(t *testing.T) {
	_, cx := connect(t)
	ctx := stdctx.Background()
	const n = 1000
	futures := make([]*spctx.Future, n)
	for i := range futures {
		futures[i] = cx.Go(ctx, "sys.Ping", &sys.PingArgs{Payload: []byte(strconv.Itoa(i))})
	}
	for i, f := range futures {
		var pong sys.Pong
		if err := f.Wait(&pong); err != nil {
			t.Fatal(err)
		}
		if string(pong.Payload) != strconv.Itoa(i) {
			t.Fatalf("call %d got reply %q: replies crossed", i, pong.Payload)
		}
	}
}

// startSleeper runs a process on the agent that records its pid and sleeps,
// and returns the pid once it is known, plus the call's error channel.
func startSleeper(t *testing.T, ctx stdctx.Context, cx *spctx.Context) (int, <-chan error) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pid")
	errc := make(chan error, 1)
	go func() {
		_, err := exec.Run(ctx, cx, exec.Cmd{Shell: "echo $$ > " + pidFile + "; exec sleep 1000"})
		errc <- err
	}()
	var pid int
	waitFor(t, "the remote process to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid, errc
}

func TestCancelKillsRemoteProcess(t *testing.T) {
	_, cx := connect(t)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	pid, errc := startSleeper(t, ctx, cx)
	cancel()
	err := <-errc
	if !errors.Is(err, errkind.ErrCanceled) || !errors.Is(err, stdctx.Canceled) {
		t.Fatalf("cancelled call returned %v, want ErrCanceled", err)
	}
	waitFor(t, "the cancelled remote process to die", func() bool { return !alive(pid) })
}

func TestDeadlineKillsRemoteProcess(t *testing.T) {
	_, cx := connect(t)
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), time.Minute)
	defer cancel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	short, cancelShort := stdctx.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	_, err := exec.Run(short, cx, exec.Cmd{Shell: "echo $$ > " + pidFile + "; exec sleep 1000"})
	if !errors.Is(err, errkind.ErrTimeout) {
		t.Fatalf("call past its deadline returned %v, want ErrTimeout", err)
	}
	if !strings.Contains(err.Error(), "local") {
		t.Fatalf("error %q does not name the context", err)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitFor(t, "the timed-out remote process to die", func() bool { return !alive(pid) })
}

func TestAgentDeathFailsEveryPendingCall(t *testing.T) {
	_, cx := connect(t)
	ctx := stdctx.Background()
	_, _ = startSleeper(t, ctx, cx) // proves calls are running on the agent
	const n = 50
	futures := make([]*spctx.Future, n)
	for i := range futures {
		futures[i] = cx.Go(ctx, "exec.Run", &exec.Cmd{Argv: []string{"sleep", "1000"}})
	}
	if err := syscall.Kill(cx.Hello().PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, f := range futures {
		wg.Add(1)
		go func(f *spctx.Future) {
			defer wg.Done()
			err := f.Wait(nil)
			if !errors.Is(err, errkind.ErrDisconnected) || !strings.Contains(err.Error(), "local") {
				t.Errorf("pending call after agent death returned %v, want ErrDisconnected naming local", err)
			}
		}(f)
	}
	wg.Wait()
	<-cx.Done()
	if err := sys.Ping(ctx, cx); !errors.Is(err, errkind.ErrDisconnected) {
		t.Fatalf("call on a dead context returned %v, want ErrDisconnected", err)
	}
}

func TestRemoteErrorKinds(t *testing.T) {
	_, cx := connect(t)
	ctx := stdctx.Background()
	err := cx.Call(ctx, "no.Such", nil, nil)
	if !errors.Is(err, errkind.ErrUnknownMethod) || !errors.Is(err, errkind.ErrRemote) {
		t.Fatalf("unknown method returned %v", err)
	}
	var e *errkind.Error
	if !errors.As(err, &e) || e.Chain != "local" || e.Op != "no.Such" {
		t.Fatalf("error %#v does not name context and method", err)
	}
	// An agent's message is shown on a terminal: no escape sequences.
	_, err = exec.Run(ctx, cx, exec.Cmd{Argv: []string{"/no/such\x1b]0;title\x07"}})
	var re *rpc.RemoteError
	if !errors.As(err, &re) || !strings.Contains(re.Message, "/no/such?]0;title?") {
		t.Fatalf("an agent's message with control characters arrived as %#v", err)
	}
	_, err = exec.Run(ctx, cx, exec.Cmd{Argv: []string{"/no/such/binary"}})
	if !errors.Is(err, errkind.ErrNotFound) {
		t.Fatalf("missing binary returned %v, want ErrNotFound", err)
	}
	// Arguments of the wrong type are refused, not misread.
	err = cx.Call(ctx, "exec.Run", []int{1, 2, 3}, nil)
	if !errors.Is(err, errkind.ErrBadArgs) {
		t.Fatalf("wrong-typed args returned %v, want ErrBadArgs", err)
	}
}

func TestCloseEndsAgent(t *testing.T) {
	_, cx := connect(t)
	pid := cx.Hello().PID
	if err := cx.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent to exit", func() bool { return !alive(pid) })
}

// A stream whose context is cancelled while its circuit is being opened
// fails cleanly: the cancellation and the opening do not race (run with
// -race), and the agent stays usable.
func TestStreamCancelledWhileOpening(t *testing.T) {
	_, cx := connect(t)
	for i := 0; i < 300; i++ {
		ctx, cancel := stdctx.WithCancel(stdctx.Background())
		go cancel()
		st, err := cx.Stream(ctx, "sys.Ping", &sys.PingArgs{})
		if err == nil {
			st.Wait(nil)
			st.Close()
		}
		cancel()
	}
	if err := sys.Ping(stdctx.Background(), cx); err != nil {
		t.Fatalf("after 300 cancelled streams: %v", err)
	}
}

// The frame limit holds both ways, each refused where the frame would go
// out: a request larger than the agent reads (its hello says how much)
// fails at the caller, and a result larger than the controller reads
// (the agent's -parent-max-frame says how much) comes back as an error of
// kind too large; both name the limit, and the link lives on.
func TestFrameLimitBothWays(t *testing.T) {
	const small = 256 << 10
	ctl := spctx.NewController(spctx.Options{Router: router.Options{MaxFrameSize: small}})
	t.Cleanup(func() { ctl.Close() })
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	cx, err := ctl.Connect(ctx, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := cx.Hello().MaxFrame; n != router.DefaultMaxFrameSize {
		t.Fatalf("the agent's hello announces a frame limit of %d, want %d", n, router.DefaultMaxFrameSize)
	}

	_, err = exec.Run(ctx, cx, exec.Cmd{Argv: []string{"true", strings.Repeat("x", router.DefaultMaxFrameSize)}})
	if !errors.Is(err, errkind.ErrTooLarge) || !strings.Contains(err.Error(), "the request (4.0 MiB) exceeds the frame limit of local, 4.0 MiB") {
		t.Fatalf("a request over the agent's frame limit: %v, want an error of kind too large naming the limit", err)
	}
	_, err = exec.Run(ctx, cx, exec.Cmd{Argv: []string{"head", "-c", strconv.Itoa(small), "/dev/zero"}})
	if !errors.Is(err, errkind.ErrTooLarge) || !strings.Contains(err.Error(), "exceeds the frame limit of parent, 256.0 KiB") {
		t.Fatalf("a result over the controller's frame limit: %v, want an error of kind too large naming the limit", err)
	}
	res, err := exec.Run(ctx, cx, exec.Cmd{Argv: []string{"head", "-c", strconv.Itoa(small / 2), "/dev/zero"}})
	if err != nil || len(res.Stdout) != small/2 {
		t.Fatalf("a result within the limit after the refusals: %v", err)
	}
}
