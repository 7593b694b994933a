package fs

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/spindle-rpc/spindle/internal/testkit"
	"golang.org/x/sys/unix"
)

// TestWriteBehindDropsWrittenPages: a file written through writeBehind
// keeps only about dropBehind bytes in the page cache, and its content is
// intact. It needs a disk-backed directory: tmpfs pages are the file.
func TestWriteBehindDropsWrittenPages(t *testing.T) {
	dir := diskBackedDir(t)
	f, err := os.CreateTemp(dir, "wb")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 12 * writeBehindChunk
	chunk := make([]byte, 1<<20)
	want := sha256.New()
	w := &writeBehind{f: f}
	for written := 0; written < size; written += len(chunk) {
		rand.Read(chunk)
		want.Write(chunk)
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	resident := residentBytes(t, f, size)
	t.Logf("%d MiB written, %d MiB resident", size>>20, resident>>20)
	if limit := int64(dropBehind + 2*writeBehindChunk); resident > limit {
		t.Errorf("%d MiB of a %d MiB file still cached, want at most %d MiB", resident>>20, size>>20, limit>>20)
	}
	got := sha256.New()
	if _, err := io.Copy(got, io.NewSectionReader(f, 0, size)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatal("the file's content differs from what was written")
	}
}

// residentBytes counts f's pages in the page cache (mincore).
func residentBytes(t *testing.T, f *os.File, size int) int64 {
	t.Helper()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (size+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(size), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	var n int64
	for _, v := range vec {
		if v&1 != 0 {
			n += int64(page)
		}
	}
	return n
}

// diskBackedDir makes a temporary directory on a file system that is not
// tmpfs (whose pages cannot be dropped: they are the file), removed when t
// ends: under TMPDIR, else /var/tmp, else the package's own directory.
func diskBackedDir(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, parent := range []string{os.TempDir(), "/var/tmp", "."} {
		var st unix.Statfs_t
		if err := unix.Statfs(parent, &st); err != nil || st.Type == unix.TMPFS_MAGIC {
			tried = append(tried, parent)
			continue
		}
		dir, err := os.MkdirTemp(parent, "writebehind-test-")
		if err != nil {
			tried = append(tried, parent)
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	testkit.Unavailable(t, fmt.Sprintf("no disk-backed directory to write in (%s are tmpfs or not writable)", strings.Join(tried, ", ")))
	return ""
}
