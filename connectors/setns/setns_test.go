package setns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/containertest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
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

func TestNameAndInspectArgv(t *testing.T) {
	for _, c := range []struct {
		o             Options
		name, inspect string
	}{
		{Options{Container: "app1"}, "setns:app1", "docker inspect --type=container --format={{.State.Pid}} app1"},
		{Options{Container: "app1", User: "app", Runtime: Podman}, "setns:app@app1", "podman inspect --type=container --format={{.State.Pid}} app1"},
		{Options{Container: "c1", Runtime: LXC, RuntimePath: "/opt/lxc-info"}, "setns:c1", "/opt/lxc-info -n c1 -p -H"},
		{Options{PID: 4242}, "setns:4242", "docker inspect --type=container --format={{.State.Pid}} "},
		{Options{Container: "x", ContextName: "db"}, "db", "docker inspect --type=container --format={{.State.Pid}} x"},
	} {
		if got := c.o.Name(); got != c.name {
			t.Errorf("%+v: name %q, want %q", c.o, got, c.name)
		}
		if got := strings.Join(c.o.InspectArgv(), " "); got != c.inspect {
			t.Errorf("%+v: inspect %q, want %q", c.o, got, c.inspect)
		}
	}
	if argv := (Options{Container: "x", Runtime: "rkt"}).InspectArgv(); argv != nil {
		t.Errorf("unknown runtime: %q", argv)
	}
}

func TestRegistry(t *testing.T) {
	o := Options{PID: 1, Container: "c", Runtime: Podman, RuntimePath: "/x", User: "app", Timeout: time.Second, ContextName: "n"}
	b, _ := msgpack.Marshal(o)
	newZero, ok := connectors.Lookup("setns")
	if !ok {
		t.Fatal("setns not registered")
	}
	r := newZero()
	if err := msgpack.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	if got := *r.(*Options); !reflect.DeepEqual(got, o) || r.Kind() != "setns" {
		t.Errorf("round trip: %+v", got)
	}
}

func TestLeaderArgs(t *testing.T) {
	ctx := context.Background()
	for _, o := range []Options{{}, {PID: 1, Container: "x"}, {Container: "x", Runtime: "rkt"}, {Container: "-x"}} {
		if _, err := o.leader(ctx); !errors.Is(err, errkind.ErrBadArgs) {
			t.Errorf("%+v: %v, want ErrBadArgs", o, err)
		}
	}
	if pid, err := (Options{PID: 42}).leader(ctx); pid != 42 || err != nil {
		t.Errorf("PID 42: %d, %v", pid, err)
	}
	_, err := (Options{Container: "x", RuntimePath: "/nonexistent/docker"}).leader(ctx)
	if !errors.Is(err, container.ErrNotInstalled) || !strings.Contains(err.Error(), "RuntimePath") {
		t.Errorf("missing docker: %v", err)
	}
}

// The leader PID as a runtime reports it, with fake runtimes.
func TestLeaderFromRuntime(t *testing.T) {
	dir := t.TempDir()
	n := 0
	fake := func(body string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("runtime%d", n))
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	if pid, err := (Options{Container: "c", RuntimePath: fake("echo 4321")}).leader(ctx); pid != 4321 || err != nil {
		t.Errorf("4321: %d, %v", pid, err)
	}
	for _, body := range []string{"echo 0", "true"} {
		if _, err := (Options{Container: "c", RuntimePath: fake(body)}).leader(ctx); !errors.Is(err, container.ErrNotRunning) {
			t.Errorf("%q: %v, want ErrNotRunning", body, err)
		}
	}
	if _, err := (Options{Container: "c", RuntimePath: fake("echo oops")}).leader(ctx); err == nil || !strings.Contains(err.Error(), "not a PID") {
		t.Errorf("oops: %v", err)
	}
	_, err := (Options{Container: "c", RuntimePath: fake("echo 'Error: No such container: c' >&2; exit 1")}).leader(ctx)
	if !errors.Is(err, container.ErrNoContainer) || !strings.Contains(err.Error(), "docker ps -a") {
		t.Errorf("no such container: %v", err)
	}
	_, err = (Options{Container: "c", Runtime: LXC, RuntimePath: fake("echo 'c doesn'\\''t exist' >&2; exit 1")}).leader(ctx)
	if !errors.Is(err, container.ErrNoContainer) || !strings.Contains(err.Error(), "lxc-ls -f") {
		t.Errorf("lxc, no such container: %v", err)
	}
}

// A fake container root: the user database is read inside it, an absolute
// symlink included (it must not lead to the host's file).
func TestLookupUser(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	// The container's real user database, under a name of this run that
	// the host has no file of.
	dbName := "passwd-" + filepath.Base(filepath.Dir(dir))
	if _, err := os.Lstat(filepath.Join("/etc", dbName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the host has an /etc/%s (%v): the symlink check would prove nothing", dbName, err)
	}
	must(os.WriteFile(filepath.Join(dir, "etc", dbName), []byte(
		"root:x:0:0:root:/root:/bin/sh\n# comment\napp:x:1000:1000:App:/home/app:/bin/sh\nbroken:x:a:b::/:\n"), 0o644))
	// Absolute: resolved in the container's root, this is its
	// /etc/passwd-…; on the host there is no such file.
	must(os.Symlink(filepath.Join("/etc", dbName), filepath.Join(dir, "etc", "passwd")))
	must(os.WriteFile(filepath.Join(dir, "etc", "group"), []byte("root:x:0:\nwheel:x:10:app,bob\napp:x:1000:\ndocker:x:999:app\n"), 0o644))
	root, err := os.OpenFile(dir, os.O_RDONLY, 0)
	must(err)
	defer root.Close()

	for spec, want := range map[string]user{
		"":          {uid: 0, gid: 0, groups: []uint32{0}, name: "root", home: "/root"},
		"app":       {uid: 1000, gid: 1000, groups: []uint32{1000, 10, 999}, name: "app", home: "/home/app"},
		"1000":      {uid: 1000, gid: 1000, groups: []uint32{1000, 10, 999}, name: "app", home: "/home/app"},
		"app:10":    {uid: 1000, gid: 10, groups: []uint32{10, 999}, name: "app", home: "/home/app"},
		"4321":      {uid: 4321, gid: 0, groups: []uint32{0}, home: "/"},
		"4321:4321": {uid: 4321, gid: 4321, groups: []uint32{4321}, home: "/"},
	} {
		got, err := lookupUser(root, spec)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %+v, %v; want %+v", spec, got, err, want)
		}
	}
	if _, err := lookupUser(root, "nosuchuser"); !errors.Is(err, container.ErrNoSuchUser) || !errors.Is(err, errkind.ErrNotFound) {
		t.Errorf("nosuchuser: %v", err)
	}
	if _, err := lookupUser(root, "app:staff"); !errors.Is(err, errkind.ErrBadArgs) {
		t.Errorf("app:staff: %v", err)
	}
}

func TestEnvironPath(t *testing.T) {
	if p := os.Getenv("PATH"); p != "" {
		if got := environPath(os.Getpid()); got != p {
			t.Errorf("our PATH through /proc: %q, want %q", got, p)
		}
	}
	if got := environPath(-1); got != DefaultPath {
		t.Errorf("no process: %q", got)
	}
}

// TestDisposableThread: f never runs on the main thread, and the threads
// it ran on are gone once it returned (the thread name stands in for
// namespaces: it is per thread too).
func TestDisposableThread(t *testing.T) {
	const name = "spt-tainted"
	detours := mainThreadDetours.Load()
	for i := 0; i < 200; i++ {
		var tid int
		onDisposableThread(func() {
			tid = unix.Gettid()
			if err := os.WriteFile("/proc/thread-self/comm", []byte(name), 0); err != nil {
				t.Error(err)
			}
		})
		if tid == os.Getpid() {
			t.Fatal("f ran on the main thread")
		}
	}
	t.Logf("%d of 200 runs started on the main thread and moved off it", mainThreadDetours.Load()-detours)
	// Ending a thread has no event to wait on: look until they are gone
	// (bounded; no sleep).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		comms, _ := filepath.Glob("/proc/self/task/*/comm")
		for _, p := range comms {
			if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == name {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads that ran f are still alive: %v", left)
		}
		runtime.Gosched()
	}
}

// netNamespaces lists the network namespace of each of our threads.
func netNamespaces(t *testing.T) map[string]bool {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range tasks {
		if l, err := os.Readlink(p); err == nil { // a thread may exit meanwhile
			out[l] = true
		}
	}
	return out
}

// TestStartInContainer runs Start itself (as a parent agent does) against
// a real container, then checks that no thread of this process was left
// in the container's namespaces: the thread that joined them is gone.
func TestStartInContainer(t *testing.T) {
	containertest.NeedRoot(t, "setns enters a container's namespaces")
	c := containertest.Run(t)
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", c.LeaderPID))
	if err != nil {
		t.Fatal(err)
	}
	before := netNamespaces(t)
	if before[theirs] {
		t.Fatalf("a thread is in the container's network namespace before the start: %v", before)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := (Options{Container: c.Name}).Start(ctx, connectors.StartRequest{ID: 9, Parent: 1, Name: "setns:" + c.Name,
		Agent: bootstrap.FromFile(agentPath, runtime.GOOS, runtime.GOARCH)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The agent is in the container's pid namespace: pid 1 there is the
	// container's sleep, so the agent has a small pid other than 1.
	if conn.Hello.PID <= 1 || conn.Hello.PID == os.Getpid() || conn.Hello.UID != 0 {
		t.Errorf("hello %+v", conn.Hello)
	}
	// The locked thread ends when its goroutine does, right after the
	// fork; the runtime gives no event for it, so look until it is gone
	// (bounded; no sleep).
	deadline := time.Now().Add(10 * time.Second)
	for netNamespaces(t)[theirs] {
		if time.Now().After(deadline) {
			var which []string
			tasks, _ := filepath.Glob("/proc/self/task/*/ns/net")
			for _, p := range tasks {
				if l, _ := os.Readlink(p); l == theirs {
					which = append(which, strings.Split(p, "/")[4])
				}
			}
			t.Fatalf("threads %v of process %d stayed in the container's network namespace %s", which, os.Getpid(), theirs)
		}
		runtime.Gosched()
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
}

// The inspect rules' patterns compile (lazyre compiles on first match).
func TestInspectRulesCompile(t *testing.T) {
	for _, r := range (Options{Container: "c"}).inspectRules() {
		if _, err := regexp.Compile(r.Match.String()); err != nil {
			t.Error(err)
		}
	}
}
