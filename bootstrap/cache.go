package bootstrap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/spindle-rpc/spindle/version"
	"golang.org/x/sys/unix"
)

// CacheDirs lists, in order of preference, the per-user directories an
// agent may run from: the first stage's list (stageDirs, which says why
// $XDG_RUNTIME_DIR, which lasts only as long as the user's sessions, is
// last).
func CacheDirs() []string {
	home, _ := os.UserHomeDir()
	return cacheDirs(os.Getuid(), home, os.TempDir(), os.Getenv("XDG_RUNTIME_DIR"))
}

// StageCacheDirs are the directories the first stage considers, in its
// order, for a session of uid with this HOME and XDG_RUNTIME_DIR (either
// may be empty: unset): where to look for an agent it cached.
func StageCacheDirs(uid int, home, runtimeDir string) []string {
	return cacheDirs(uid, home, "/tmp", runtimeDir)
}

func cacheDirs(uid int, home, tmp, runtimeDir string) []string {
	u := strconv.Itoa(uid)
	dirs := []string{"/dev/shm/spindle-" + u}
	if home != "" {
		dirs = append(dirs, filepath.Join(home, ".cache", "spindle"))
	}
	dirs = append(dirs, filepath.Join(tmp, "spindle-"+u))
	if runtimeDir != "" {
		dirs = append(dirs, filepath.Join(runtimeDir, "spindle"))
	}
	return dirs
}

// PrivateDir returns the first usable cache directory, creating it 0700.
// A directory is usable only if it is a real directory (not a symlink),
// owned by us, not writable by anyone else, on a filesystem that allows
// exec: /tmp and /dev/shm are shared, so anything else could let another
// user swap the agent.
func PrivateDir() (string, error) {
	var why []string
	for _, d := range CacheDirs() {
		err := checkPrivateDir(d)
		if err == nil {
			return d, nil
		}
		why = append(why, err.Error())
	}
	return "", fmt.Errorf("no usable agent cache directory: %v", why)
}

func checkPrivateDir(d string) error {
	if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
		return fmt.Errorf("%s: %w", d, err)
	}
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s: %w", d, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(d, &st); err != nil {
		return fmt.Errorf("%s: %w", d, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s: not a directory (a symlink?)", d)
	case int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s: owned by uid %d, not us", d, st.Uid)
	case st.Mode&0o077 != 0:
		return fmt.Errorf("%s: mode %o lets other users in", d, st.Mode&0o777)
	}
	var vfs unix.Statfs_t
	if err := unix.Statfs(d, &vfs); err == nil && vfs.Flags&unix.ST_NOEXEC != 0 {
		return fmt.Errorf("%s: on a noexec filesystem", d)
	}
	return nil
}

// AgentFileName is the cache file name of a binary: version and hash, so a
// stale or different agent is never reused.
func AgentFileName(b *Binary) string {
	return "agent-" + version.Version + "-" + b.Hash[:16]
}

var verified sync.Map // path → hash checked by this process

// Materialize makes b runnable from the private cache directory and
// returns its path. An existing file is checked against b's hash (once per
// process) and replaced if it differs.
func Materialize(b *Binary) (string, error) {
	dir, err := PrivateDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, AgentFileName(b))
	if h, ok := verified.Load(path); ok && h == b.Hash {
		// Still there? Another agent's cache pruning may have removed it
		// (PruneCache), however long ago this process checked it.
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
		verified.Delete(path)
	}
	if cachedFileHasHash(path, b.Hash) {
		verified.Store(path, b.Hash)
		return path, nil
	}
	data, err := b.Bytes()
	if err != nil {
		return "", err
	}
	if err := InstallFile(path, ".agent-*", data, 0o700); err != nil {
		return "", fmt.Errorf("install agent in %s: %w", dir, err)
	}
	verified.Store(path, b.Hash)
	return path, nil
}

// InstallFile writes data as path with mode perm through a temporary
// file in path's directory (named by pattern, as for os.CreateTemp),
// renamed into place: nobody runs or reads a part of it.
func InstallFile(path, pattern string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// cachedFileHasHash reports whether the agent file path in our private
// cache directory holds the agent hashing to hash: at once if the
// self-check memo an agent left beside it still matches the file
// (CheckSelf), else by hashing it and leaving such a memo. Either way the
// memo's mtime says the file was used now, for PruneCache.
func cachedFileHasHash(path, hash string) bool {
	memo := memoBeside(path)
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	if readMemo(memo) == memoLine(hash, &st) {
		markUsed(memo)
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	// The memo CheckSelf would leave: the local connector's agents are
	// checked here, not by themselves.
	actual, err := hashAndMemo(f, hash, memo)
	return err == nil && actual == hash
}
