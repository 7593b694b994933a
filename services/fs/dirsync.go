package fs

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// syncDir makes the renames already done in dir durable by fsyncing the
// directory, sharing one fsync among the writers that ask at once (a group
// commit). An fsync covers a rename only if it starts after it, so a writer
// that arrives while one runs waits for it and then for the next, which it
// or another waiter starts, covering everyone who arrived meanwhile. A tree
// copy keeps 32 files in flight into one directory: without sharing, every
// file paid a directory fsync of its own (each an ext4 journal commit).
//
// Some filesystems cannot fsync a directory; that is no failure.
func syncDir(dir string) error {
	s := dirSyncs.get(dir)
	defer dirSyncs.put(dir, s)
	s.mu.Lock()
	defer s.mu.Unlock()
	target := s.started + 1 // the first sync to start from now on
	for s.finished < target {
		if s.started == s.finished {
			// None running: run the next one ourselves.
			s.started++
			s.mu.Unlock()
			err := dirFsync(dir)
			s.mu.Lock()
			s.finished++
			s.err = err
			s.cond.Broadcast()
			continue
		}
		s.waiting++
		s.cond.Wait()
		s.waiting--
	}
	// s.err is the latest sync's, which started after our rename: if it
	// succeeded, the rename is durable whatever an earlier one returned.
	return s.err
}

// dirFsync is fsyncDir; tests replace it.
var dirFsync = fsyncDir

func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil // as before: nothing to sync that we could open
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}

// dirSync is one directory's group commit state.
type dirSync struct {
	mu                sync.Mutex
	cond              sync.Cond
	started, finished uint64
	err               error
	waiting           int // callers waiting for a sync
	users             int // guarded by dirSyncTable.mu
}

// dirSyncTable holds the state of directories being synced, only while
// somebody uses it.
type dirSyncTable struct {
	mu   sync.Mutex
	dirs map[string]*dirSync
}

var dirSyncs = dirSyncTable{dirs: map[string]*dirSync{}}

func (t *dirSyncTable) get(dir string) *dirSync {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.dirs[dir]
	if s == nil {
		s = &dirSync{}
		s.cond.L = &s.mu
		t.dirs[dir] = s
	}
	s.users++
	return s
}

func (t *dirSyncTable) put(dir string, s *dirSync) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.users--
	if s.users == 0 {
		delete(t.dirs, dir)
	}
}
