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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/rpc/rpctest"
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
	if !errors.Is(err, rpc.ErrRemote) || !strings.Contains(err.Error(), "checksum mismatch") {
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
	wantKind(t, err, rpc.ErrBadArgs)
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
	if _, err := GetFile(context.Background(), c, filepath.Join(dir, "nope"), dst, false); !errors.Is(err, rpc.ErrNotFound) {
		t.Fatalf("missing source: %v", err)
	}
	if b, _ := os.ReadFile(dst); !bytes.Equal(b, data) {
		t.Fatal("a failed GetFile changed dst")
	}
	if left := temps(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// An agent killed mid-write leaves a temporary file and its journal entry;
// the next agent's SetJournal removes the file. Entries of live processes
// stay.
func TestJournalCleansDeadWriters(t *testing.T) {
	dir := t.TempDir()
	jdir := filepath.Join(dir, "journal")
	os.MkdirAll(jdir, 0o700)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, ".f"+TempInfix+"0123")
	live := filepath.Join(dir, ".g"+TempInfix+"4567")
	notOurs := filepath.Join(dir, "precious")
	for _, f := range []string{stale, live, notOurs} {
		os.WriteFile(f, []byte("x"), 0o600)
	}
	os.WriteFile(filepath.Join(jdir, strconv.Itoa(dead.Process.Pid)+".a"), []byte(stale), 0o600)
	os.WriteFile(filepath.Join(jdir, strconv.Itoa(dead.Process.Pid)+".b"), []byte(notOurs), 0o600)
	os.WriteFile(filepath.Join(jdir, "1.c"), []byte(live), 0o600) // pid 1 lives
	n, err := CleanJournal(jdir)
	if err != nil || n != 1 {
		t.Fatalf("CleanJournal = %d, %v; want 1 file removed", n, err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("the dead writer's temporary file is still there")
	}
	for _, f := range []string{live, notOurs} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s was removed", f)
		}
	}

	// While a write runs its temporary file is journalled, and forgotten
	// once it is done.
	journalMu.Lock()
	old := journalDir
	journalDir = jdir
	journalMu.Unlock()
	defer func() { journalMu.Lock(); journalDir = old; journalMu.Unlock() }()
	p := filepath.Join(dir, "w")
	seen := false
	err = atomicReplace(context.Background(), p, func(f *os.File) error {
		ents, _ := os.ReadDir(jdir)
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(jdir, e.Name()))
			seen = seen || string(b) == f.Name()
		}
		_, err := f.Write([]byte("new"))
		return err
	}, &fileMeta{mode: 0o644, uid: -1, gid: -1})
	if err != nil || !seen {
		t.Fatalf("atomicReplace: %v, journalled=%v", err, seen)
	}
	ents, _ := os.ReadDir(jdir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), strconv.Itoa(os.Getpid())+".") {
			t.Errorf("journal entry %s outlived its write", e.Name())
		}
	}
}
