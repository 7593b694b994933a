package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
)

// useExeDir materialises into a directory of the test's own.
func useExeDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "exe")
	old := ExeDir
	ExeDir = func() (string, error) { return dir, nil }
	t.Cleanup(func() { ExeDir = old })
	return dir
}

func TestMaterialize(t *testing.T) {
	dir := useExeDir(t)
	s := New(1 << 20)
	script := []byte("#!/bin/sh\necho \"ran $1\"\n")
	sum, err := s.Put(script)
	if err != nil {
		t.Fatal(err)
	}
	path, err := Materialize(s, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(path) != dir || filepath.Base(path) != hex.EncodeToString(sum[:]) {
		t.Fatalf("path %s, want %x in %s", path, sum, dir)
	}
	out, err := exec.Command(path, "x").Output()
	if err != nil || string(out) != "ran x\n" {
		t.Fatalf("%q, %v", out, err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o500} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
	// Once: the next call finds the file, even after the store lost
	// the bytes.
	var before syscall.Stat_t
	syscall.Stat(path, &before)
	empty := New(1 << 20)
	again, err := Materialize(empty, sum[:])
	var after syscall.Stat_t
	syscall.Stat(path, &after)
	if err != nil || again != path || after.Ino != before.Ino {
		t.Fatalf("again: %s, %v; the same file %v", again, err, after.Ino == before.Ino)
	}
	// Neither on disk nor stored.
	other := sha256.Sum256([]byte("other"))
	if _, err := Materialize(s, other[:]); !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), NotStored) {
		t.Errorf("unknown hash: %v", err)
	}
	if _, err := Materialize(s, []byte("short")); !errors.Is(err, errkind.ErrBadArgs) {
		t.Errorf("short hash: %v", err)
	}
}

// Past the bound, the least recently used executables go; the one just
// materialised stays.
func TestMaterializeBounded(t *testing.T) {
	dir := useExeDir(t)
	old := maxExeBytes
	maxExeBytes = 2500
	defer func() { maxExeBytes = old }()
	s := New(1 << 20)
	var paths []string
	for i := range 3 {
		data := append([]byte("#!/bin/sh\n"), make([]byte, 1000)...)
		data[len(data)-1] = byte('a' + i)
		sum, _ := s.Put(data)
		p, err := Materialize(s, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		// An older use, so that the order does not rest on the clock's
		// resolution.
		when := time.Now().Add(time.Duration(i-10) * time.Minute)
		os.Chtimes(p, when, when)
		paths = append(paths, p)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("%d files kept, want 2", len(entries))
	}
	if _, err := os.Stat(paths[0]); !os.IsNotExist(err) {
		t.Errorf("the least recently used one is still there: %v", err)
	}
	for _, p := range paths[1:] {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
