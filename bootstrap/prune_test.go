package bootstrap

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// writeAged writes dir/name (its name as content) last modified age ago.
func writeAged(t *testing.T, dir, name string, age time.Duration) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(name), 0o700); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-age)
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

// An agent installed long ago but started a minute ago (its memo touched,
// markUsed) ranks as used a minute ago: it stays, and an agent installed
// later but not used since goes.
func TestPruneDirGoesByLastUse(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, age time.Duration) { writeAged(t, dir, name, age) }
	write("agent-v9-me", 0)
	write("agent-v1-daemon", 30*24*time.Hour) // a long-running daemon's version
	write(".agent-v1-daemon.ok", 2*time.Hour)
	write("agent-v2-once", 5*time.Hour) // installed later, used once
	write("agent-v3-once", 6*time.Hour)
	if removed := pruneDir(dir, "agent-v9-me", 1); !slices.Equal(removed, []string{"agent-v2-once", "agent-v3-once"}) {
		t.Fatalf("keep 1: removed %v, want the two unused agents, not the one used 2 h ago", removed)
	}
	markUsed(filepath.Join(dir, ".agent-v1-daemon.ok"))
	if removed := pruneDir(dir, "agent-v9-me", 0); len(removed) != 0 {
		t.Fatalf("keep 0: removed %v, want nothing (used just now)", removed)
	}
}

// A cache directory keeps the running agent and the newest others; older
// agents and memos without an agent go.
func TestPruneDirKeepsNewest(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, age time.Duration) { writeAged(t, dir, name, age) }
	write("agent-v5-me", 100*time.Hour) // the running one, however old
	write(".agent-v5-me.ok", time.Hour)
	write("agent-v4-a", 90*time.Minute)
	write(".agent-v4-a.ok", 100*time.Minute) // memos older than their agents:
	// the install times decide here (TestPruneDirGoesByLastUse for memos)
	write("agent-v3-b", 2*time.Hour)
	write("agent-v2-c", 3*time.Hour)
	write(".agent-v2-c.ok", 4*time.Hour)
	write("agent-v1-d", 4*time.Hour)
	write("agent-v9-new", time.Minute)    // just installed by someone else: spared
	write(".agent-v0-gone.ok", time.Hour) // its agent was removed by hand
	write(".agent-1234", time.Hour)       // a first stage's temp file
	write("inflight", time.Hour)          // fs's journal

	removed := pruneDir(dir, "agent-v5-me", 2)
	slices.Sort(removed)
	// Kept: ours, the newest two others (v9, v4).
	want := []string{".agent-v0-gone.ok", ".agent-v2-c.ok", "agent-v1-d", "agent-v2-c", "agent-v3-b"}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	wantLeft := []string{".agent-1234", ".agent-v4-a.ok", ".agent-v5-me.ok", "agent-v4-a", "agent-v5-me", "agent-v9-new", "inflight"}
	if t.Failed() {
		return
	}
	// However many there are, files installed in the last pruneMinAge stay.
	for _, n := range []string{"agent-v10-x", "agent-v11-y", "agent-v12-z"} {
		write(n, time.Minute)
	}
	removed = pruneDir(dir, "agent-v5-me", 0)
	slices.Sort(removed)
	if want := []string{".agent-v4-a.ok", "agent-v4-a"}; !slices.Equal(removed, want) {
		t.Errorf("keep 0: removed %v, want %v (the files of the last hour stay)", removed, want)
	}
	if !slices.Equal(left, wantLeft) {
		t.Errorf("left %v, want %v", left, wantLeft)
	}
}

// Reusing a cached agent file trusts a matching memo instead of hashing
// the file again, marks the memo (not the agent file, whose ctime the memo
// names) as used, and hashes when the memo no longer matches.
func TestCachedFileHasHashUsesMemo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent-v1-0123456789abcdef")
	if err := os.WriteFile(path, []byte("the agent"), 0o700); err != nil {
		t.Fatal(err)
	}
	real := fmt.Sprintf("%x", sha256.Sum256([]byte("the agent")))
	if !cachedFileHasHash(path, real) {
		t.Fatal("no memo: the file's own hash was not recognised")
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	memo := memoBeside(path)
	if got := readMemo(memo); got != memoLine(real, &st) {
		t.Fatalf("after hashing, the memo is %q, want what CheckSelf writes", got)
	}
	// A memo naming another hash for exactly this file is believed: proof
	// that the file was not hashed again.
	other := strings.Repeat("ab", 32)
	if err := os.WriteFile(memo, []byte(memoLine(other, &st)), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-3 * time.Hour)
	if err := os.Chtimes(memo, old, old); err != nil {
		t.Fatal(err)
	}
	if !cachedFileHasHash(path, other) {
		t.Fatal("a matching memo was not trusted")
	}
	var after, ms unix.Stat_t
	if err := unix.Lstat(path, &after); err != nil || after.Ctim != st.Ctim || after.Mtim != st.Mtim {
		t.Fatalf("the agent file's times changed (%v): its memo no longer matches", err)
	}
	if err := unix.Lstat(memo, &ms); err != nil || time.Since(time.Unix(ms.Mtim.Unix())) > time.Minute {
		t.Fatalf("the memo was not marked as used: %v", err)
	}
	// Once the file changes, the memo no longer matches and the real hash
	// decides.
	if err := os.WriteFile(path, []byte("tampered"), 0o700); err != nil {
		t.Fatal(err)
	}
	if cachedFileHasHash(path, other) || cachedFileHasHash(path, real) {
		t.Fatal("a changed file was taken for the cached agent")
	}
}
