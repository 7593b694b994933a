package fs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/rpctest"
)

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func temps(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*"+TempInfix+"*"))
	return m
}

// Put and Get round-trip every size class: empty, one byte, both sides of
// the inline limit, and a streamed file of several copy buffers.
func TestPutGetSizes(t *testing.T) {
	c := rpctest.New(Register)
	ctx := context.Background()
	dir := t.TempDir()
	for _, n := range []int{0, 1, InlineLimit - 1, InlineLimit, InlineLimit + 1, 3<<20 + 7} {
		data := randomBytes(t, n)
		p := filepath.Join(dir, "f"+strconv.Itoa(n))
		mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
		res, err := Put(ctx, c, p, bytes.NewReader(data), int64(n), PutOptions{WriteOptions: WriteOptions{Mode: 0o640}, MTime: mtime})
		if err != nil {
			t.Fatalf("Put %d bytes: %v", n, err)
		}
		sum := sha256.Sum256(data)
		if res.SHA256 != hex.EncodeToString(sum[:]) || res.Info.Size != int64(n) || res.Info.FileMode() != 0o640 || res.Info.ModTime != mtime {
			t.Fatalf("Put %d bytes: %+v", n, res)
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Put %d bytes: file differs (%v)", n, err)
		}
		var buf bytes.Buffer
		gres, err := Get(ctx, c, p, &buf)
		if err != nil || !bytes.Equal(buf.Bytes(), data) || gres.SHA256 != res.SHA256 {
			t.Fatalf("Get %d bytes: %v, equal=%v", n, err, bytes.Equal(buf.Bytes(), data))
		}
		ck, err := Checksum(ctx, c, p)
		if err != nil || ck.SHA256 != res.SHA256 || ck.Size != int64(n) {
			t.Fatalf("Checksum %d bytes: %+v, %v", n, ck, err)
		}
	}
	if left := temps(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A source that ends early fails the Put and leaves the old file intact.
func TestPutShortSourceKeepsOldFile(t *testing.T) {
	c := rpctest.New(Register)
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("old"), 0o644)
	short := io.LimitReader(bytes.NewReader(randomBytes(t, 1<<20)), 1<<19)
	_, err := Put(context.Background(), c, p, short, 1<<20, PutOptions{})
	if err == nil || !strings.Contains(err.Error(), "ended after") {
		t.Fatalf("short source: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("old content replaced by %d bytes", len(b))
	}
	if left := temps(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// Bytes that do not hash to the sender's checksum are not renamed into
// place.
func TestPutChecksumMismatch(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("old"), 0o644)
	c := rpctest.New(Register)
	st, err := c.Stream(context.Background(), MethodPut, &PutArgs{Path: p, Size: InlineLimit + 10})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		st.Write(randomBytes(t, InlineLimit+10))
		st.Write(make([]byte, sha256.Size)) // not the checksum
	}()
	err = st.Wait(nil)
	if !errors.Is(err, errkind.ErrRemote) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("corrupted stream: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("old content replaced")
	}
	if left := temps(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// Inline data with a wrong checksum is refused too.
	_, err = run(t, handlePut, MethodPut, &PutArgs{Path: p, Data: []byte("new"), SHA256: make([]byte, 32)})
	wantKind(t, err, errkind.ErrBadArgs)
}

func TestGetFileAtomicAndPreserve(t *testing.T) {
	c := rpctest.New(Register)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := randomBytes(t, 1<<20)
	os.WriteFile(src, data, 0o751)
	mt := time.Date(2019, 5, 6, 7, 8, 9, 0, time.UTC)
	os.Chtimes(src, mt, mt)
	dst := filepath.Join(dir, "dst")
	os.WriteFile(dst, []byte("old"), 0o600)
	if _, err := GetFile(context.Background(), c, src, dst, true); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dst)
	if err != nil || st.Mode().Perm() != 0o751 || !st.ModTime().Equal(mt) {
		t.Fatalf("GetFile preserve: %v %v %v", st.Mode(), st.ModTime(), err)
	}
	if b, _ := os.ReadFile(dst); !bytes.Equal(b, data) {
		t.Fatal("GetFile content differs")
	}
	// A missing source fails with not_found and leaves dst alone.
	if _, err := GetFile(context.Background(), c, filepath.Join(dir, "nope"), dst, false); !errors.Is(err, errkind.ErrNotFound) {
		t.Fatalf("missing source: %v", err)
	}
	if b, _ := os.ReadFile(dst); !bytes.Equal(b, data) {
		t.Fatal("a failed GetFile changed dst")
	}
	if left := temps(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// deadPid is the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	return dead.Process.Pid
}

// useJournal points the package's journal at dir for one test.
func useJournal(t *testing.T, dir string) {
	t.Helper()
	journalMu.Lock()
	old, oldDirs, oldIdle := journalDir, journalDirs, journalIdle
	journalDir, journalDirs, journalIdle = dir, map[string]*journalDirEntry{}, 0
	journalMu.Unlock()
	t.Cleanup(func() {
		journalMu.Lock()
		journalDir, journalDirs, journalIdle = old, oldDirs, oldIdle
		journalMu.Unlock()
	})
}

func mustExist(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed", p)
		}
	}
}

func mustBeGone(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there", p)
		}
	}
}

// An agent killed mid-write leaves temporary files and the journal entry
// of their directory; the next agent's SetJournal removes that writer's
// temporary files there, and nothing else. Entries of live processes stay.
func TestJournalCleansDeadWriters(t *testing.T) {
	dir := t.TempDir()
	jdir := filepath.Join(dir, "journal")
	os.MkdirAll(jdir, 0o700)
	dead := strconv.Itoa(deadPid(t))
	stale := filepath.Join(dir, ".f"+TempInfix+dead+"-0123")
	staleLink := filepath.Join(dir, ".l"+TempInfix+dead+"-89ab")
	otherWriter := filepath.Join(dir, ".g"+TempInfix+"1-4567") // pid 1 lives
	aDir := filepath.Join(dir, ".d"+TempInfix+dead+"-cdef")
	notOurs := filepath.Join(dir, "precious")
	for _, f := range []string{stale, otherWriter, notOurs} {
		os.WriteFile(f, []byte("x"), 0o600)
	}
	os.Symlink("precious", staleLink)
	os.Mkdir(aDir, 0o700)
	os.WriteFile(filepath.Join(jdir, "d"+dead+".a"), []byte(dir), 0o600)

	// An older agent's entries name one temporary file each.
	oldStale := filepath.Join(dir, ".h"+TempInfix+"0123456789abcdef")
	oldLive := filepath.Join(dir, ".i"+TempInfix+"fedcba9876543210")
	os.WriteFile(oldStale, []byte("x"), 0o600)
	os.WriteFile(oldLive, []byte("x"), 0o600)
	os.WriteFile(filepath.Join(jdir, dead+".b"), []byte(oldStale), 0o600)
	os.WriteFile(filepath.Join(jdir, dead+".c"), []byte(notOurs), 0o600)
	os.WriteFile(filepath.Join(jdir, "1.d"), []byte(oldLive), 0o600)
	os.WriteFile(filepath.Join(jdir, "d1.e"), []byte(dir), 0o600)

	n, err := CleanJournal(jdir)
	if err != nil || n != 3 {
		t.Fatalf("CleanJournal = %d, %v; want 3 files removed", n, err)
	}
	mustBeGone(t, stale, staleLink, oldStale,
		filepath.Join(jdir, "d"+dead+".a"), filepath.Join(jdir, dead+".b"), filepath.Join(jdir, dead+".c"))
	mustExist(t, otherWriter, aDir, notOurs, oldLive, filepath.Join(jdir, "1.d"), filepath.Join(jdir, "d1.e"))
}

// journalEntries returns the directories this process has journalled.
func journalEntries(t *testing.T, jdir string) []string {
	t.Helper()
	ents, err := os.ReadDir(jdir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "d"+strconv.Itoa(os.Getpid())+".") {
			b, _ := os.ReadFile(filepath.Join(jdir, e.Name()))
			dirs = append(dirs, string(b))
		}
	}
	return dirs
}

// A write's directory is journalled before its temporary file exists,
// under the writer's pid; the entry outlives the write (writes come in
// waves) until the agent exits or too many directories are idle.
func TestJournalRecordsDirectories(t *testing.T) {
	dir := t.TempDir()
	jdir := filepath.Join(t.TempDir(), "journal")
	os.MkdirAll(jdir, 0o700)
	useJournal(t, jdir)

	var during []string
	err := atomicReplace(context.Background(), filepath.Join(dir, "w"), func(f *os.File) error {
		during = journalEntries(t, jdir)
		if !strings.Contains(filepath.Base(f.Name()), TempInfix+strconv.Itoa(os.Getpid())+"-") {
			t.Errorf("temporary file %s does not carry the writer's pid", f.Name())
		}
		_, err := f.Write([]byte("new"))
		return err
	}, &fileMeta{mode: 0o644, uid: -1, gid: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(during) != 1 || during[0] != dir {
		t.Fatalf("journal during the write = %q, want [%s]", during, dir)
	}
	if err := replaceSymlink("w", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if got := journalEntries(t, jdir); len(got) != 1 {
		t.Fatalf("journal after two writes into one directory = %q, want one entry", got)
	}

	// Idle directories beyond journalIdleMax lose their entries, oldest
	// first.
	var dirs []string
	for i := range journalIdleMax + 3 {
		d := filepath.Join(dir, "sub"+strconv.Itoa(i))
		os.Mkdir(d, 0o700)
		dirs = append(dirs, d)
		if err := atomicWrite(context.Background(), filepath.Join(d, "f"), []byte("x"), 0o600, -1, -1, false); err != nil {
			t.Fatal(err)
		}
	}
	got := journalEntries(t, jdir)
	if len(got) != journalIdleMax {
		t.Fatalf("%d journal entries for %d idle directories, want %d", len(got), len(dirs)+1, journalIdleMax)
	}
	for _, d := range append([]string{dir}, dirs[:3]...) {
		if slices.Contains(got, d) {
			t.Errorf("the entry of %s, idle the longest, is still there", d)
		}
	}

	CloseJournal()
	if got := journalEntries(t, jdir); len(got) != 0 {
		t.Errorf("journal entries after CloseJournal: %q", got)
	}
	if left := temps(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
