package testagent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Directories of exited test binaries go; those of live ones, and recent
// ones without a pid, stay.
func TestRemoveOrphans(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, age time.Duration) string {
		d := filepath.Join(tmp, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-age)
		os.Chtimes(d, old, old)
		return d
	}
	dead := mk(fmt.Sprintf("%s%d-123", dirPrefix, exited.Process.Pid), 0)
	live := mk(fmt.Sprintf("%s%d-456", dirPrefix, os.Getpid()), 2*time.Hour)
	oldNoPid := mk(dirPrefix+"789", 2*time.Hour)
	newNoPid := mk(dirPrefix+"790", 0)
	lock := filepath.Join(tmp, dirPrefix+"image.lock")
	os.WriteFile(lock, nil, 0o600)
	os.Chtimes(lock, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour))

	removeOrphans()
	for path, want := range map[string]bool{dead: false, live: true, oldNoPid: false, newNoPid: true, lock: true} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(path), err == nil, want)
		}
	}
}
