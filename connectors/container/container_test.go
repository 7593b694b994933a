package container_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/lazyre"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/rpc"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

var agentPath string

func TestMain(m *testing.M) {
	p, err := testagent.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build the agent:", err)
		os.Exit(1)
	}
	agentPath = p
	goleak.VerifyTestMain(m)
}

// request is a StartRequest for a hop whose "container" is this host: the
// Hop's command runs the first stage with the host's sh, so the machinery
// is tested without a container engine.
func request(t *testing.T) (connectors.StartRequest, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return connectors.StartRequest{ID: 7, Parent: 1, Name: "local → fake:app1", Logger: zap.New(core),
		Agent: bootstrap.FromFile(agentPath, runtime.GOOS, runtime.GOARCH)}, logs
}

// groupAlive lists the processes of group pgid that are not zombies (a
// killed child's orphans wait for init to reap them).
func groupAlive(pgid int) []string {
	var alive []string
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 2 && f[2] == fmt.Sprint(pgid) && f[0] != "Z" {
			alive = append(alive, string(b[:i+1]))
		}
	}
	return alive
}

var fakeRules = []container.Rule{
	{Match: lazyre.New(`(?i)no such container`), Err: container.ErrNoContainer, Hint: "check the name with `fake ps`"},
}

// TestStartAndClose: the child runs the first stage, the agent says
// hello over its stdout, the tool's stderr is logged at debug level, and
// Close ends and reaps the child.
func TestStartAndClose(t *testing.T) {
	req, logs := request(t)
	var pid int
	conn, err := container.Start(context.Background(), req, container.Hop{
		Tool: "fake",
		Command: func(script string) (*exec.Cmd, error) {
			return exec.Command("sh", "-c", `echo "from the tool" >&2; eval "$1"`, "sh", script), nil
		},
		Launch: func(cmd *exec.Cmd) error {
			err := cmd.Start()
			if err == nil {
				pid = cmd.Process.Pid
			}
			return err
		},
		Rules: fakeRules,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The stage execs the agent: the child is the agent.
	if conn.Hello.PID != pid {
		t.Fatalf("hello from pid %d, the child is %d", conn.Hello.PID, pid)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Fatalf("the child %d is still there after Close (kill 0: %v)", pid, err)
	}
	if n := logs.FilterMessage("container stderr").FilterField(zap.String("line", "from the tool")).Len(); n != 1 {
		t.Errorf("the tool's stderr was logged %d times, want once at debug level:\n%v", n, logs.All())
	}
}

// TestUploadFormat: a container on this host gets the agent raw over its
// local pipe; a tool whose children are across a network (kubectl) gets
// it compressed (gzip: the source has no zstd form).
func TestUploadFormat(t *testing.T) {
	for _, tc := range []struct {
		overNetwork bool
		want        string
	}{{false, "raw)"}, {true, "gzip)"}} {
		req, logs := request(t)
		// Salted: cold, whatever this host's caches hold; removed after.
		req.Agent = bootstrap.Salted(req.Agent)
		bin, err := req.Agent.Agent(runtime.GOOS, runtime.GOARCH)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			home, _ := os.UserHomeDir()
			for _, d := range bootstrap.StageCacheDirs(os.Getuid(), home, os.Getenv("XDG_RUNTIME_DIR")) {
				files, _ := filepath.Glob(filepath.Join(d, "agent-*-"+bin.Hash[:16]))
				for _, f := range files {
					os.Remove(f)
					os.Remove(filepath.Join(d, "."+filepath.Base(f)+".ok"))
				}
			}
		})
		conn, err := container.Start(context.Background(), req, container.Hop{
			Tool:        "fake",
			Command:     func(script string) (*exec.Cmd, error) { return exec.Command("sh", "-c", script), nil },
			OverNetwork: tc.overNetwork,
		})
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		up := logs.FilterMessageSnippet("agent uploaded (").All()
		if len(up) != 1 || !strings.HasSuffix(up[0].Message, tc.want) {
			t.Errorf("OverNetwork=%v: want one upload ending %q, got %v", tc.overNetwork, tc.want, up)
		}
	}
}

// TestClassifiedFailure: a tool that says the container does not exist
// gives ErrNoContainer (errkind.ErrNotFound) with the hint and its words.
func TestClassifiedFailure(t *testing.T) {
	req, _ := request(t)
	_, err := container.Start(context.Background(), req, container.Hop{
		Tool: "fake",
		Command: func(string) (*exec.Cmd, error) {
			return exec.Command("sh", "-c", "echo 'Error response from daemon: No such container: app1' >&2; exit 1"), nil
		},
		Rules: fakeRules,
	})
	if !errors.Is(err, container.ErrNoContainer) || !errors.Is(err, errkind.ErrNotFound) {
		t.Fatalf("%v: want ErrNoContainer", err)
	}
	for _, w := range []string{"fake: no such container", "check the name with `fake ps`", "No such container: app1"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
	if e := rpc.ToRemote(err); e.Kind != "not_found" {
		t.Errorf("kind on the wire: %q", e.Kind)
	}
}

// TestShellRules: the runtimes' words for a missing sh or user.
func TestShellRules(t *testing.T) {
	for out, want := range map[string]error{
		`OCI runtime exec failed: exec failed: unable to start container process: exec: "sh": executable file not found in $PATH: unknown`: container.ErrNoShell,
		"Error: crun: executable file `sh` not found in $PATH: No such file or directory":                                                  container.ErrNoShell,
		`lxc-attach: c1: attach.c: lxc_attach_run_command: 1841 No such file or directory - Failed to exec "sh"`:                           container.ErrNoShell,
		"unable to find user bob: no matching entries in passwd file":                                                                      container.ErrNoSuchUser,
		"Error response from daemon: No such container: x":                                                                                 nil,
		"sh: foo: not found": nil,
	} {
		if got := container.Classify(out, container.ShellRules("bob")); !errors.Is(got, want) || (want == nil) != (got == nil) {
			t.Errorf("%q: %v, want %v", out, got, want)
		}
	}
}

// TestUnrecognisedFailure: anything else is reported with what the tool
// said, and no kind.
func TestUnrecognisedFailure(t *testing.T) {
	req, _ := request(t)
	_, err := container.Start(context.Background(), req, container.Hop{
		Tool: "fake",
		Command: func(string) (*exec.Cmd, error) {
			return exec.Command("sh", "-c", "echo 'something odd' >&2; exit 3"), nil
		},
		Rules: fakeRules,
	})
	if err == nil || !strings.Contains(err.Error(), "fake: ") || !strings.Contains(err.Error(), "something odd") {
		t.Fatalf("%v", err)
	}
	if errors.Is(err, errkind.ErrNotFound) {
		t.Errorf("an unrecognised failure has a kind: %v", err)
	}
}

// TestTimeout: a child that never starts an agent is killed after
// Hop.Timeout, with ErrTimeout.
func TestTimeout(t *testing.T) {
	req, _ := request(t)
	var pid int
	_, err := container.Start(context.Background(), req, container.Hop{
		Tool: "fake",
		Command: func(string) (*exec.Cmd, error) {
			return exec.Command("sh", "-c", "sleep 1000"), nil
		},
		Launch: func(cmd *exec.Cmd) error {
			err := cmd.Start()
			pid = cmd.Process.Pid
			return err
		},
		Timeout: 200 * time.Millisecond,
	})
	if !errors.Is(err, container.ErrTimeout) || !errors.Is(err, errkind.ErrTimeout) {
		t.Fatalf("%v: want ErrTimeout", err)
	}
	// Its whole process group is gone, sleep included.
	if alive := groupAlive(pid); len(alive) > 0 {
		t.Fatalf("process group %d survived: %v", pid, alive)
	}
}

// TestCancel: cancelling the start kills the child and returns ctx.Err().
func TestCancel(t *testing.T) {
	req, _ := request(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pid int
	_, err := container.Start(ctx, req, container.Hop{
		Tool: "fake",
		Command: func(string) (*exec.Cmd, error) {
			return exec.Command("sh", "-c", "sleep 1000"), nil
		},
		Launch: func(cmd *exec.Cmd) error {
			err := cmd.Start()
			pid = cmd.Process.Pid
			cancel()
			return err
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v: want context.Canceled", err)
	}
	if alive := groupAlive(pid); len(alive) > 0 {
		t.Fatalf("process group %d survived: %v", pid, alive)
	}
}

// TestLaunchError: a child that cannot start is reported as such.
func TestLaunchError(t *testing.T) {
	req, _ := request(t)
	_, err := container.Start(context.Background(), req, container.Hop{
		Tool: "fake",
		Command: func(string) (*exec.Cmd, error) {
			return exec.Command("/nonexistent/fake"), nil
		},
	})
	if err == nil || !strings.Contains(err.Error(), "start fake") {
		t.Fatalf("%v", err)
	}
}

func TestToolResolve(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "docker")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool container.Tool
		kind error
		want []string
	}{
		{container.Tool{Name: "docker", Path: "/nonexistent/docker", Option: "DockerPath", Install: "docker.io"},
			container.ErrNotInstalled, []string{"docker: tool not installed", "/nonexistent/docker does not exist", "install docker.io", "set DockerPath"}},
		{container.Tool{Name: "spindle-no-such-tool", Option: "ToolPath", Install: "it"},
			container.ErrNotInstalled, []string{"spindle-no-such-tool is not on the PATH", "set ToolPath"}},
		{container.Tool{Name: "docker", Path: notExec, Option: "DockerPath"},
			container.ErrPermission, []string{"is not executable"}},
	} {
		_, err := tc.tool.Resolve()
		if !errors.Is(err, tc.kind) {
			t.Errorf("%+v: %v, want %v", tc.tool, err, tc.kind)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q does not say %q", err, w)
			}
		}
	}
	if p, err := (container.Tool{Name: "sh"}).Resolve(); err != nil || !filepath.IsAbs(p) {
		t.Errorf("sh: %q, %v", p, err)
	}
}

func TestToolOutput(t *testing.T) {
	sh := container.Tool{Name: "sh"}
	out, err := sh.Output(context.Background(), fakeRules, "-c", "echo 42; echo LC_ALL=$LC_ALL >&2")
	if err != nil || out != "42" {
		t.Fatalf("%q, %v", out, err)
	}
	_, err = sh.Output(context.Background(), fakeRules, "-c", "echo 'Error: No such container: x' >&2; exit 1")
	if !errors.Is(err, container.ErrNoContainer) || !strings.Contains(err.Error(), "sh said") {
		t.Fatalf("%v", err)
	}
	_, err = sh.Output(context.Background(), fakeRules, "-c", "echo odd >&2; exit 1")
	if err == nil || errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), "odd") {
		t.Fatalf("%v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sh.Output(ctx, fakeRules, "-c", "sleep 1000"); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{"app1": true, "a.b_c-d": true, "": false, "-it": false, "a\nb": false} {
		err := container.CheckName("docker", "Container", name)
		if (err == nil) != ok || (err != nil && !errors.Is(err, errkind.ErrBadArgs)) {
			t.Errorf("%q: %v", name, err)
		}
	}
}
