package integration_test

import (
	stdctx "context"
	"fmt"
	"os"
	osexec "os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors/docker"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/internal/testkit"
	"github.com/spindle-rpc/spindle/internal/testkit/containertest"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	"github.com/spindle-rpc/spindle/services/sys"
	"go.uber.org/zap/zaptest/observer"
)

// armAsAmd64 is the controller's agents with one mix-up: what it serves
// as linux/arm64 is its own-platform agent with a salt appended (so a
// program this machine runs, under a hash no other agent has).
type armAsAmd64 struct{ plain, salted bootstrap.Source }

func (m armAsAmd64) Agent(goos, goarch string) (*bootstrap.Binary, error) {
	if goos == "linux" && goarch == "arm64" {
		return m.salted.Agent(runtime.GOOS, runtime.GOARCH)
	}
	return m.plain.Agent(goos, goarch)
}

// needAmd64 ends t on a machine that is not linux/amd64: the test passes
// this machine's agent off as linux/arm64, which proves nothing on an
// arm64 machine and cannot run on any other.
func needAmd64(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		testkit.Impossible(t, "the test passes this machine's agent off as linux/arm64, so it needs a linux/amd64 machine, not "+runtime.GOOS+"/"+runtime.GOARCH)
	}
}

// passAsAarch64 is the environment setting that makes a target of this
// platform ask for the linux/arm64 agent.
const passAsAarch64 = bootstrap.PlatformEnv + "=Linux/aarch64"

// TestSSHHopAgentForAnotherPlatform: an agent whose own binary does not
// fit the next hop's platform gets that platform's agent from the
// controller, through the hop's helper, once; a later hop that needs it
// again is served from the agent's RAM.
func TestSSHHopAgentForAnotherPlatform(t *testing.T) {
	needAmd64(t)
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	// The second host says it is an aarch64 machine.
	second := newTargetWith(t, "/bin/sh", sshtest.Options{Extra: []string{"SetEnv " + passAsAarch64}})

	ctx, cx := throughFirst(t, first)
	arm := armAsAmd64{plain: bootstrap.Default(), salted: bootstrap.Salted(bootstrap.Default())}
	want, err := arm.Agent("linux", "arm64")
	if err != nil {
		sshtest.CannotRun(t, fmt.Sprintf("no agent to pass off as linux/arm64 (%v): run `make build` first", err))
	}
	hopOpts := second.opts()
	hopOpts.Agent = arm
	sent := func() int { return first.logs.FilterMessage("sending an agent to a hop").Len() }

	hop, err := cx.Connect(ctx, hopOpts)
	if err != nil {
		t.Fatalf("hop to an \"arm64\" host through %s: %v\n%s", cx.Name(), err, logText(first.logs))
	}
	if info, err := sys.Info(ctx, hop); err != nil || info.UID != second.u.UID {
		t.Fatalf("behind the hop: %+v, %v", info, err)
	}
	if cached := agentFiles(second.u); len(cached) != 1 || !strings.HasSuffix(cached[0], "-"+want.Hash[:16]) {
		t.Fatalf("the target's cache holds %v, want the controller's linux/arm64 agent (%s…)", cached, want.Hash[:16])
	}
	var e observer.LoggedEntry
	if all := first.logs.FilterMessage("sending an agent to a hop").All(); len(all) != 1 {
		t.Fatalf("the controller sent the agent %d times, want once\n%s", len(all), logText(first.logs))
	} else {
		e = all[0]
	}
	if p := e.ContextMap()["platform"]; p != "linux/arm64" {
		t.Errorf("the controller sent the agent for %v, want linux/arm64", p)
	}

	// The target forgets it; another hop there (a fresh context) needs it
	// again, and the first agent has it in RAM.
	for _, d := range second.u.CacheDirs() {
		os.RemoveAll(d)
	}
	again := hopOpts
	again.ContextName = "ssh:arm-again"
	hop2, err := cx.Connect(ctx, again)
	if err != nil {
		t.Fatalf("second hop: %v", err)
	}
	if err := sys.Ping(ctx, hop2); err != nil {
		t.Fatal(err)
	}
	if len(agentFiles(second.u)) != 1 {
		t.Fatalf("second hop did not upload the agent again: %v", agentFiles(second.u))
	}
	if n := sent(); n != 1 {
		t.Errorf("the controller sent the agent %d times for two hops, want once (the first agent keeps it)", n)
	}
}

// TestContainerHopAgentForAnotherPlatform: a container hop (docker, as a
// kubectl pod on an arm64 node would be) whose target is of another
// platform than its parent agent gets that platform's agent from the
// controller, lent on the start's circuit, once; a second hop there is
// served from the parent agent's RAM.
func TestContainerHopAgentForAnotherPlatform(t *testing.T) {
	needAmd64(t)
	t.Parallel()
	c := containertest.RunWith(t, containertest.DebianImage, "-e", passAsAarch64)

	arm := armAsAmd64{plain: bootstrap.Default(), salted: bootstrap.Salted(bootstrap.Default())}
	want, err := arm.Agent("linux", "arm64")
	if err != nil {
		sshtest.CannotRun(t, fmt.Sprintf("no agent to pass off as linux/arm64 (%v): run `make build` first", err))
	}
	var local0 target // only its logs
	_, parent, err := connectWith(t, &local0, local.Options{}, spindle.Options{Agents: arm})
	if err != nil {
		t.Fatal(err)
	}
	logs := local0.logs
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()
	sent := func() []observer.LoggedEntry { return logs.FilterMessage("sending an agent to a hop").All() }
	cached := func() string {
		out, _ := osexec.Command("docker", "exec", c.Name, "sh", "-c",
			"ls /dev/shm/spindle-0 /root/.cache/spindle /tmp/spindle-0 2>/dev/null").CombinedOutput()
		return string(out)
	}

	hop, err := parent.Connect(ctx, docker.Options{Container: c.Name})
	if err != nil {
		t.Fatalf("hop to an \"arm64\" container through %s: %v\n%s", parent.Name(), err, logText(logs))
	}
	if info, err := sys.Info(ctx, hop); err != nil || info.UID != 0 {
		t.Fatalf("in the container: %+v, %v", info, err)
	}
	if got := cached(); !strings.Contains(got, "-"+want.Hash[:16]) {
		t.Fatalf("the container's cache holds %q, want the controller's linux/arm64 agent (%s…)", got, want.Hash[:16])
	}
	if all := sent(); len(all) != 1 || all[0].ContextMap()["platform"] != "linux/arm64" {
		t.Fatalf("the controller lent %d agents (%v), want one for linux/arm64\n%s", len(all), all, logText(logs))
	}

	// The container forgets it; another hop there needs it again, and the
	// parent agent has it in RAM.
	if out, err := osexec.Command("docker", "exec", c.Name, "rm", "-rf", "/dev/shm/spindle-0", "/root/.cache/spindle", "/tmp/spindle-0").CombinedOutput(); err != nil {
		t.Fatalf("clearing the container's cache: %v: %s", err, out)
	}
	hop2, err := parent.Connect(ctx, docker.Options{Container: c.Name, ContextName: "docker:arm-again"})
	if err != nil {
		t.Fatalf("second hop: %v", err)
	}
	if err := sys.Ping(ctx, hop2); err != nil {
		t.Fatal(err)
	}
	if got := cached(); !strings.Contains(got, "-"+want.Hash[:16]) {
		t.Fatalf("second hop did not upload the agent again: %q", got)
	}
	if n := len(sent()); n != 1 {
		t.Errorf("the controller lent the agent %d times for two hops, want once (the parent agent keeps it)", n)
	}
}
