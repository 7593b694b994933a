package fs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHoldOldKeepsOnlyLargeRegularFiles(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, holdOldMin), 0o644); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(big, link); err != nil {
		t.Fatal(err)
	}
	f := holdOld(big)
	if f == nil {
		t.Fatal("a 1 MiB file was not held")
	}
	f.Close()
	for _, p := range []string{small, link, dir, filepath.Join(dir, "missing")} {
		if f := holdOld(p); f != nil {
			f.Close()
			t.Errorf("holdOld(%s) held it", p)
		}
	}
}
