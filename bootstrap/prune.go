package bootstrap

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// KeepOtherAgents is how many agent files besides the running one a cache
// directory keeps. Every controller version uploads its own agent
// (6–7 MiB), and the preferred directories are RAM-backed
// ($XDG_RUNTIME_DIR, /dev/shm): without pruning, each upgrade of the
// controller would leave its predecessor's agent in the target's RAM for
// good. A few are kept so that two controller versions used side by side
// do not upload in turn.
const KeepOtherAgents = 2

// pruneMinAge spares agent files used (or installed) recently whatever
// their rank: another controller (another version, or a test binary on
// the same machine) may have just installed one and be about to run it,
// or be running one every few minutes.
const pruneMinAge = time.Hour

// PruneCache removes, from the private cache directory our executable
// runs from, the agent files other than ours beyond the keep most
// recently used and last used over pruneMinAge ago, with their
// self-check memos, and memos whose agent is gone. A removed agent that is still running keeps running (its inode
// lives on); its controller uploads it again if it needs it. It does
// nothing when we do not run from such a directory, and reports what it
// removed.
func PruneCache(keep int) (removed []string) {
	self, ok := ownCachedAgent("/proc/self/exe")
	if !ok {
		return nil
	}
	return pruneDir(filepath.Dir(self), filepath.Base(self), keep)
}

// pruneDir is PruneCache for the agent file me in dir.
func pruneDir(dir, me string, keep int) (removed []string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type agentFile struct {
		name  string
		mtime int64
	}
	var others []agentFile
	present := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "agent-") || name == me {
			present[name] = true
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(dir, name), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
			continue
		}
		present[name] = true
		// Last used: the agent's memo is touched at every start that
		// trusts it (markUsed); the agent file's mtime is its install.
		last := st.Mtim.Nano()
		var ms unix.Stat_t
		if unix.Lstat(memoBeside(filepath.Join(dir, name)), &ms) == nil && ms.Mtim.Nano() > last {
			last = ms.Mtim.Nano()
		}
		others = append(others, agentFile{name, last})
	}
	slices.SortFunc(others, func(a, b agentFile) int {
		switch {
		case a.mtime > b.mtime:
			return -1
		case a.mtime < b.mtime:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	old := time.Now().Add(-pruneMinAge).UnixNano()
	for i, a := range others {
		if i < keep || a.mtime > old {
			continue
		}
		if os.Remove(filepath.Join(dir, a.name)) == nil {
			removed = append(removed, a.name)
			delete(present, a.name)
		}
	}
	// Memos (.agent-….ok) whose agent is gone.
	for _, e := range entries {
		name := e.Name()
		agent, isMemo := strings.CutSuffix(strings.TrimPrefix(name, "."), ".ok")
		if !isMemo || !strings.HasPrefix(name, ".agent-") || present[agent] {
			continue
		}
		if os.Remove(filepath.Join(dir, name)) == nil {
			removed = append(removed, name)
		}
	}
	return removed
}
