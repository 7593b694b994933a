package fs

import (
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A controller keeps no journal (see journal.go): it may run anywhere, as
// anyone, and often once. So a get that was killed mid-transfer is cleaned
// up after by the next get into the same directory: it removes the
// temporary files whose writer is gone.
//
// Whether a writer is gone is told two ways. The writer holds an exclusive
// flock(2) on its temporary file until the rename (lockTemp); the kernel
// drops it when the writer dies, whichever way. A lock is the only sign
// that holds across pid namespaces and, on NFS, across hosts, where the
// pid in the name means nothing here. And the name carries the writer's
// pid and start time (tempName), which cover the moment between the file's
// creation and its lock, files of writers whose filesystem has no locks,
// and symlinks, which cannot be locked. A temporary file is stale when
// nobody holds its lock and no process with its pid and start time runs.

// ownStart is this process's start time, for the names of its temporary
// files.
var ownStart = sync.OnceValue(func() uint64 { return startTime(os.Getpid()) })

// startTime is when pid started, in clock ticks since boot
// (/proc/PID/stat's 22nd field), or 0 when it cannot be read. A pid and
// its start time name one process: pids are reused, the pair is not.
func startTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// "pid (comm) state ppid …": comm may hold spaces and parentheses;
	// the fields after the last ')' start with the 3rd.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	t, _ := strconv.ParseUint(f[19], 10, 64)
	return t
}

// tempOwner parses the writer out of a temporary file's name:
// "<pid>-<start>-<random>", or "<pid>-<random>" from writers before the
// start time was added (start 0).
func tempOwner(name string) (pid int, start uint64, ok bool) {
	i := strings.LastIndex(name, TempInfix)
	if i < 0 || !strings.HasPrefix(name, ".") {
		return 0, 0, false
	}
	f := strings.Split(name[i+len(TempInfix):], "-")
	if len(f) < 2 || len(f) > 3 {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0, 0, false
	}
	if len(f) == 3 {
		if start, err = strconv.ParseUint(f[1], 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return pid, start, true
}

// lockTemp takes the writer's lock on its temporary file f, held until f
// is closed (or the writer dies). A filesystem without locks (NFS mounted
// nolock) leaves the pid and start time in the name to tell.
func lockTemp(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		for unix.Flock(int(fd), unix.LOCK_EX) == unix.EINTR {
		}
	})
}

// lockState is what probing a temporary file's lock found.
type lockState int

const (
	lockUnknown  lockState = iota // no locks here, or the file cannot be opened
	lockHeld                      // its writer runs
	lockFree                      // nobody holds it
	lockVanished                  // the file is gone already
)

func probeLock(path string) lockState {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return lockVanished
		}
		return lockUnknown
	}
	defer unix.Close(fd)
	for {
		err = unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
		switch {
		case err == nil:
			return lockFree
		case errors.Is(err, unix.EWOULDBLOCK):
			return lockHeld
		case errors.Is(err, unix.EINTR):
			continue
		}
		return lockUnknown
	}
}

// writerGone says whether the writer of the temporary file at path (a
// regular file unless symlink) is gone, so that the file is stale.
func writerGone(path string, symlink bool, pid int, start uint64) bool {
	if !symlink {
		switch probeLock(path) {
		case lockHeld, lockVanished:
			return false
		}
	}
	if !alive(pid) {
		return true
	}
	if start == 0 {
		return false // an older writer's name: its pid runs, keep it
	}
	now := startTime(pid)
	return now != 0 && now != start
}

// RemoveStale removes from dir the temporary files of atomic writes whose
// writers are gone, and returns how many. Gets call it for the
// directories they write into; it is cheap (one read of the directory, and
// a lock probe per temporary file) and never touches a file whose writer
// may still be writing it.
func RemoveStale(dir string) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	removed := 0
	for _, e := range ents {
		pid, start, ok := tempOwner(e.Name())
		if !ok {
			continue
		}
		t := e.Type()
		if t != 0 && t != iofs.ModeSymlink {
			continue // a directory or a device is nobody's temporary file
		}
		p := filepath.Join(dir, e.Name())
		if writerGone(p, t == iofs.ModeSymlink, pid, start) && os.Remove(p) == nil {
			removed++
		}
	}
	return removed
}

// staleSweep runs RemoveStale once per directory, for the many files of
// one tree copy.
type staleSweep struct {
	mu   sync.Mutex
	done map[string]bool
}

func (s *staleSweep) dir(dir string) {
	s.mu.Lock()
	if s.done[dir] {
		s.mu.Unlock()
		return
	}
	if s.done == nil {
		s.done = make(map[string]bool)
	}
	s.done[dir] = true
	s.mu.Unlock()
	RemoveStale(dir)
}
