package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit"
	"github.com/spindle-rpc/spindle/internal/testkit/rpctest"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/rpc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(stalledGetEnv); spec != "" {
		os.Exit(stalledGet(spec))
	}
	goleak.VerifyTestMain(m)
}

func run(t testing.TB, h rpc.Handler, method string, args any) (any, error) {
	t.Helper()
	c, _, err := rpc.NewCall(method, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h(context.Background(), c)
}

func mustRun(t testing.TB, h rpc.Handler, method string, args any) any {
	t.Helper()
	res, err := run(t, h, method, args)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return res
}

func wantKind(t testing.TB, err, kind error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", kind)
	}
	if !errors.Is(rpc.ToRemote(err), kind) {
		t.Fatalf("error %q (kind %q), want %v", err, rpc.ToRemote(err).Kind, kind)
	}
}

// noTemps fails when dir holds a leftover temporary file.
func noTemps(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), TempInfix) {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestRegister(t *testing.T) {
	reg := rpc.NewRegistry()
	Register(reg)
	want := []string{"fs.Checksum", "fs.Chmod", "fs.Chown", "fs.Get", "fs.List", "fs.Mkdir", "fs.Put", "fs.Read", "fs.Remove", "fs.Stat", "fs.Symlink", "fs.Walk", "fs.Write"}
	if got := reg.Methods(); !slices.Equal(got, want) {
		t.Fatalf("methods = %v", got)
	}
}

func TestRelativePaths(t *testing.T) {
	cases := []struct {
		h      rpc.Handler
		method string
		args   any
	}{
		{handleStat, MethodStat, &StatArgs{Path: "etc/passwd"}},
		{handleRead, MethodRead, &ReadArgs{Path: "./x"}},
		{handleWrite, MethodWrite, &WriteArgs{Path: "x", Data: []byte("x")}},
		{handleMkdir, MethodMkdir, &MkdirArgs{Path: "d"}},
		{handleRemove, MethodRemove, &RemoveArgs{Path: "d"}},
		{handleList, MethodList, &ListArgs{Path: "."}},
		{handleChmod, MethodChmod, &ChmodArgs{Path: "x", Mode: 0o600}},
		{handleChown, MethodChown, &ChownArgs{Path: "x", UID: -1, GID: -1}},
		{handleStat, MethodStat, &StatArgs{}},
		{handleStat, MethodStat, nil},
	}
	for _, c := range cases {
		_, err := run(t, c.h, c.method, c.args)
		wantKind(t, err, errkind.ErrBadArgs)
		if !strings.Contains(err.Error(), c.method) {
			t.Errorf("%s: error %q does not name the method", c.method, err)
		}
	}
	_, err := run(t, handleStat, MethodStat, &StatArgs{Path: "rel"})
	if !strings.Contains(err.Error(), "not absolute") {
		t.Errorf("unclear error: %v", err)
	}
	_, err = run(t, handleStat, MethodStat, []int{1, 2})
	wantKind(t, err, errkind.ErrBadArgs)
}

func TestStat(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "file")
	if err := os.WriteFile(f, []byte("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, 0o640); err != nil {
		t.Fatal(err)
	}
	fi := mustRun(t, handleStat, MethodStat, &StatArgs{Path: f}).(*FileInfo)
	st, _ := os.Stat(f)
	if fi.Name != "file" || fi.Size != 5 || fi.FileMode() != 0o640 || fi.IsDir || fi.IsSymlink ||
		fi.ModTime != st.ModTime().UnixNano() || fi.UID != os.Getuid() || fi.GID != os.Getgid() {
		t.Fatalf("stat = %+v", fi)
	}
	if !fi.Time().Equal(st.ModTime()) {
		t.Errorf("Time() = %v", fi.Time())
	}

	d := mustRun(t, handleStat, MethodStat, &StatArgs{Path: dir}).(*FileInfo)
	if !d.IsDir || d.FileMode()&iofs.ModeDir == 0 {
		t.Fatalf("dir stat = %+v", d)
	}

	link := filepath.Join(dir, "link")
	if err := os.Symlink("file", link); err != nil {
		t.Fatal(err)
	}
	fl := mustRun(t, handleStat, MethodStat, &StatArgs{Path: link}).(*FileInfo)
	if !fl.IsSymlink || fl.LinkTarget != "file" || fl.Size != 5 || fl.FileMode() != 0o640 || fl.Name != "link" {
		t.Fatalf("followed link = %+v", fl)
	}
	ll := mustRun(t, handleStat, MethodStat, &StatArgs{Path: link, NoFollow: true}).(*FileInfo)
	if !ll.IsSymlink || ll.LinkTarget != "file" || ll.FileMode()&iofs.ModeSymlink == 0 {
		t.Fatalf("lstat link = %+v", ll)
	}

	_, err := run(t, handleStat, MethodStat, &StatArgs{Path: filepath.Join(dir, "missing")})
	wantKind(t, err, errkind.ErrNotFound)
	if !strings.Contains(err.Error(), "missing") {
		t.Errorf("error does not name the path: %v", err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("nowhere", dangling); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, handleStat, MethodStat, &StatArgs{Path: dangling})
	wantKind(t, err, errkind.ErrNotFound)
	dl := mustRun(t, handleStat, MethodStat, &StatArgs{Path: dangling, NoFollow: true}).(*FileInfo)
	if !dl.IsSymlink || dl.LinkTarget != "nowhere" {
		t.Fatalf("dangling lstat = %+v", dl)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "file")
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	res := mustRun(t, handleRead, MethodRead, &ReadArgs{Path: f}).(*ReadResult)
	if !bytes.Equal(res.Data, data) || res.Info.Size != int64(len(data)) || res.Info.Name != "file" {
		t.Fatalf("read %d bytes, info %+v", len(res.Data), res.Info)
	}

	// Exactly MaxSize is fine, one byte less is too small.
	if _, err := run(t, handleRead, MethodRead, &ReadArgs{Path: f, MaxSize: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, handleRead, MethodRead, &ReadArgs{Path: f, MaxSize: int64(len(data)) - 1})
	wantKind(t, err, errkind.ErrTooLarge)
	if !strings.Contains(err.Error(), "circuit") {
		t.Errorf("too-large error does not point to circuits: %v", err)
	}

	// Default 1 MiB limit; the cap is 3 MiB whatever is asked.
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, DefaultReadSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, handleRead, MethodRead, &ReadArgs{Path: big})
	wantKind(t, err, errkind.ErrTooLarge)
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, make([]byte, MaxReadSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, handleRead, MethodRead, &ReadArgs{Path: huge, MaxSize: 1 << 40})
	wantKind(t, err, errkind.ErrTooLarge)
	if err := os.Truncate(huge, MaxReadSize); err != nil {
		t.Fatal(err)
	}
	res = mustRun(t, handleRead, MethodRead, &ReadArgs{Path: huge, MaxSize: 1 << 40}).(*ReadResult)
	if len(res.Data) != MaxReadSize {
		t.Fatalf("read %d bytes", len(res.Data))
	}
	// The largest reply fits one 4 MiB frame.
	if b, err := wire.Marshal(res); err != nil || len(b) > 4<<20-1024 {
		t.Fatalf("reply of %d bytes: %v", len(b), err)
	}

	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res = mustRun(t, handleRead, MethodRead, &ReadArgs{Path: empty}).(*ReadResult)
	if len(res.Data) != 0 {
		t.Fatalf("empty file read %d bytes", len(res.Data))
	}

	// Files that report size 0 but have content.
	if _, err := os.Stat("/proc/self/status"); err == nil {
		res = mustRun(t, handleRead, MethodRead, &ReadArgs{Path: "/proc/self/status"}).(*ReadResult)
		if !bytes.Contains(res.Data, []byte("Pid:")) {
			t.Fatalf("/proc/self/status = %q", res.Data)
		}
		_, err = run(t, handleRead, MethodRead, &ReadArgs{Path: "/proc/self/status", MaxSize: 10})
		wantKind(t, err, errkind.ErrTooLarge)
	}

	_, err = run(t, handleRead, MethodRead, &ReadArgs{Path: filepath.Join(dir, "missing")})
	wantKind(t, err, errkind.ErrNotFound)
	_, err = run(t, handleRead, MethodRead, &ReadArgs{Path: dir})
	wantKind(t, err, errkind.ErrBadArgs)
	_, err = run(t, handleRead, MethodRead, &ReadArgs{Path: f, MaxSize: -1})
	wantKind(t, err, errkind.ErrBadArgs)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, handleRead, MethodRead, &ReadArgs{Path: fifo})
	wantKind(t, err, errkind.ErrBadArgs)
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "new")
	fi := mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: []byte("one")}).(*FileInfo)
	if fi.Name != "new" || fi.Size != 3 || fi.FileMode() != 0o644 {
		t.Fatalf("write = %+v", fi)
	}
	if got, _ := os.ReadFile(f); string(got) != "one" {
		t.Fatalf("content %q", got)
	}
	// Replacing keeps the mode unless told otherwise.
	if err := os.Chmod(f, 0o600); err != nil {
		t.Fatal(err)
	}
	fi = mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: []byte("two")}).(*FileInfo)
	if fi.FileMode() != 0o600 {
		t.Fatalf("mode not kept: %v", fi.FileMode())
	}
	fi = mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: []byte("three"), Mode: 0o751}).(*FileInfo)
	if fi.FileMode() != 0o751 || fi.Size != 5 {
		t.Fatalf("write with mode = %+v", fi)
	}
	// NewMode is for a file that is not there yet only.
	fi = mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: []byte("four"), NewMode: 0o600}).(*FileInfo)
	if fi.FileMode() != 0o751 {
		t.Fatalf("NewMode changed a replaced file's mode: %v", fi.FileMode())
	}
	fi = mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: filepath.Join(dir, "fresh"), Data: []byte("x"), NewMode: 0o600}).(*FileInfo)
	if fi.FileMode() != 0o600 {
		t.Fatalf("a new file with NewMode 0600: %v", fi.FileMode())
	}
	// Explicit modes are exact, umask or not; special bits are allowed.
	g := filepath.Join(dir, "setgid")
	fi = mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: g, Data: nil, Mode: uint32(0o777 | iofs.ModeSetgid)}).(*FileInfo)
	if fi.FileMode() != 0o777|iofs.ModeSetgid || fi.Size != 0 {
		t.Fatalf("setgid write = %+v (%v)", fi, fi.FileMode())
	}
	_, err := run(t, handleWrite, MethodWrite, &WriteArgs{Path: g, Mode: uint32(iofs.ModeDir | 0o755)})
	wantKind(t, err, errkind.ErrBadArgs)

	// MkdirAll.
	deep := filepath.Join(dir, "a", "b", "c")
	_, err = run(t, handleWrite, MethodWrite, &WriteArgs{Path: deep, Data: []byte("x")})
	wantKind(t, err, errkind.ErrNotFound)
	if msg := err.Error(); !strings.Contains(msg, "no such directory "+filepath.Dir(deep)) || strings.Contains(msg, TempInfix) {
		t.Errorf("a missing directory is reported as %q; want it named, and no temporary file", msg)
	}
	mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: deep, Data: []byte("x"), MkdirAll: true})
	if got, _ := os.ReadFile(deep); string(got) != "x" {
		t.Fatalf("deep content %q", got)
	}

	// A symlink is followed: its target gets the content, the link stays.
	link := filepath.Join(dir, "link")
	if err := os.Symlink("new", link); err != nil {
		t.Fatal(err)
	}
	fi = mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: link, Data: []byte("via link")}).(*FileInfo)
	if !fi.IsSymlink || fi.Size != 8 {
		t.Fatalf("write via link = %+v", fi)
	}
	if got, _ := os.ReadFile(f); string(got) != "via link" {
		t.Fatalf("target content %q", got)
	}

	// A directory cannot be replaced by a file.
	_, err = run(t, handleWrite, MethodWrite, &WriteArgs{Path: filepath.Join(dir, "a"), Data: []byte("x")})
	wantKind(t, err, errkind.ErrExists)
	_, err = run(t, handleWrite, MethodWrite, &WriteArgs{Path: dir + "/", Data: []byte("x")})
	wantKind(t, err, errkind.ErrBadArgs)

	for _, d := range []string{dir, filepath.Join(dir, "a", "b")} {
		noTemps(t, d)
	}
}

func TestWriteOwner(t *testing.T) {
	testkit.NeedRoot(t, "giving files away")
	dir := t.TempDir()
	f := filepath.Join(dir, "owned")
	uid, gid := 4321, 4322
	fi := mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: []byte("x"), UID: &uid, GID: &gid, Mode: uint32(0o755 | iofs.ModeSetuid)}).(*FileInfo)
	if fi.UID != uid || fi.GID != gid || fi.FileMode() != 0o755|iofs.ModeSetuid {
		t.Fatalf("owned write = %+v (%v)", fi, fi.FileMode())
	}
	// Replacing keeps the owner.
	fi = mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: []byte("y")}).(*FileInfo)
	if fi.UID != uid || fi.GID != gid {
		t.Fatalf("owner not kept: %+v", fi)
	}
	fi = mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: []byte("z"), User: "root", Group: "0"}).(*FileInfo)
	if fi.UID != 0 || fi.GID != 0 {
		t.Fatalf("chown by name: %+v", fi)
	}
}

func TestWriteFailureLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "target")
	if err := os.WriteFile(f, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		noTemps(t, dir)
		if got, _ := os.ReadFile(f); string(got) != "original" {
			t.Fatalf("destination changed to %q", got)
		}
	}

	// The parent is a regular file.
	_, err := run(t, handleWrite, MethodWrite, &WriteArgs{Path: filepath.Join(f, "child"), Data: []byte("x")})
	if err == nil {
		t.Fatal("write under a regular file succeeded")
	}
	_, err = run(t, handleWrite, MethodWrite, &WriteArgs{Path: filepath.Join(f, "child"), Data: []byte("x"), MkdirAll: true})
	if err == nil {
		t.Fatal("write under a regular file succeeded")
	}
	check()

	// An unknown owner.
	_, err = run(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: []byte("x"), User: "no-such-user-spindle"})
	wantKind(t, err, errkind.ErrBadArgs)
	_, err = run(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: []byte("x"), Group: "no-such-group-spindle"})
	wantKind(t, err, errkind.ErrBadArgs)
	check()

	// A failure after the temporary file is written.
	var sawTemp string
	testHookBeforeRename = func(tmp string) error {
		sawTemp = tmp
		st, err := os.Stat(tmp)
		if err != nil {
			t.Errorf("temp file: %v", err)
		} else if st.Size() != 3 {
			t.Errorf("temp file holds %d bytes", st.Size())
		}
		return errors.New("injected failure")
	}
	defer func() { testHookBeforeRename = nil }()
	_, err = run(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: []byte("new")})
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("err = %v", err)
	}
	if base := filepath.Base(sawTemp); !strings.HasPrefix(base, ".target"+TempInfix) || filepath.Dir(sawTemp) != dir {
		t.Errorf("temp file %q not named .<name>%s<random> beside the destination", sawTemp, TempInfix)
	}
	check()

	// A cancelled call does not replace the file.
	testHookBeforeRename = nil
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, _, _ := rpc.NewCall(MethodWrite, &WriteArgs{Path: f, Data: []byte("new")}, nil)
	if _, err := handleWrite(ctx, c); !errors.Is(rpc.ToRemote(err), errkind.ErrCanceled) {
		t.Fatalf("cancelled write: %v", err)
	}
	check()
}

func TestWriteLongName(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, strings.Repeat("n", 255))
	mustRun(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: []byte("x")})
	noTemps(t, dir)
}

// TestWriteAtomic rewrites a 1 MiB file while a reader checks that every
// read sees one whole version.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "big")
	const size, rounds = 1 << 20, 50
	if err := os.WriteFile(f, bytes.Repeat([]byte{'A'}, size), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads int
	var readErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 1_000_000; i++ {
			select {
			case <-done:
				return
			default:
			}
			c, _, err := rpc.NewCall(MethodRead, &ReadArgs{Path: f}, nil)
			if err != nil {
				readErr = err
				return
			}
			res, err := handleRead(context.Background(), c)
			if err != nil {
				readErr = err
				return
			}
			data := res.(*ReadResult).Data
			if len(data) != size {
				readErr = fmt.Errorf("partial file: %d bytes", len(data))
				return
			}
			if n := bytes.Count(data, data[:1]); n != size {
				readErr = errors.New("mixed content")
				return
			}
			reads++
		}
	}()
	for i := range rounds {
		data := bytes.Repeat([]byte{byte('B' + i%26)}, size)
		if _, err := run(t, handleWrite, MethodWrite, &WriteArgs{Path: f, Data: data}); err != nil {
			t.Error(err)
			break
		}
	}
	close(done)
	wg.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
	t.Logf("%d whole reads during %d rewrites", reads, rounds)
	noTemps(t, dir)
}

func TestMkdir(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "d")
	fi := mustRun(t, handleMkdir, MethodMkdir, &MkdirArgs{Path: d}).(*FileInfo)
	if !fi.IsDir {
		t.Fatalf("mkdir = %+v", fi)
	}
	_, err := run(t, handleMkdir, MethodMkdir, &MkdirArgs{Path: d})
	wantKind(t, err, errkind.ErrExists)
	mustRun(t, handleMkdir, MethodMkdir, &MkdirArgs{Path: d, Parents: true, Mode: 0o700})
	if st, _ := os.Stat(d); st.Mode().Perm() == 0o700 {
		t.Error("mkdir -p changed an existing directory's mode")
	}
	_, err = run(t, handleMkdir, MethodMkdir, &MkdirArgs{Path: filepath.Join(dir, "x", "y")})
	wantKind(t, err, errkind.ErrNotFound)
	deep := filepath.Join(dir, "x", "y", "z")
	fi = mustRun(t, handleMkdir, MethodMkdir, &MkdirArgs{Path: deep, Parents: true, Mode: 0o777 | uint32(iofs.ModeSticky)}).(*FileInfo)
	if fi.FileMode() != iofs.ModeDir|iofs.ModeSticky|0o777 {
		t.Fatalf("deep mkdir mode = %v", fi.FileMode())
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, handleMkdir, MethodMkdir, &MkdirArgs{Path: file, Parents: true})
	wantKind(t, err, errkind.ErrExists)
}

func TestRemove(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := mustRun(t, handleRemove, MethodRemove, &RemoveArgs{Path: f}).(*RemoveResult)
	if !res.Removed {
		t.Fatal("not removed")
	}
	if _, err := os.Lstat(f); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatal("still there")
	}
	_, err := run(t, handleRemove, MethodRemove, &RemoveArgs{Path: f})
	wantKind(t, err, errkind.ErrNotFound)
	res = mustRun(t, handleRemove, MethodRemove, &RemoveArgs{Path: f, MissingOK: true}).(*RemoveResult)
	if res.Removed {
		t.Fatal("missing file reported removed")
	}

	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "a", "b", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, handleRemove, MethodRemove, &RemoveArgs{Path: tree})
	wantKind(t, err, errkind.ErrBadArgs)
	mustRun(t, handleRemove, MethodRemove, &RemoveArgs{Path: tree, Recursive: true})
	if _, err := os.Lstat(tree); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatal("tree still there")
	}
	// Empty directories go without Recursive; a symlink goes, not its target.
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, handleRemove, MethodRemove, &RemoveArgs{Path: empty})
	keep := filepath.Join(dir, "keep")
	if err := os.Mkdir(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("keep", link); err != nil {
		t.Fatal(err)
	}
	mustRun(t, handleRemove, MethodRemove, &RemoveArgs{Path: link, Recursive: true})
	if _, err := os.Stat(keep); err != nil {
		t.Fatal("symlink target removed")
	}
	for _, p := range []string{"/", "//", "/.", "/tmp/.."} {
		_, err = run(t, handleRemove, MethodRemove, &RemoveArgs{Path: p, Recursive: true})
		wantKind(t, err, errkind.ErrBadArgs)
	}
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"c", "a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	list := mustRun(t, handleList, MethodList, &ListArgs{Path: dir}).([]FileInfo)
	var names []string
	for _, fi := range list {
		names = append(names, fi.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c", "d", "l"}) {
		t.Fatalf("names = %v", names)
	}
	if list[0].Size != 2 || !list[3].IsDir || !list[4].IsSymlink || list[4].LinkTarget != "a" {
		t.Fatalf("list = %+v", list)
	}

	empty := t.TempDir()
	list = mustRun(t, handleList, MethodList, &ListArgs{Path: empty}).([]FileInfo)
	if len(list) != 0 {
		t.Fatalf("empty list = %v", list)
	}
	// The empty list survives the wire as a list.
	b, _ := wire.Marshal(list)
	var back []FileInfo
	if err := wire.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}

	_, err := run(t, handleList, MethodList, &ListArgs{Path: filepath.Join(dir, "missing")})
	wantKind(t, err, errkind.ErrNotFound)
	_, err = run(t, handleList, MethodList, &ListArgs{Path: filepath.Join(dir, "a")})
	wantKind(t, err, errkind.ErrBadArgs)
}

func TestChmod(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fi := mustRun(t, handleChmod, MethodChmod, &ChmodArgs{Path: f, Mode: 0o600}).(*FileInfo)
	if fi.FileMode() != 0o600 {
		t.Fatalf("mode = %v", fi.FileMode())
	}
	fi = mustRun(t, handleChmod, MethodChmod, &ChmodArgs{Path: f, Mode: 0}).(*FileInfo)
	if fi.FileMode() != 0 {
		t.Fatalf("explicit 0 mode = %v", fi.FileMode())
	}
	_, err := run(t, handleChmod, MethodChmod, &StatArgs{Path: f}) // no mode
	wantKind(t, err, errkind.ErrBadArgs)
	_, err = run(t, handleChmod, MethodChmod, &ChmodArgs{Path: f, Mode: 1 << 31})
	wantKind(t, err, errkind.ErrBadArgs)
	_, err = run(t, handleChmod, MethodChmod, &ChmodArgs{Path: filepath.Join(dir, "missing"), Mode: 0o600})
	wantKind(t, err, errkind.ErrNotFound)
}

func TestChown(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Absent ids mean unchanged: a no-op any user may do.
	fi := mustRun(t, handleChown, MethodChown, &StatArgs{Path: f}).(*FileInfo)
	if fi.UID != os.Getuid() {
		t.Fatalf("absent uid changed the owner: %+v", fi)
	}
	_, err := run(t, handleChown, MethodChown, &ChownArgs{Path: f, UID: -1, GID: -1, User: "no-such-user-spindle"})
	wantKind(t, err, errkind.ErrBadArgs)
	_, err = run(t, handleChown, MethodChown, &ChownArgs{Path: f, UID: -2, GID: -1})
	wantKind(t, err, errkind.ErrBadArgs)
	_, err = run(t, handleChown, MethodChown, &ChownArgs{Path: filepath.Join(dir, "missing"), UID: -1, GID: -1})
	wantKind(t, err, errkind.ErrNotFound)

	if os.Getuid() != 0 {
		_, err = run(t, handleChown, MethodChown, &ChownArgs{Path: f, UID: 0, GID: -1})
		wantKind(t, err, errkind.ErrPermission)
		return
	}
	fi = mustRun(t, handleChown, MethodChown, &ChownArgs{Path: f, UID: 1234, GID: -1}).(*FileInfo)
	if fi.UID != 1234 || fi.GID != 0 {
		t.Fatalf("chown uid: %+v", fi)
	}
	fi = mustRun(t, handleChown, MethodChown, &ChownArgs{Path: f, UID: -1, GID: 99}).(*FileInfo)
	if fi.UID != 1234 || fi.GID != 99 {
		t.Fatalf("chown gid: %+v", fi)
	}
	fi = mustRun(t, handleChown, MethodChown, &ChownArgs{Path: f, UID: -1, GID: -1, User: "root", Group: "root"}).(*FileInfo)
	if fi.UID != 0 || fi.GID != 0 {
		t.Fatalf("chown by name: %+v", fi)
	}
	_, err = run(t, handleChown, MethodChown, &ChownArgs{Path: f, UID: 5, GID: -1, User: "root"})
	wantKind(t, err, errkind.ErrBadArgs)

	link := filepath.Join(dir, "link")
	if err := os.Symlink("f", link); err != nil {
		t.Fatal(err)
	}
	fi = mustRun(t, handleChown, MethodChown, &ChownArgs{Path: link, UID: 777, GID: 778, NoFollow: true}).(*FileInfo)
	if fi.UID != 777 || fi.GID != 778 || !fi.IsSymlink {
		t.Fatalf("lchown: %+v", fi)
	}
	if st, _ := os.Stat(f); st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatal("lchown changed the target")
	}
}

func TestClientHelpers(t *testing.T) {
	reg := rpc.NewRegistry()
	Register(reg)
	c := &rpctest.Caller{Registry: reg}
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "f")

	fi, err := Write(ctx, c, p, []byte("hello"), WriteOptions{Mode: 0o600, MkdirAll: true})
	if err != nil || fi.Size != 5 || fi.FileMode() != 0o600 {
		t.Fatalf("Write = %+v, %v", fi, err)
	}
	if _, err := Write(ctx, c, filepath.Join(dir, "empty"), nil, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := Read(ctx, c, p, 0)
	if err != nil || string(data) != "hello" {
		t.Fatalf("Read = %q, %v", data, err)
	}
	if data, err := Read(ctx, c, filepath.Join(dir, "empty"), 0); err != nil || data == nil || len(data) != 0 {
		t.Fatalf("Read empty = %#v, %v", data, err)
	}
	if _, err := Read(ctx, c, p, 2); !errors.Is(err, errkind.ErrTooLarge) {
		t.Fatalf("Read small max: %v", err)
	}
	if fi, err := Stat(ctx, c, p); err != nil || fi.Name != "f" {
		t.Fatalf("Stat = %+v, %v", fi, err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "sub", "l")); err != nil {
		t.Fatal(err)
	}
	if fi, err := Lstat(ctx, c, filepath.Join(dir, "sub", "l")); err != nil || fi.FileMode()&iofs.ModeSymlink == 0 {
		t.Fatalf("Lstat = %+v, %v", fi, err)
	}
	if _, err := Stat(ctx, c, filepath.Join(dir, "nope")); !errors.Is(err, errkind.ErrNotFound) {
		t.Fatalf("Stat missing: %v", err)
	}
	if fi, err := Mkdir(ctx, c, filepath.Join(dir, "m", "n"), 0o700, true); err != nil || !fi.IsDir || fi.FileMode().Perm() != 0o700 {
		t.Fatalf("Mkdir = %+v, %v", fi, err)
	}
	if fi, err := Chmod(ctx, c, p, 0o640); err != nil || fi.FileMode() != 0o640 {
		t.Fatalf("Chmod = %+v, %v", fi, err)
	}
	if fi, err := Chown(ctx, c, p, ChownOptions{}); err != nil || fi.UID != os.Getuid() {
		t.Fatalf("Chown no-op = %+v, %v", fi, err)
	}
	if os.Getuid() == 0 {
		uid := 2345
		if fi, err := Chown(ctx, c, p, ChownOptions{UID: &uid}); err != nil || fi.UID != uid || fi.GID != os.Getgid() {
			t.Fatalf("Chown = %+v, %v", fi, err)
		}
	}
	list, err := List(ctx, c, filepath.Join(dir, "sub"))
	if err != nil || len(list) != 2 || list[0].Name != "f" || list[1].Name != "l" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if removed, err := Remove(ctx, c, filepath.Join(dir, "sub"), RemoveOptions{Recursive: true}); err != nil || !removed {
		t.Fatalf("Remove = %v, %v", removed, err)
	}
	if removed, err := Remove(ctx, c, filepath.Join(dir, "sub"), RemoveOptions{MissingOK: true}); err != nil || removed {
		t.Fatalf("Remove missing = %v, %v", removed, err)
	}
	if _, err := Remove(ctx, c, "relative", RemoveOptions{}); !errors.Is(err, errkind.ErrBadArgs) {
		t.Fatalf("Remove relative: %v", err)
	}
}

func TestHoldOldKeepsOnlyLargeRegularFiles(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, holdOldMin), 0o644); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(big, link); err != nil {
		t.Fatal(err)
	}
	f := holdOld(big)
	if f == nil {
		t.Fatal("a 1 MiB file was not held")
	}
	f.Close()
	for _, p := range []string{small, link, dir, filepath.Join(dir, "missing")} {
		if f := holdOld(p); f != nil {
			f.Close()
			t.Errorf("holdOld(%s) held it", p)
		}
	}
}
