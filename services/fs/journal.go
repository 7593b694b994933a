package fs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The journal makes "no half-written file survives a crash" hold across
// agent deaths: every atomic write records its temporary file in a private
// directory for as long as it runs, and an agent that starts removes the
// temporary files of writers that are gone (SIGKILL, OOM, a lost link).
// The journal lives in the agent's private 0700 cache directory, beside its
// executable, so only the same user's agents read or write it.

var (
	journalMu  sync.Mutex
	journalDir string
)

// journalName marks one entry: <pid>.<random>.
func journalName() string {
	var rnd [6]byte
	rand.Read(rnd[:])
	return strconv.Itoa(os.Getpid()) + "." + hex.EncodeToString(rnd[:])
}

// SetJournal keeps the journal in dir (created 0700 if missing) and
// cleans up after writers that died; the agent calls it once at start.
// It returns how many stale temporary files it removed.
func SetJournal(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	journalMu.Lock()
	journalDir = dir
	journalMu.Unlock()
	return CleanJournal(dir)
}

// CleanJournal removes the temporary files recorded in dir by processes
// that no longer run, and their entries.
func CleanJournal(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, e := range ents {
		pidStr, _, ok := strings.Cut(e.Name(), ".")
		pid, perr := strconv.Atoi(pidStr)
		if !ok || perr != nil || pid <= 0 {
			continue
		}
		if pid == os.Getpid() || alive(pid) {
			continue
		}
		entry := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(entry)
		if err == nil {
			tmp := string(b)
			// Only ever a temporary file of ours: never follow an entry to
			// anything else.
			if filepath.IsAbs(tmp) && strings.Contains(filepath.Base(tmp), TempInfix) {
				if os.Remove(tmp) == nil {
					removed++
				}
			}
		}
		os.Remove(entry)
	}
	return removed, nil
}

// alive says whether pid still runs: a zombie (killed, not yet reaped
// by its parent) writes nothing any more and counts as dead.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, rerr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if rerr != nil {
		return true
	}
	// "pid (comm) S …": the state follows the last ')'.
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
		return false
	}
	return true
}

// journalAdd records tmp while an atomic write runs; the returned func
// forgets it. Without a journal (a library user's process) it does
// nothing.
func journalAdd(tmp string) (forget func()) {
	journalMu.Lock()
	dir := journalDir
	journalMu.Unlock()
	if dir == "" {
		return func() {}
	}
	entry := filepath.Join(dir, journalName())
	if err := os.WriteFile(entry, []byte(tmp), 0o600); err != nil {
		return func() {}
	}
	return func() { os.Remove(entry) }
}
