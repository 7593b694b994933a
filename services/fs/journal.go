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
// agent deaths: an agent records, in a private directory, every directory
// it is writing temporary files into, and an agent that starts removes the
// temporary files that writers now gone (SIGKILL, OOM, a lost link) left
// in the directories they recorded. A temporary file's name carries its
// writer's pid (see tempName), so only a dead writer's files are removed.
//
// The journal records directories, not files: one entry per directory
// with writes in flight, created before the first temporary file and
// removed when the agent has been idle there long enough (see
// journalIdleMax). A tree copy of 1,000 files into one directory writes
// one entry instead of 1,000; per file, the entry's create, write and
// unlink — metadata that every fsync then commits — cost as much as the
// directory's fsync (measured: 1,000 files of 4 KiB, 32 at a time, on
// ext4: 640 ms with per-file entries, 460 ms without).
//
// The journal lives in the agent's private 0700 cache directory, beside its
// executable, so only the same user's agents read or write it.

// dirEntryPrefix starts the name of a directory entry: d<pid>.<random>.
// Entries of older agents, <pid>.<random> naming one temporary file, are
// still cleaned; older agents skip the new ones (their pid does not parse).
const dirEntryPrefix = "d"

// journalIdleMax is how many directories with no write in flight keep their
// entry. Keeping a few saves re-creating the entry when writes to one
// directory come in waves (a tree copy at 32 in flight over a slow link);
// bounding them keeps a long-lived agent's entries, and the scan after a
// crash, small.
const journalIdleMax = 32

type journalDirEntry struct {
	entry    string // the entry's path in the journal
	inFlight int
	idleSeq  uint64 // when it last became idle, for evicting the oldest
}

var (
	journalMu   sync.Mutex
	journalDir  string
	journalDirs = map[string]*journalDirEntry{}
	journalIdle int
	journalSeq  uint64
)

// tempName is the name of a temporary file for base in dir:
// .<base>.spindle-tmp-<pid>-<start time>-<random hex>, cut to fit a
// 255-byte name. The pid and start time name the writer (stale.go).
func tempName(dir, base string) (string, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	suffix := TempInfix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(ownStart(), 10) + "-" + hex.EncodeToString(rnd[:])
	const maxName = 255
	if keep := maxName - 1 - len(suffix); len(base) > keep {
		base = base[:keep]
	}
	return filepath.Join(dir, "."+base+suffix), nil
}

// journalName names one entry: d<pid>.<random>.
func journalName() string {
	var rnd [6]byte
	rand.Read(rnd[:])
	return dirEntryPrefix + strconv.Itoa(os.Getpid()) + "." + hex.EncodeToString(rnd[:])
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
		name := e.Name()
		isDir := strings.HasPrefix(name, dirEntryPrefix)
		pidStr, _, ok := strings.Cut(strings.TrimPrefix(name, dirEntryPrefix), ".")
		pid, perr := strconv.Atoi(pidStr)
		if !ok || perr != nil || pid <= 0 {
			continue
		}
		if pid == os.Getpid() || alive(pid) {
			continue
		}
		entry := filepath.Join(dir, name)
		b, err := os.ReadFile(entry)
		if err == nil && filepath.IsAbs(string(b)) {
			if isDir {
				removed += removeTemps(string(b), pid)
			} else if tmp := string(b); strings.Contains(filepath.Base(tmp), TempInfix) {
				// An older agent's entry: only ever one of its temporary
				// files, never anything else.
				if os.Remove(tmp) == nil {
					removed++
				}
			}
		}
		os.Remove(entry)
	}
	return removed, nil
}

// removeTemps removes from dir the temporary files and symlinks that pid
// named (tempName) and returns how many.
func removeTemps(dir string, pid int) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	mark := TempInfix + strconv.Itoa(pid) + "-"
	removed := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") || !strings.Contains(e.Name(), mark) {
			continue
		}
		if t := e.Type(); t != 0 && t != os.ModeSymlink {
			continue // a directory or a device is nobody's temporary file
		}
		if os.Remove(filepath.Join(dir, e.Name())) == nil {
			removed++
		}
	}
	return removed
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

// journalEnter records that a write of a temporary file into dir begins;
// call it before creating the file, and the returned func once the file is
// renamed or removed. Without a journal (a library user's process) it does
// nothing. A journal that cannot be written costs only the cleanup after a
// crash, so it is no error.
func journalEnter(dir string) (leave func()) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return func() {}
	}
	journalMu.Lock()
	defer journalMu.Unlock()
	if journalDir == "" {
		return func() {}
	}
	e := journalDirs[dir]
	switch {
	case e == nil:
		e = &journalDirEntry{entry: filepath.Join(journalDir, journalName())}
		// Under the lock, so that nobody writes into dir before its entry
		// exists. Not fsynced: it guards against the agent's death, and
		// a machine that crashes loses the temporary file's data too.
		if os.WriteFile(e.entry, []byte(dir), 0o600) != nil {
			return func() {}
		}
		journalDirs[dir] = e
	case e.inFlight == 0:
		journalIdle--
	}
	e.inFlight++
	return func() {
		journalMu.Lock()
		defer journalMu.Unlock()
		e.inFlight--
		if e.inFlight > 0 {
			return
		}
		journalSeq++
		e.idleSeq = journalSeq
		journalIdle++
		if journalIdle > journalIdleMax {
			evictIdleLocked()
		}
	}
}

// evictIdleLocked removes the entry of the directory idle the longest.
func evictIdleLocked() {
	var oldestDir string
	var oldest *journalDirEntry
	for d, e := range journalDirs {
		if e.inFlight == 0 && (oldest == nil || e.idleSeq < oldest.idleSeq) {
			oldestDir, oldest = d, e
		}
	}
	if oldest == nil {
		return
	}
	os.Remove(oldest.entry)
	delete(journalDirs, oldestDir)
	journalIdle--
}

// CloseJournal removes the entries of directories with no write in flight;
// the agent calls it when it exits. Entries of writes still running stay,
// for the next agent to clean up after.
func CloseJournal() {
	journalMu.Lock()
	defer journalMu.Unlock()
	for d, e := range journalDirs {
		if e.inFlight == 0 {
			os.Remove(e.entry)
			delete(journalDirs, d)
			journalIdle--
		}
	}
}
