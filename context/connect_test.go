package context_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit"

	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	spctx "github.com/spindle-rpc/spindle/context"
	"github.com/spindle-rpc/spindle/internal/testkit/becometest"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
)

func TestConnectThroughAgent(t *testing.T) {
	_, parent := connect(t)
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	child, err := parent.Connect(ctx, local.Options{ContextName: "inner"})
	if err != nil {
		t.Fatal(err)
	}
	if child.Name() != "local → inner" {
		t.Fatalf("child name %q", child.Name())
	}
	info, err := sys.Info(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	if info.PID == parent.Hello().PID || info.PID != child.Hello().PID {
		t.Fatalf("child pid %d, parent %d, hello %d: the call did not reach the child", info.PID, parent.Hello().PID, child.Hello().PID)
	}
	again, err := parent.Connect(ctx, local.Options{ContextName: "inner"})
	if err != nil || again != child {
		t.Fatalf("connecting the same hop again gave %v, %v; want the running child", again, err)
	}
	pid := child.Hello().PID
	if err := child.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the closed child agent to exit", func() bool { return !alive(pid) })
	if err := sys.Ping(ctx, child); !errors.Is(err, errkind.ErrDisconnected) {
		t.Fatalf("call on a closed child returned %v", err)
	}
	fresh, err := parent.Connect(ctx, local.Options{ContextName: "inner"})
	if err != nil || fresh == child {
		t.Fatalf("reconnecting a closed hop gave %v, %v", fresh, err)
	}
}

func TestIntermediateDeathFailsChildCalls(t *testing.T) {
	_, parent := connect(t)
	ctx := stdctx.Background()
	child, err := parent.Connect(ctx, local.Options{ContextName: "inner"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	futures := make([]*spctx.Future, n)
	for i := range futures {
		futures[i] = child.Go(ctx, exec.MethodRun, &exec.Cmd{Argv: []string{"sleep", "1000"}})
	}
	if err := sys.Ping(ctx, child); err != nil { // the calls above are queued before this one
		t.Fatal(err)
	}
	syscall.Kill(parent.Hello().PID, syscall.SIGKILL)
	for _, f := range futures {
		err := f.Wait(nil)
		if !errors.Is(err, errkind.ErrDisconnected) || !strings.Contains(err.Error(), "local → inner") {
			t.Fatalf("call behind a dead intermediary returned %v, want ErrDisconnected naming the chain", err)
		}
	}
	<-child.Done()
	waitFor(t, "the orphaned child agent to exit", func() bool { return !alive(child.Hello().PID) })
}

func TestChildLimitRecyclesYoungestIdle(t *testing.T) {
	ctl := spctx.NewController(spctx.Options{MaxChildren: 3})
	t.Cleanup(func() { ctl.Close() })
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	parent, err := ctl.Connect(ctx, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var kids []*spctx.Context
	for i := 0; i < 3; i++ {
		k, err := parent.Connect(ctx, local.Options{ContextName: fmt.Sprintf("k%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		kids = append(kids, k)
	}
	// k2, the youngest, is busy; k1 is then the youngest idle one.
	busy := kids[2].Go(ctx, exec.MethodRun, &exec.Cmd{Argv: []string{"sleep", "1000"}})
	fourth, err := parent.Connect(ctx, local.Options{ContextName: "k3"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-kids[1].Done():
	default:
		t.Fatal("the youngest idle child (k1) was not closed")
	}
	for _, k := range []*spctx.Context{kids[0], kids[2], fourth} {
		if err := sys.Ping(ctx, k); err != nil {
			t.Fatalf("%s: %v", k.Name(), err)
		}
	}
	kids[2].Close()
	if err := busy.Wait(nil); err == nil {
		t.Fatal("the busy call survived its context's close")
	}
}

// TestConnectSudoThroughAgent runs the whole delegated become path: the
// controller encodes sudo.Options, the local agent decodes and runs sudo
// with its hybrid terminal, and the child agent runs as the target user.
func TestConnectSudoThroughAgent(t *testing.T) {
	if os.Getuid() != 0 {
		requireOrSkip(t, "needs root (sudo -u nobody without a password)")
	}
	if _, err := osexec.LookPath("sudo"); err != nil {
		requireOrSkip(t, "needs sudo: run scripts/test-deps.sh")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		requireOrSkip(t, "needs the nobody user")
	}
	_, parent := connect(t)
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	child, err := parent.Connect(ctx, sudo.Options{User: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if child.Name() != "local → sudo:nobody" {
		t.Fatalf("child name %q", child.Name())
	}
	info, err := sys.Info(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	if strconv.Itoa(info.UID) != nobody.Uid {
		t.Fatalf("agent behind sudo runs as uid %d, want nobody (%s)", info.UID, nobody.Uid)
	}
	// The same hop again is the same child: no second sudo.
	if again, err := parent.Connect(ctx, sudo.Options{User: "nobody"}); err != nil || again != child {
		t.Fatalf("reconnecting sudo:nobody gave %v, %v", again, err)
	}
	// A user that does not exist is a clear error naming the hop.
	_, err = parent.Connect(ctx, sudo.Options{User: "no-such-user-spindle"})
	if err == nil || !strings.Contains(err.Error(), "sudo:no-such-user-spindle") {
		t.Fatalf("sudo to a missing user: %v", err)
	}
}

// requireOrSkip skips loudly, or fails under CI, where every suite must run.
func requireOrSkip(t *testing.T, why string) {
	t.Helper()
	testkit.Unavailable(t, why)
}

// TestTwentyFirstBecomeUserRecyclesYoungest: with the default limit of 20
// children per context, a sudo hop to a 21st user closes the youngest idle
// one, as Mitogen does; the others keep running.
func TestTwentyFirstBecomeUserRecyclesYoungest(t *testing.T) {
	if os.Getuid() != 0 {
		requireOrSkip(t, "needs root (creates users, sudo without a password)")
	}
	if _, err := osexec.LookPath("sudo"); err != nil {
		requireOrSkip(t, "needs sudo: run scripts/test-deps.sh")
	}
	_, parent := connect(t)
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 3*time.Minute)
	defer cancel()
	var kids []*spctx.Context
	for i := 0; i <= spctx.DefaultMaxChildren; i++ {
		u := becometest.NewUser(t, "")
		k, err := parent.Connect(ctx, sudo.Options{User: u.Name})
		if err != nil {
			t.Fatalf("become user %d: %v", i+1, err)
		}
		kids = append(kids, k)
	}
	youngest := kids[spctx.DefaultMaxChildren-1]
	select {
	case <-youngest.Done():
	default:
		t.Fatalf("the 21st become user did not recycle the youngest (%s)", youngest.Name())
	}
	for i, k := range kids {
		if k == youngest {
			continue
		}
		if err := sys.Ping(ctx, k); err != nil {
			t.Fatalf("child %d (%s) should still run: %v", i+1, k.Name(), err)
		}
	}
}
