package exec_test

import (
	"bufio"
	"context"
	"io"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/internal/testkit/proctest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/services/exec"
)

// TestAgentKilledTakesCommands: an agent killed with SIGKILL while a
// command runs leaves nothing of the command running, not even what the
// command started in the background.
func TestAgentKilledTakesCommands(t *testing.T) {
	path, err := testagent.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cx, closeCx, err := spindle.Dial(ctx, local.Options{Agent: bootstrap.FromFile(path, runtime.GOOS, runtime.GOARCH)}, spindle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeCx()
	// The line read back from stdin says the agent is past the start: its
	// stdin is fed only once the command is registered for killing.
	p, err := exec.Start(ctx, cx, exec.Cmd{Shell: `sleep 1000 & echo $$ $!; read line; echo "$line"; exec sleep 1000`})
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(p.Stdout())
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("command printed %q", line)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 2 {
		t.Fatalf("command printed %q, want the shell's and its job's pids", line)
	}
	if _, err := io.WriteString(p.Stdin(), "started\n"); err != nil {
		t.Fatal(err)
	}
	if echo, err := out.ReadString('\n'); echo != "started\n" {
		t.Fatalf("command echoed %q, %v", echo, err)
	}
	waitGone := proctest.Watch(t, pids...)
	agent := cx.Hello().PID
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the agent (%d): %v", agent, err)
	}
	waitGone(30 * time.Second)
	if left := proctest.InGroup(pids[0]); len(left) > 0 {
		t.Fatalf("processes of the command's group still running: %v", left)
	}
	if _, err := p.Wait(); err == nil {
		t.Fatal("the command's call succeeded though its agent was killed")
	}
}
