package topology

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Every dial into a namespace runs on a goroutine of its own; none may
// outlive its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const crashHelperEnv = "SPINDLE_TOPOLOGY_CRASH_HELPER"

// TestCrashHelper is not a test: TestSweepAfterKill runs it in a child
// process, which builds a topology, reports it and waits to be killed. In
// a plain run it returns at once (a pass, not a skip: nothing was left
// untested).
func TestCrashHelper(t *testing.T) {
	if os.Getenv(crashHelperEnv) != "1" {
		return
	}
	tp := New(t)
	fmt.Printf("READY %d %s %s %s %s\n", tp.Index, tp.Bastion.User.Name, tp.Web.User.Name,
		tp.Bastion.Server.Dir, tp.Web.Server.Dir)
	io.Copy(io.Discard, os.Stdin) // until the parent kills us (or its end closes)
}

// A run killed with SIGKILL leaves its namespaces, veth, route, users,
// directories and sshd processes behind; Sweep (which New runs once per
// process) removes them.
//
// Not parallel: a parallel New in this process could claim the freed
// index itself (and clean it the same way, but then rebuild it).
func TestSweepAfterKill(t *testing.T) {
	Require(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashHelperEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
		stdin.Close()
	})
	lines := make(chan string, 1)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY ") {
				lines <- sc.Text()
				io.Copy(io.Discard, stdout)
				return
			}
			t.Logf("helper: %s", sc.Text())
		}
	}()
	var ready string
	select {
	case ready = <-lines:
	case <-time.After(2 * time.Minute):
		t.Fatal("the helper did not build its topology within 2 minutes")
	}
	if ready == "" {
		t.Fatal("the helper exited without building a topology")
	}
	var (
		n            int
		bUser, wUser string
		bDir, wDir   string
	)
	if _, err := fmt.Sscanf(ready, "READY %d %s %s %s %s", &n, &bUser, &wUser, &bDir, &wDir); err != nil {
		t.Fatalf("helper said %q: %v", ready, err)
	}
	bastion, web, ct := names(n)

	// SIGKILL: no clean-up runs.
	cmd.Process.Kill()
	cmd.Wait()
	killed = true
	<-lines

	// Everything is still there, sshd processes included.
	for _, ns := range []string{bastion, web} {
		if !exists("/run/netns/" + ns) {
			t.Fatalf("namespace %s is gone already: the test proves nothing", ns)
		}
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil || len(strings.Fields(string(out))) == 0 {
			t.Fatalf("no sshd left in %s after the kill (%q, %v): the test proves nothing", ns, out, err)
		}
	}
	if _, err := user.Lookup(bUser); err != nil {
		t.Fatalf("user %s is gone already: %v", bUser, err)
	}
	if !hasUnreachableRoute(n) {
		t.Fatalf("route to %s is gone already", subnet(n))
	}

	Sweep(t)

	for _, ns := range []string{bastion, web} {
		if exists("/run/netns/" + ns) {
			t.Errorf("namespace %s survived Sweep", ns)
		}
	}
	if _, err := net.InterfaceByName(ct); err == nil {
		t.Errorf("veth %s survived Sweep", ct)
	}
	if hasUnreachableRoute(n) {
		t.Errorf("route to %s survived Sweep", subnet(n))
	}
	for _, u := range []string{bUser, wUser} {
		if _, err := user.Lookup(u); err == nil {
			t.Errorf("user %s survived Sweep", u)
		}
	}
	for _, d := range []string{bDir, wDir} {
		if exists(d) {
			t.Errorf("directory %s survived Sweep", d)
		}
	}
	if exists(statePath(n)) {
		t.Errorf("state file %s survived Sweep", statePath(n))
	}
}
