package fs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/rpctest"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/rpc"
)

// treeEntry is what compareTrees looks at in one entry.
type treeEntry struct {
	mode    iofs.FileMode // type and modeBits
	data    string        // a regular file's content
	mtime   int64         // a regular file's mtime
	target  string        // a symlink's target
	dirMode iofs.FileMode
}

// snapshot describes the tree under root (root's own mode under "").
func snapshot(t *testing.T, root string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	st, err := walkTree(context.Background(), root, MaxWalkEntries, func(e *WalkEntry) error {
		m := e.FileMode()
		te := treeEntry{mode: m.Type() | m&iofs.FileMode(modeBits)}
		full := filepath.Join(root, e.Path)
		switch {
		case m.IsRegular():
			b, err := os.ReadFile(full)
			if err != nil {
				return err
			}
			te.data, te.mtime = string(b), e.ModTime
		case m&iofs.ModeSymlink != 0:
			te.target = e.Target
		}
		out[e.Path] = te
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", root, err)
	}
	out[""] = treeEntry{mode: st.Mode().Type() | st.Mode()&iofs.FileMode(modeBits)}
	return out
}

// compareTrees fails unless the trees under a and b have the same entries,
// types, contents, symlink targets and modes, and (when mtimes) the same
// file mtimes.
func compareTrees(t *testing.T, a, b string, mtimes bool) {
	t.Helper()
	sa, sb := snapshot(t, a), snapshot(t, b)
	for p, ea := range sa {
		eb, ok := sb[p]
		switch {
		case !ok:
			t.Errorf("%q: in %s, missing from %s", p, a, b)
		case ea.mode != eb.mode:
			t.Errorf("%q: mode %v, copy has %v", p, ea.mode, eb.mode)
		case ea.data != eb.data:
			t.Errorf("%q: content differs (%d and %d bytes)", p, len(ea.data), len(eb.data))
		case ea.target != eb.target:
			t.Errorf("%q: symlink to %q, copy to %q", p, ea.target, eb.target)
		case mtimes && ea.mtime != eb.mtime:
			t.Errorf("%q: mtime %v, copy has %v", p, time.Unix(0, ea.mtime), time.Unix(0, eb.mtime))
		}
	}
	for p := range sb {
		if _, ok := sa[p]; !ok {
			t.Errorf("%q: in the copy %s only", p, b)
		}
	}
}

// noTempsUnder fails when a temporary file is left anywhere under root.
func noTempsUnder(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), TempInfix) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// testTree is the tree the copy tests use: nested directories, empty
// files, a streamed file, 200 small files, symlinks, assorted modes and
// mtimes with nanoseconds. It returns the number of regular files and
// symlinks, of directories below src, and of bytes.
func testTree(t *testing.T, src string) (files, dirs int, bytes int64) {
	t.Helper()
	mt := func(i int) time.Time { return time.Unix(1_600_000_000+int64(i)*3600, int64(i)*1_000_003+7) }
	n := 0
	file := func(rel string, data []byte, mode iofs.FileMode) {
		t.Helper()
		p := filepath.Join(src, rel)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		n++
		if err := os.Chtimes(p, mt(n), mt(n)); err != nil {
			t.Fatal(err)
		}
		files++
		bytes += int64(len(data))
	}
	dir := func(rel string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(src, rel), 0o755); err != nil {
			t.Fatal(err)
		}
		dirs++
	}
	dir("a")
	dir("a/b")
	dir("a/b/c")
	dir("empty-dir")
	dir("private")
	dir("many")
	dir("readonly")
	file("a/b/c/deep.txt", []byte("deep\n"), 0o644)
	file("empty", nil, 0o644)
	file("a/empty", nil, 0o600)
	file("big.bin", randomBytes(t, 2*copyBuffer+InlineLimit+17), 0o640)
	file("inline-max", randomBytes(t, InlineLimit), 0o644)
	file("private/secret", []byte("s3cret"), 0o600)
	file("script.sh", []byte("#!/bin/sh\necho hi\n"), 0o755)
	file("setuid", []byte("x"), 0o755|iofs.ModeSetuid)
	file("readonly/file", []byte("ro"), 0o444)
	for i := range 200 {
		file(fmt.Sprintf("many/f%03d", i), randomBytes(t, i*37%3000), 0o644)
	}
	for _, l := range [][2]string{{"link", "a/b/c/deep.txt"}, {"a/up", "../script.sh"}, {"dangling", "/nonexistent/target"}} {
		if err := os.Symlink(l[1], filepath.Join(src, l[0])); err != nil {
			t.Fatal(err)
		}
		files++
	}
	for rel, mode := range map[string]iofs.FileMode{"private": 0o700, "readonly": 0o555, "a/b": 0o750, "": 0o711} {
		if err := os.Chmod(filepath.Join(src, rel), mode); err != nil {
			t.Fatal(err)
		}
	}
	return files, dirs, bytes
}

// PutTree then GetTree with Preserve reproduces the tree exactly: content,
// types, symlinks, modes and file mtimes; TreeResult, Total and Progress
// agree with the bytes moved, and no temporary file is left.
func TestTreeRoundTripPreserve(t *testing.T) {
	c := rpctest.New(Register)
	ctx := context.Background()
	base := t.TempDir()
	src, mid, back := filepath.Join(base, "src"), filepath.Join(base, "remote"), filepath.Join(base, "back")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	files, dirs, size := testTree(t, src)

	for _, step := range []struct {
		name     string
		from, to string
		copy     func(context.Context, rpc.Caller, string, string, TreeOptions) (*TreeResult, error)
	}{{"PutTree", src, mid, PutTree}, {"GetTree", mid, back, GetTree}} {
		var progress atomic.Int64
		var totalFiles, totalCalls int
		var totalBytes int64
		opts := TreeOptions{Preserve: true, Parallel: 8,
			Progress: func(n int64) { progress.Add(n) },
			Total:    func(f int, b int64) { totalFiles, totalBytes = f, b; totalCalls++ }}
		res, err := step.copy(ctx, c, step.from, step.to, opts)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if res.Files != files || res.Dirs != dirs+1 || res.Bytes != size {
			t.Errorf("%s: %+v, want %d files, %d dirs, %d bytes", step.name, res, files, dirs+1, size)
		}
		if totalCalls != 1 || totalFiles != files || totalBytes != size {
			t.Errorf("%s: Total called %d times with %d files, %d bytes; want once with %d, %d", step.name, totalCalls, totalFiles, totalBytes, files, size)
		}
		if got := progress.Load(); got != size {
			t.Errorf("%s: Progress reported %d bytes, want %d", step.name, got, size)
		}
		compareTrees(t, step.from, step.to, true)
		noTempsUnder(t, step.to)
	}
	compareTrees(t, src, back, true)

	// Copying again over the existing tree changes nothing.
	if _, err := PutTree(ctx, c, src, mid, TreeOptions{Preserve: true}); err != nil {
		t.Fatalf("PutTree over an existing copy: %v", err)
	}
	compareTrees(t, src, mid, true)
}

// Without Preserve, new files and directories get the source's permissions
// less group/other write and setuid, setgid, sticky; file mtimes are not
// kept; an existing directory keeps its mode; replaced files get the new
// content.
func TestTreeWithoutPreserve(t *testing.T) {
	c := rpctest.New(Register)
	ctx := context.Background()
	base := t.TempDir()
	src := filepath.Join(base, "src")
	os.Mkdir(src, 0o755)
	old := time.Unix(1_000_000_000, 0)
	write := func(rel string, mode iofs.FileMode) {
		p := filepath.Join(src, rel)
		os.WriteFile(p, []byte(rel), 0o600)
		os.Chmod(p, mode)
		os.Chtimes(p, old, old)
	}
	os.Mkdir(filepath.Join(src, "d"), 0o777)
	os.Chmod(filepath.Join(src, "d"), 0o777)
	os.Mkdir(filepath.Join(src, "keep"), 0o700)
	write("secret", 0o600)
	write("script", 0o775)
	write("shared", 0o666)
	write("setuid", 0o4755)
	write("d/f", 0o644)

	for name, copyTree := range map[string]func(context.Context, rpc.Caller, string, string, TreeOptions) (*TreeResult, error){
		"PutTree": PutTree, "GetTree": GetTree,
	} {
		dst := filepath.Join(base, name)
		os.MkdirAll(filepath.Join(dst, "keep"), 0o755)
		os.Chmod(filepath.Join(dst, "keep"), 0o751)
		os.WriteFile(filepath.Join(dst, "shared"), []byte("old content"), 0o600)
		if _, err := copyTree(ctx, c, src, dst, TreeOptions{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for rel, want := range map[string]iofs.FileMode{"secret": 0o600, "script": 0o755, "shared": 0o644, "setuid": 0o755, "d": 0o755 | iofs.ModeDir, "d/f": 0o644, "keep": 0o751 | iofs.ModeDir} {
			st, err := os.Stat(filepath.Join(dst, rel))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := st.Mode() & (iofs.ModeType | iofs.FileMode(modeBits)); got != want {
				t.Errorf("%s: %s has mode %v, want %v", name, rel, got, want)
			}
			if !st.IsDir() && st.ModTime().Equal(old) {
				t.Errorf("%s: %s kept its mtime without Preserve", name, rel)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(dst, "shared")); string(b) != "shared" {
			t.Errorf("%s: replaced file has %q", name, b)
		}
	}
}

// A destination that is a regular file, or a file in the way of a
// directory (and a directory in the way of a file), is a clear error that
// names the path; nothing is left half-written.
func TestTreeDestinationConflicts(t *testing.T) {
	c := rpctest.New(Register)
	ctx := context.Background()
	base := t.TempDir()
	src := filepath.Join(base, "src")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "sub", "f"), []byte("f"), 0o644)
	os.WriteFile(filepath.Join(src, "g"), []byte("g"), 0o644)

	for name, copyTree := range map[string]func(context.Context, rpc.Caller, string, string, TreeOptions) (*TreeResult, error){
		"PutTree": PutTree, "GetTree": GetTree,
	} {
		dst := filepath.Join(base, name+"-file")
		os.WriteFile(dst, []byte("a file"), 0o644)
		_, err := copyTree(ctx, c, src, dst, TreeOptions{})
		if err == nil || !errors.Is(err, errkind.ErrExists) || !strings.Contains(err.Error(), dst+" exists and is not a directory") {
			t.Errorf("%s into a regular file: %v", name, err)
		}
		if b, _ := os.ReadFile(dst); string(b) != "a file" {
			t.Errorf("%s: the file in the way was changed", name)
		}

		dst = filepath.Join(base, name+"-sub")
		os.MkdirAll(dst, 0o755)
		os.WriteFile(filepath.Join(dst, "sub"), nil, 0o644)
		_, err = copyTree(ctx, c, src, dst, TreeOptions{})
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dst, "sub")+" exists and is not a directory") {
			t.Errorf("%s with a file in the way of a directory: %v", name, err)
		}

		dst = filepath.Join(base, name+"-dir")
		os.MkdirAll(filepath.Join(dst, "g"), 0o755)
		_, err = copyTree(ctx, c, src, dst, TreeOptions{})
		if err == nil || !errors.Is(err, errkind.ErrExists) || !strings.Contains(err.Error(), filepath.Join(dst, "g")) {
			t.Errorf("%s with a directory in the way of a file: %v", name, err)
		}
		noTempsUnder(t, dst)

		// A missing source, and a source that is a file.
		if _, err := copyTree(ctx, c, filepath.Join(base, "nope"), filepath.Join(base, name+"-x"), TreeOptions{}); !errors.Is(err, iofs.ErrNotExist) && !errors.Is(err, errkind.ErrNotFound) {
			t.Errorf("%s from a missing source: %v", name, err)
		}
		if _, err := copyTree(ctx, c, filepath.Join(src, "g"), filepath.Join(base, name+"-y"), TreeOptions{}); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("%s from a file: %v", name, err)
		}
		if _, err := os.Lstat(filepath.Join(base, name+"-y")); err == nil {
			t.Errorf("%s from a file created the destination", name)
		}
	}
}

// A named pipe cannot be copied: the copy fails before writing anything.
func TestTreeSpecialFileRefused(t *testing.T) {
	c := rpctest.New(Register)
	base := t.TempDir()
	src := filepath.Join(base, "src")
	os.Mkdir(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("f"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(src, "pipe"), 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	for name, copyTree := range map[string]func(context.Context, rpc.Caller, string, string, TreeOptions) (*TreeResult, error){
		"PutTree": PutTree, "GetTree": GetTree,
	} {
		dst := filepath.Join(base, name)
		_, err := copyTree(context.Background(), c, src, dst, TreeOptions{})
		if err == nil || !strings.Contains(err.Error(), filepath.Join(src, "pipe")+": cannot copy a named pipe") {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := os.Lstat(dst); err == nil {
			t.Errorf("%s: the destination was created", name)
		}
	}
}

// gateCaller holds every call of one method until n of them are in
// flight at once, and records the most ever in flight: a copy that did
// not pipeline would never open the gate (and fail on the context's
// deadline, a guard only).
type gateCaller struct {
	rpc.Caller
	method string
	n      int

	mu       sync.Mutex
	inflight int
	max      int
	open     chan struct{}
	once     sync.Once
}

func (g *gateCaller) gate(ctx context.Context, method string) (func(), error) {
	if method != g.method {
		return func() {}, nil
	}
	g.mu.Lock()
	g.inflight++
	g.max = max(g.max, g.inflight)
	if g.inflight >= g.n {
		g.once.Do(func() { close(g.open) })
	}
	g.mu.Unlock()
	leave := func() { g.mu.Lock(); g.inflight--; g.mu.Unlock() }
	select {
	case <-g.open:
		return leave, nil
	case <-ctx.Done():
		leave()
		return nil, fmt.Errorf("only %d %s calls ever in flight at once, want %d: %w", g.maxInFlight(), method, g.n, ctx.Err())
	}
}

func (g *gateCaller) maxInFlight() int { g.mu.Lock(); defer g.mu.Unlock(); return g.max }

func (g *gateCaller) Call(ctx context.Context, method string, args, result any) error {
	leave, err := g.gate(ctx, method)
	if err != nil {
		return err
	}
	defer leave()
	return g.Caller.Call(ctx, method, args, result)
}

// Small files travel Parallel at a time, never more, in both directions.
func TestTreePipelines(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	os.Mkdir(src, 0o755)
	for i := range 40 {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), []byte{byte(i)}, 0o644)
	}
	const parallel = 6
	for _, tc := range []struct {
		name, method string
		copy         func(context.Context, rpc.Caller, string, string, TreeOptions) (*TreeResult, error)
		from         string
	}{{"PutTree", MethodPut, PutTree, src}, {"GetTree", MethodRead, GetTree, src}} {
		g := &gateCaller{Caller: rpctest.New(Register), method: tc.method, n: parallel, open: make(chan struct{})}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a guard against a hang, not a measure
		res, err := tc.copy(ctx, g, tc.from, filepath.Join(base, tc.name), TreeOptions{Parallel: parallel})
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if m := g.maxInFlight(); m != parallel || res.Files != 40 {
			t.Errorf("%s: %d calls in flight at most, want exactly %d; %+v", tc.name, m, parallel, res)
		}
		compareTrees(t, src, filepath.Join(base, tc.name), false)
	}
}

// failCaller fails one file's fs.Put at once and holds every other
// fs.Put until its context ends: only the cancellation that the failure
// triggers lets them go.
type failCaller struct {
	rpc.Caller
	fail  string
	puts  atomic.Int64
	other atomic.Int64
}

func (f *failCaller) Call(ctx context.Context, method string, args, result any) error {
	if a, ok := args.(*PutArgs); ok {
		f.puts.Add(1)
		if a.Path == f.fail {
			return errkind.Errorf(errkind.ErrPermission, "injected failure")
		}
		f.other.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}
	return f.Caller.Call(ctx, method, args, result)
}

// The first error cancels the transfers in flight, starts no more, and is
// the one returned, naming the file.
func TestTreeStopsAtFirstError(t *testing.T) {
	base := t.TempDir()
	src, dst := filepath.Join(base, "src"), filepath.Join(base, "dst")
	os.Mkdir(src, 0o755)
	for i := range 100 {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), []byte("x"), 0o644)
	}
	bad := filepath.Join(dst, "f00")
	fc := &failCaller{Caller: rpctest.New(Register), fail: bad}
	_, err := PutTree(context.Background(), fc, src, dst, TreeOptions{Parallel: 4})
	if !errors.Is(err, errkind.ErrPermission) || !strings.Contains(err.Error(), "copying "+filepath.Join(src, "f00")+" to "+bad) {
		t.Fatalf("error %v is not the first failure naming the file", err)
	}
	if n := fc.puts.Load(); n > 4 {
		t.Errorf("%d fs.Put calls started, want at most the 4 in flight when the first failed", n)
	}
	ents, _ := os.ReadDir(dst)
	if len(ents) != 0 {
		t.Errorf("files written after the failure: %d", len(ents))
	}
}

// A cancelled context stops a copy.
func TestTreeCancelled(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	os.Mkdir(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := PutTree(ctx, rpctest.New(Register), src, filepath.Join(base, "dst"), TreeOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled PutTree: %v", err)
	}
}

// PutOne and GetOne copy a single file with the same rules.
// sourceFile writes n random bytes to p with mode and mtime, and returns
// them.
func sourceFile(t *testing.T, p string, n int, mode iofs.FileMode, mt time.Time) []byte {
	t.Helper()
	data := randomBytes(t, n)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestPutGetOne(t *testing.T) {
	c := rpctest.New(Register)
	ctx := context.Background()
	dir := t.TempDir()
	mt := time.Unix(1_500_000_000, 123456789)
	for _, n := range []int{0, 10, InlineLimit + 1} {
		src := filepath.Join(dir, fmt.Sprintf("src%d", n))
		data := sourceFile(t, src, n, 0o751, mt)
		var progress atomic.Int64
		opts := TreeOptions{Preserve: true, Progress: func(n int64) { progress.Add(n) }}
		mid, back := src+".remote", src+".back"
		if res, err := PutOne(ctx, c, src, mid, opts); err != nil || res.Bytes != int64(n) || res.Files != 1 {
			t.Fatalf("PutOne %d bytes: %+v %v", n, res, err)
		}
		if res, err := GetOne(ctx, c, mid, back, opts); err != nil || res.Bytes != int64(n) {
			t.Fatalf("GetOne %d bytes: %+v %v", n, res, err)
		}
		if got := progress.Load(); got != 2*int64(n) {
			t.Errorf("%d bytes: Progress reported %d, want %d", n, got, 2*n)
		}
		for _, p := range []string{mid, back} {
			st, err := os.Stat(p)
			b, _ := os.ReadFile(p)
			if err != nil || st.Mode() != 0o751 || !st.ModTime().Equal(mt) || !bytes.Equal(b, data) {
				t.Errorf("%s: %v %v %v, content equal %v", p, st.Mode(), st.ModTime(), err, bytes.Equal(b, data))
			}
		}
	}
	if _, err := GetOne(ctx, c, filepath.Join(dir, "nope"), filepath.Join(dir, "x"), TreeOptions{}); !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), filepath.Join(dir, "nope")) {
		t.Errorf("GetOne of a missing file: %v", err)
	}
	if _, err := PutOne(ctx, c, filepath.Join(dir, "nope"), filepath.Join(dir, "x"), TreeOptions{}); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("PutOne of a missing file: %v", err)
	}
}

// fs.Symlink creates a link, replaces a file or link, and refuses to
// replace a directory.
func TestSymlink(t *testing.T) {
	c := rpctest.New(Register)
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "l")
	for _, target := range []string{"a", "/b/c"} {
		if err := c.Call(ctx, MethodSymlink, &SymlinkArgs{Path: p, Target: target}, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := os.Readlink(p); err != nil || got != target {
			t.Fatalf("link is %q, %v; want %q", got, err, target)
		}
	}
	os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
	if err := c.Call(ctx, MethodSymlink, &SymlinkArgs{Path: filepath.Join(dir, "f"), Target: "x"}, nil); err != nil {
		t.Fatalf("replacing a file: %v", err)
	}
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	err := c.Call(ctx, MethodSymlink, &SymlinkArgs{Path: filepath.Join(dir, "d"), Target: "x"}, nil)
	if !errors.Is(err, errkind.ErrExists) {
		t.Errorf("replacing a directory: %v", err)
	}
	for _, a := range []SymlinkArgs{{Path: "rel", Target: "x"}, {Path: p}} {
		if err := c.Call(ctx, MethodSymlink, &a, nil); !errors.Is(err, errkind.ErrBadArgs) {
			t.Errorf("%+v: %v", a, err)
		}
	}
	noTemps(t, dir)
}

// fs.Walk lists parents before children in name order, follows a symlink
// at the root only, and is bounded.
func TestWalk(t *testing.T) {
	c := rpctest.New(Register)
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(filepath.Join(root, "b", "c"), 0o755)
	os.WriteFile(filepath.Join(root, "a"), []byte("12345"), 0o644)
	os.WriteFile(filepath.Join(root, "b", "c", "d"), nil, 0o644)
	os.Symlink("b", filepath.Join(root, "z"))
	os.Symlink(root, filepath.Join(dir, "rootlink"))
	for _, r := range []string{root, filepath.Join(dir, "rootlink")} {
		var got []string
		fi, err := Walk(ctx, c, r, 0, func(e *WalkEntry) error {
			got = append(got, fmt.Sprintf("%s %v %d %s", e.Path, e.FileMode().Type(), e.Size, e.Target))
			return nil
		})
		want := []string{"a ---------- 5 ", "b d--------- 0 ", "b/c d--------- 0 ", "b/c/d ---------- 0 ", "z L--------- 0 b"}
		if err != nil || !fi.IsDir || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("Walk %s: %v, %v\n got %q\nwant %q", r, fi, err, got, want)
		}
	}
	_, err := Walk(ctx, c, root, 3, func(*WalkEntry) error { return nil })
	if !errors.Is(err, errkind.ErrTooLarge) {
		t.Errorf("Walk bounded to 3 of 5 entries: %v", err)
	}
	if _, err := Walk(ctx, c, filepath.Join(root, "a"), 0, func(*WalkEntry) error { return nil }); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Walk of a file: %v", err)
	}
	if _, err := Walk(ctx, c, filepath.Join(dir, "nope"), 0, func(*WalkEntry) error { return nil }); !errors.Is(err, errkind.ErrNotFound) {
		t.Errorf("Walk of a missing directory: %v", err)
	}
	// A callback's error stops the walk and is returned.
	stop := errors.New("stop")
	if _, err := Walk(ctx, c, root, 0, func(*WalkEntry) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Walk stopped by its callback: %v", err)
	}
}

// hostileWalk registers an fs.Walk that sends the given entries whatever
// it is asked, and a normal fs otherwise.
func hostileWalk(ents []WalkEntry) *rpctest.Caller {
	return rpctest.New(func(reg *rpc.Registry) {
		Register(reg)
		reg.Handle(MethodWalk, func(_ context.Context, call *rpc.Call) (any, error) {
			w := bufio.NewWriter(call.Circuit)
			for _, e := range ents {
				b, _ := wire.Marshal(&e)
				var hdr [4]byte
				binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
				w.Write(hdr[:])
				w.Write(b)
			}
			w.Flush()
			return &WalkResult{Root: FileInfo{Name: "x", Mode: uint32(iofs.ModeDir | 0o755), IsDir: true}, Entries: len(ents)}, nil
		})
	})
}

// GetTree never writes outside its destination, whatever a hostile agent
// lists: paths with "..", absolute paths, entries below a symlink, entries
// before their directory, repeated entries, too many entries.
func TestGetTreeRefusesHostileListings(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside")
	os.Mkdir(outside, 0o755)
	file := uint32(0o644)
	ddir := uint32(iofs.ModeDir | 0o755)
	link := uint32(iofs.ModeSymlink | 0o777)
	cases := map[string][]WalkEntry{
		"dotdot":        {{Path: "../outside/x", Mode: file}},
		"absolute":      {{Path: outside + "/x", Mode: file}},
		"unclean":       {{Path: "a//x", Mode: file}},
		"below symlink": {{Path: "l", Mode: link, Target: outside}, {Path: "l/x", Mode: file}},
		"link and dir":  {{Path: "l", Mode: link, Target: outside}, {Path: "l", Mode: ddir}, {Path: "l/x", Mode: file}},
		"before dir":    {{Path: "a/x", Mode: file}, {Path: "a", Mode: ddir}},
		"empty":         {{Path: "", Mode: file}},
	}
	for name, ents := range cases {
		dst := filepath.Join(dir, "dst-"+strings.ReplaceAll(name, " ", "-"))
		_, err := GetTree(context.Background(), hostileWalk(ents), "/anything", dst, TreeOptions{})
		if err == nil {
			t.Errorf("%s: GetTree accepted %+v", name, ents)
		}
		if _, err := os.Lstat(dst); err == nil {
			t.Errorf("%s: the destination was created", name)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("GetTree wrote outside its destination: %v", ents)
	}
	// More entries than the bound, whatever the agent was asked.
	many := make([]WalkEntry, 10)
	for i := range many {
		many[i] = WalkEntry{Path: fmt.Sprintf("f%d", i), Mode: file}
	}
	if _, err := Walk(context.Background(), hostileWalk(many), "/anything", 5, func(*WalkEntry) error { return nil }); !errors.Is(err, errkind.ErrTooLarge) {
		t.Errorf("10 entries past a bound of 5: %v", err)
	}
}

// PutOne with the source's sha256 taken beforehand (TreeOptions.SHA256,
// cp --to): the right hash copies, inline and streamed alike; a source
// that no longer hashes to it fails with ErrSourceChanged and leaves the
// destination's old content in place. PutTree ignores the option.
func TestPutOneHashedBefore(t *testing.T) {
	c := rpctest.New(Register)
	ctx := context.Background()
	dir := t.TempDir()
	for _, n := range []int{0, 10, InlineLimit, InlineLimit + 1, 3*copyBuffer + 7} {
		src := filepath.Join(dir, fmt.Sprintf("src%d", n))
		data := sourceFile(t, src, n, 0o644, time.Now())
		sum, err := HashFile(ctx, src)
		if want := sha256.Sum256(data); err != nil || !bytes.Equal(sum, want[:]) {
			t.Fatalf("HashFile %d bytes: %x %v, want %x", n, sum, err, want)
		}
		dst := src + ".remote"
		if _, err := PutOne(ctx, c, src, dst, TreeOptions{SHA256: sum}); err != nil {
			t.Fatalf("PutOne %d bytes with its hash: %v", n, err)
		}
		if b, _ := os.ReadFile(dst); !bytes.Equal(b, data) {
			t.Fatalf("PutOne %d bytes with its hash: content differs", n)
		}
		// The source changes after it was hashed: one byte, same size.
		changed := append([]byte("x"), data...)[:max(n, 1)]
		if n > 0 {
			changed = bytes.Clone(data)
			changed[n/2] ^= 0xff
		}
		if err := os.WriteFile(src, changed, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = PutOne(ctx, c, src, dst, TreeOptions{SHA256: sum})
		if !errors.Is(err, ErrSourceChanged) {
			t.Errorf("PutOne of a changed %d-byte source: %v, want %v", n, err, ErrSourceChanged)
		}
		if b, _ := os.ReadFile(dst); !bytes.Equal(b, data) {
			t.Errorf("after a failed put of a changed %d-byte source the destination is not its old content", n)
		}
	}
	tree := filepath.Join(dir, "tree")
	os.MkdirAll(tree, 0o755)
	os.WriteFile(filepath.Join(tree, "a"), []byte("a\n"), 0o644)
	if _, err := PutTree(ctx, c, tree, filepath.Join(dir, "tree.remote"), TreeOptions{SHA256: make([]byte, 32)}); err != nil {
		t.Errorf("PutTree with a file's SHA256 set: %v (it must ignore it)", err)
	}
}
