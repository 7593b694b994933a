package tether

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit/proctest"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// parentEnv makes the test binary the parent of TestKilledParentTakesGroups.
const parentEnv = "TETHER_TEST_PARENT"

func TestMain(m *testing.M) {
	if os.Getenv(parentEnv) == "1" {
		os.Exit(parent())
	}
	goleak.VerifyTestMain(m)
}

// parent starts a shell with a background job, tethered, prints the
// shell's and the job's pids once Start returned, and waits to be killed.
func parent() int {
	cmd := exec.Command("/bin/sh", "-c", `sleep 1000 & echo $$ $!; exec sleep 1000`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := Start(cmd); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(line)
	io.Copy(io.Discard, os.Stdin) // until killed
	return 0
}

func tethered(t *testing.T, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// TestKilledParentTakesGroups: a parent killed with SIGKILL leaves
// neither its child nor the child's background job running.
func TestKilledParentTakesGroups(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := exec.Command(self, "-test.run=^$")
	p.Env = append(os.Environ(), parentEnv+"=1")
	p.Stderr = os.Stderr
	stdin, err := p.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := p.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		p.Process.Kill()
		p.Wait()
		t.Fatalf("no pids from the parent: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("parent printed %q", line)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 2 {
		t.Fatalf("parent printed %q, want the shell's and the job's pids", line)
	}
	waitGone := proctest.Watch(t, pids...)
	for _, pid := range pids {
		if syscall.Kill(pid, 0) != nil {
			t.Fatalf("%d is not running before the parent is killed", pid)
		}
	}
	p.Process.Signal(syscall.SIGKILL)
	p.Wait()
	waitGone(30 * time.Second)
	if left := proctest.InGroup(pids[0]); len(left) > 0 {
		t.Fatalf("processes of the child's group still running: %v", left)
	}
}

// onEndingThread runs f on a thread that ends when f returns, and returns
// then. (The runtime never ends the main thread, so f runs elsewhere.)
func onEndingThread(f func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			defer close(done)
			f()
			return // locked: the thread ends
		}
		defer runtime.UnlockOSThread()
		go func() {
			defer close(done)
			runtime.LockOSThread()
			f()
		}()
		<-done
	}()
	<-done
}

// TestStartingThreadEndsChildLives: the thread a tethered child was
// started from may end (a goroutine exiting locked to it) and the child
// lives on. The control, forked on that thread with PDEATHSIG, shows when
// the thread's end has been dealt with: the kernel signals both children
// of an ending thread in one pass.
func TestStartingThreadEndsChildLives(t *testing.T) {
	child := tethered(t, "cat")
	in, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	control := exec.Command("sleep", "1000")
	control.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var release func()
	var startErr, controlErr error
	onEndingThread(func() {
		release, startErr = Start(child)
		controlErr = control.Start()
	})
	if startErr != nil || controlErr != nil {
		t.Fatalf("start: %v, control: %v", startErr, controlErr)
	}
	defer release()
	guard := time.AfterFunc(30*time.Second, func() { control.Process.Kill() })
	defer guard.Stop()
	control.Wait()
	if ws := control.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL || !guard.Stop() {
		t.Fatalf("the control did not die with its thread: %v", control.ProcessState)
	}
	if _, err := io.WriteString(in, "alive\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "alive\n" {
		t.Fatalf("the tethered child died with the thread it was started from: read %q, %v", line, err)
	}
	in.Close()
	if err := child.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestWatchdogReplaced: a watchdog killed by hand is replaced on the next
// change, and the new one knows the groups the old one did: when its
// pipe closes (as when this process dies) it kills them.
func TestWatchdogReplaced(t *testing.T) {
	child, release, old := startWatched(t)
	defer release()
	old.Process.Kill()
	// Until the killed watchdog has exited, its end of the pipe is open
	// and a write still succeeds: wait for the exit, without reaping it
	// (the tether reaps its watchdog).
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, old.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			if err != nil {
				t.Fatalf("waiting for the killed watchdog: %v", err)
			}
			break
		}
	}
	// Only a write tells the parent its watchdog is gone: a second child.
	other := tethered(t, "true")
	releaseOther, err := Start(other)
	if err != nil {
		t.Fatal(err)
	}
	other.Wait()
	releaseOther()
	watch.mu.Lock()
	replaced := watch.cmd
	if replaced == nil || replaced == old {
		watch.mu.Unlock()
		t.Fatalf("watchdog not replaced (failed: %v)", watch.failed)
	}
	// What this process's death would do: the watchdog's stdin closes.
	watch.stopLocked()
	watch.mu.Unlock()
	child.Wait()
	if ws := child.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the replacement watchdog did not kill the listed group: %v", child.ProcessState)
	}
}

func TestStartNeedsOwnGroup(t *testing.T) {
	if _, err := Start(exec.Command("true")); err == nil {
		t.Fatal("a command in this process's group was started")
	}
}

// TestClose: Close kills the groups still tethered, as this process's
// death would, and returns once the watchdog is gone.
func TestClose(t *testing.T) {
	child, release, wd := startWatched(t)
	defer release()
	Close()
	defer func() { // for the tests after this one
		watch.mu.Lock()
		watch.failed = nil
		watch.mu.Unlock()
	}()
	if wd.ProcessState == nil {
		t.Fatal("Close returned before the watchdog exited")
	}
	child.Wait()
	if ws := child.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("Close left the tethered group running: %v", child.ProcessState)
	}
}

// startWatched starts a tethered `sleep 1000` and returns it with its
// release and the watchdog that now watches its group.
func startWatched(t *testing.T) (child *exec.Cmd, release func(), wd *exec.Cmd) {
	t.Helper()
	child = tethered(t, "sleep", "1000")
	release, err := Start(child)
	if err != nil {
		t.Fatal(err)
	}
	watch.mu.Lock()
	wd = watch.cmd
	watch.mu.Unlock()
	if wd == nil {
		release()
		t.Fatalf("no watchdog after a start: %v", watch.failed)
	}
	return child, release, wd
}
