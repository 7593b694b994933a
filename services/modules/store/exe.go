package store

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/errkind"
)

// MaxExeBytes bounds the executables an agent's user keeps materialised
// (Materialize): past it, the least recently used are removed. A running
// process keeps its file open, so removing it harms nothing.
const MaxExeBytes = 64 << 20

// ExeDir returns the directory executables are materialised in: exe/ in
// the agent's private cache directory (0700, on a file system that
// allows exec, RAM first: bootstrap.PrivateDir). A variable for tests.
var ExeDir = func() (string, error) {
	d, err := bootstrap.PrivateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "exe"), nil
}

// maxExeBytes is MaxExeBytes; tests lower it.
var maxExeBytes int64 = MaxExeBytes

var exeMu sync.Mutex // one materialisation at a time per agent

// Materialize returns the path of an executable file holding the bytes
// stored under sum in store: written once, mode 0500 and named by its
// hash, in ExeDir, and found there by the next call (even after the
// store evicted the bytes). A hash neither on disk nor in the store fails
// with errkind.ErrNotFound and NotStored in its text, as Get does.
func Materialize(store *Store, sum []byte) (string, error) {
	if len(sum) != 32 {
		return "", errkind.Errorf(errkind.ErrBadArgs, "module store: an executable's sha256 has %d bytes, not 32", len(sum))
	}
	dir, err := ExeDir()
	if err != nil {
		return "", err
	}
	name := hex.EncodeToString(sum)
	path := filepath.Join(dir, name)
	exeMu.Lock()
	defer exeMu.Unlock()
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
		now := time.Now()
		os.Chtimes(path, now, now) //nolint:errcheck // only the eviction order
		return path, nil
	}
	data, err := store.Get(sum)
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("module store: %w", err)
	}
	if err := bootstrap.InstallFile(path, ".tmp-"+name[:16]+"-*", data, 0o500); err != nil {
		return "", fmt.Errorf("module store: materialise %s: %w", name[:16], err)
	}
	prune(dir, path)
	return path, nil
}

// prune removes the least recently used executables of dir past
// maxExeBytes, never keep.
func prune(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type file struct {
		path string
		size int64
		used time.Time
	}
	var files []file
	var total int64
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		files = append(files, file{filepath.Join(dir, e.Name()), fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	slices.SortFunc(files, func(a, b file) int { return a.used.Compare(b.used) })
	for _, f := range files {
		if total <= maxExeBytes {
			return
		}
		if f.path == keep {
			continue
		}
		if os.Remove(f.path) == nil {
			total -= f.size
		}
	}
}
