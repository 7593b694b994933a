package agent_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors/container"
	"github.com/spindle-rpc/spindle/connectors/docker"
	"github.com/spindle-rpc/spindle/connectors/kubectl"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/connectors/lxc"
	"github.com/spindle-rpc/spindle/connectors/lxd"
	"github.com/spindle-rpc/spindle/connectors/machinectl"
	"github.com/spindle-rpc/spindle/connectors/podman"
	"github.com/spindle-rpc/spindle/internal/lazyre"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/services/sys"
	"golang.org/x/sys/unix"
)

// dialAgent starts the agent binary at path with the local connector; it
// is shut down when the test ends.
func dialAgent(t *testing.T, path string) (stdctx.Context, *spindle.Context) {
	t.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cx, closeFn, err := spindle.Dial(ctx, local.Options{Agent: bootstrap.FromFile(path, runtime.GOOS, runtime.GOARCH)}, spindle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeFn() })
	return ctx, cx
}

// TestCustomAgent builds examples/customagent (agent.Main with an extra
// service), ships it with the local connector, and calls both the extra
// service and a default one.
func TestCustomAgent(t *testing.T) {
	path, err := testagent.BuildPackage("./examples/customagent", "customagent")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cx := dialAgent(t, path)
	var reply struct {
		Text string `msgpack:"text"`
		PID  int    `msgpack:"pid"`
	}
	if err := cx.Call(ctx, "hello.Greet", map[string]string{"name": "tester"}, &reply); err != nil {
		t.Fatal(err)
	}
	if reply.Text != "hello, tester" || reply.PID != cx.Hello().PID {
		t.Fatalf("hello.Greet replied %+v", reply)
	}
	if err := cx.Call(ctx, "hello.Greet", map[string]string{}, nil); !errors.Is(err, spindle.ErrRemote) {
		t.Fatalf("bad args returned %v", err)
	}
	if err := sys.Ping(ctx, cx); err != nil {
		t.Fatal(err)
	}
}

// TestPipesGrown: the agent reads its parent link from a pipe grown to
// 1 MiB, so that whoever feeds it (sshd, sudo) does not stall on a full
// 64 KiB pipe while the agent is busy with a chunk, and writes to one
// grown to 256 KiB, so that a large reply costs it fewer wake-ups and
// sshd fewer, fuller reads. Its stderr keeps the size it was given.
func TestPipesGrown(t *testing.T) {
	path, err := testagent.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, cx := dialAgent(t, path)
	proc := fmt.Sprintf("/proc/%d", cx.Hello().PID)
	fds, err := os.ReadDir(proc + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	var reads, writes []int
	for _, fd := range fds {
		target, err := os.Readlink(proc + "/fd/" + fd.Name())
		if err != nil || !strings.HasPrefix(target, "pipe:") {
			continue
		}
		info, err := os.ReadFile(proc + "/fdinfo/" + fd.Name())
		if err != nil {
			t.Fatal(err)
		}
		var flags int
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				fmt.Sscanf(strings.TrimSpace(v), "%o", &flags)
			}
		}
		mode := flags & unix.O_ACCMODE
		f, err := os.OpenFile(proc+"/fd/"+fd.Name(), mode|unix.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		size, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if mode == unix.O_RDONLY {
			reads = append(reads, size)
		} else {
			writes = append(writes, size)
		}
	}
	if len(reads) != 1 || reads[0] != 1<<20 {
		t.Fatalf("the agent's read ends of pipes have sizes %v, want one of 1 MiB (its input)", reads)
	}
	grown := 0
	for _, size := range writes {
		if size == 256<<10 {
			grown++
		}
	}
	if grown != 1 {
		t.Fatalf("the agent's write ends of pipes have sizes %v, want one of 256 KiB (its output; stderr as given)", writes)
	}
}

// The connectors' error patterns compile only when first matched
// (lazyre); every one the agent links must compile. The container
// connectors make theirs when asked for their rules.
func TestConnectorPatternsCompile(t *testing.T) {
	for _, rules := range [][]container.Rule{
		container.ShellRules("u"), docker.Options{}.Rules(), podman.Options{}.Rules(), kubectl.Options{}.Rules(),
		lxc.Options{}.Rules(), lxd.Options{}.Rules(), machinectl.Options{}.Rules(),
	} {
		if len(rules) == 0 {
			t.Error("a connector has no rules")
		}
	}
	if n := lazyre.Count(); n < 30 {
		t.Fatalf("only %d patterns registered: the connectors' tables are not linked here", n)
	}
	if err := lazyre.CheckAll(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAgentStart is the agent's own part of every connect and hop:
// exec to exit of the shipped agent whose stdin is already at EOF, started
// as a first stage starts it (GOMAXPROCS=1 and its marker). Besides wall
// time per start it reports the agent's CPU time and minor page faults,
// which move less than wall time on a shared machine.
func BenchmarkAgentStart(b *testing.B) {
	path, err := testagent.Build()
	if err != nil {
		b.Fatal(err)
	}
	env := bootstrap.WithOneProc(nil)
	argv := bootstrap.AgentArgs{ID: 2, Parent: 1, Name: "bench", Nonce: bootstrap.NewNonce()}.Argv()
	var cpu time.Duration
	var faults int64
	for b.Loop() {
		cmd := osexec.Command(path, argv...)
		cmd.Env = env
		var out strings.Builder
		cmd.Stdout = &out
		cmd.Run() //nolint:errcheck // at EOF the agent exits 1 after its hello
		if !strings.HasPrefix(out.String(), bootstrap.HelloPrefix) {
			b.Fatalf("no hello from the agent: %q", out.String())
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		faults += ru.Minflt
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(faults)/float64(b.N), "faults/op")
}
