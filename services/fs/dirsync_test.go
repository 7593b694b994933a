package fs

import (
	"errors"
	"runtime"
	"testing"
)

// Writers that ask while a directory sync runs share the next one: it
// starts after all of them arrived, so it covers their renames, and one
// sync serves them all.
func TestSyncDirGroupCommit(t *testing.T) {
	release := make(chan error)
	started := make(chan int, 8)
	n := 0
	dirFsync = func(string) error {
		n++ // syncs never overlap: only one caller at a time runs one
		started <- n
		return <-release
	}
	t.Cleanup(func() { dirFsync = fsyncDir })
	const dir = "/nonexistent/group-commit"

	first := make(chan error, 1)
	go func() { first <- syncDir(dir) }()
	if got := <-started; got != 1 {
		t.Fatalf("sync %d started, want 1", got)
	}
	// Three more writers arrive while sync 1 runs; sync 1 started before
	// their renames, so it does not cover them.
	const late = 3
	done := make(chan error, late)
	for range late {
		go func() { done <- syncDir(dir) }()
	}
	for waiting(dir) < late {
		runtime.Gosched()
	}
	release <- nil
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := <-started; got != 2 {
		t.Fatalf("sync %d started, want 2", got)
	}
	select {
	case err := <-done:
		t.Fatalf("a late writer returned (%v) before the sync that covers it ended", err)
	default:
	}
	// Sync 2 fails: every writer it covered learns it.
	broken := errors.New("disk on fire")
	release <- broken
	for range late {
		if err := <-done; !errors.Is(err, broken) {
			t.Errorf("late writer: %v, want the failed sync's error", err)
		}
	}
	if n != 2 {
		t.Errorf("%d syncs for 4 writers, want 2", n)
	}
	dirSyncs.mu.Lock()
	left := len(dirSyncs.dirs)
	dirSyncs.mu.Unlock()
	if left != 0 {
		t.Errorf("%d directories still tracked after every writer returned", left)
	}
}

// waiting is how many callers wait for dir's next sync.
func waiting(dir string) int {
	dirSyncs.mu.Lock()
	s := dirSyncs.dirs[dir]
	dirSyncs.mu.Unlock()
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}
