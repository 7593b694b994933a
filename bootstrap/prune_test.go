package bootstrap

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A cache directory keeps the running agent and the newest others; older
// agents and memos without an agent go.
func TestPruneDirKeepsNewest(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, age time.Duration) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o700); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write("agent-v5-me", 100*time.Hour) // the running one, however old
	write(".agent-v5-me.ok", time.Hour)
	write("agent-v4-a", 90*time.Minute)
	write(".agent-v4-a.ok", time.Hour)
	write("agent-v3-b", 2*time.Hour)
	write("agent-v2-c", 3*time.Hour)
	write(".agent-v2-c.ok", time.Hour)
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
