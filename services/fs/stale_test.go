package fs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/rpctest"
	"github.com/spindle-rpc/spindle/rpc"
	"golang.org/x/sys/unix"
)

// stalledGetEnv makes the test binary a controller whose GetFile stalls
// mid-transfer: "<src>\n<dst>". It prints "stalled" once the temporary
// file holds data, and goes on when its stdin ends. (A NUL cannot be
// in the environment; a newline is in no test path.)
const stalledGetEnv = "SPINDLE_FS_TEST_STALLED_GET"

func stalledGet(spec string) int {
	src, dst, _ := strings.Cut(spec, "\n")
	c := &stallingCaller{Caller: rpctest.New(Register)}
	if _, err := GetFile(context.Background(), c, src, dst, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type stallingCaller struct{ *rpctest.Caller }

func (c *stallingCaller) Stream(ctx context.Context, method string, args any) (rpc.Stream, error) {
	st, err := c.Caller.Stream(ctx, method, args)
	if err != nil {
		return nil, err
	}
	return &stallingStream{Stream: st}, nil
}

// stallingStream passes the first read through, then, on the second,
// says so and waits for its stdin to end.
type stallingStream struct {
	rpc.Stream
	reads int
}

func (s *stallingStream) Read(p []byte) (int, error) {
	s.reads++
	if s.reads == 2 {
		fmt.Println("stalled")
		io.Copy(io.Discard, os.Stdin)
	}
	return s.Stream.Read(p)
}

// startStalledGet starts a controller process whose get of src to dst
// stalls with its temporary file in dst's directory, and returns it with
// its stdin (closing it lets the get finish).
func startStalledGet(t *testing.T, src, dst string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), stalledGetEnv+"="+src+"\n"+dst)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "stalled\n" {
		t.Fatalf("the stalled get said %q, %v", line, err)
	}
	return cmd, in
}

// tempOf returns the one temporary file of pid in dir.
func tempOf(t *testing.T, dir string, pid int) string {
	t.Helper()
	var found []string
	for _, p := range temps(t, dir) {
		if owner, _, ok := tempOwner(filepath.Base(p)); ok && owner == pid {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("temporary files of %d in %s: %v, want one", pid, dir, found)
	}
	return found[0]
}

// TestKilledGetCleanedUp: a controller killed mid-get leaves its
// temporary file; the next get into that directory removes it, and not
// the temporary file of a get that is still running there, which then
// completes.
func TestKilledGetCleanedUp(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(t.TempDir(), "src")
	data := randomBytes(t, 1<<20)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	killed, _ := startStalledGet(t, src, filepath.Join(dir, "killed"))
	running, runningIn := startStalledGet(t, src, filepath.Join(dir, "running"))
	killedTemp := tempOf(t, dir, killed.Process.Pid)
	runningTemp := tempOf(t, dir, running.Process.Pid)
	killed.Process.Signal(syscall.SIGKILL)
	killed.Wait()

	if _, err := GetFile(context.Background(), rpctest.New(Register), src, filepath.Join(dir, "next"), false); err != nil {
		t.Fatal(err)
	}
	mustBeGone(t, killedTemp)
	mustExist(t, runningTemp)

	runningIn.Close()
	if err := running.Wait(); err != nil {
		t.Fatalf("the get that kept running failed: %v", err)
	}
	for _, name := range []string{"next", "running"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s: %d bytes, %v", name, len(b), err)
		}
	}
	if left := temps(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestRemoveStaleRules: what RemoveStale takes for stale, by the lock and
// the writer's pid and start time in the name.
func TestRemoveStaleRules(t *testing.T) {
	dir := t.TempDir()
	dead := deadPid(t)
	self := os.Getpid()
	name := func(base string, pid int, start uint64) string {
		if start == 0 {
			return filepath.Join(dir, "."+base+TempInfix+strconv.Itoa(pid)+"-0123456789abcdef")
		}
		return filepath.Join(dir, fmt.Sprintf(".%s%s%d-%d-0123456789abcdef", base, TempInfix, pid, start))
	}
	file := func(p string) string {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := []string{
		file(name("dead", dead, 0)),
		file(name("deadnew", dead, 12345)),
		file(name("reused", self, ownStart()+1)), // our pid, another process's start
	}
	link := name("deadlink", dead, 1)
	if err := os.Symlink("target", link); err != nil {
		t.Fatal(err)
	}
	stale = append(stale, link)
	live := []string{
		file(name("mine", self, ownStart())), // created, not yet locked
		file(name("mineold", self, 0)),
		file("not-a-temp"),
	}
	// A writer whose pid means nothing here (another pid namespace, another
	// host on NFS) is known by its lock.
	locked := file(name("locked", dead, 1))
	lf, err := os.Open(locked)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	live = append(live, locked)
	notFile := name("dir", dead, 1)
	if err := os.Mkdir(notFile, 0o700); err != nil {
		t.Fatal(err)
	}
	live = append(live, notFile)

	if n := RemoveStale(dir); n != len(stale) {
		t.Errorf("removed %d, want %d", n, len(stale))
	}
	mustBeGone(t, stale...)
	mustExist(t, live...)
}

// TestTempNameCarriesWriter: the names of temporary files parse back to
// this process.
func TestTempNameCarriesWriter(t *testing.T) {
	if ownStart() == 0 {
		t.Fatal("no start time for this process in /proc")
	}
	p, err := tempName(t.TempDir(), "x-y-z")
	if err != nil {
		t.Fatal(err)
	}
	pid, start, ok := tempOwner(filepath.Base(p))
	if !ok || pid != os.Getpid() || start != ownStart() {
		t.Fatalf("%s parsed as %d, %d, %v", p, pid, start, ok)
	}
}

// TestGetTreeRemovesStale: a tree get cleans the directories it writes
// into.
func TestGetTreeRemovesStale(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dst, fmt.Sprintf(".f%s%d-1-0123456789abcdef", TempInfix, deadPid(t)))
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := GetTree(context.Background(), rpctest.New(Register), src, dst, TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	mustBeGone(t, stale)
}
