package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon's log never takes more than its limit in each of its two
// files: a record that would pass the limit starts a fresh file, the full
// one kept as FILE.1 (replacing the one before), and no record is split.
func TestDaemonLogRotatesBySize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "daemon.log")
	l, err := openDaemonLog(path)
	if err != nil {
		t.Fatal(err)
	}
	l.max = 100 // records of 10 bytes: ten to a file
	var written []string
	for i := range 35 {
		rec := fmt.Sprintf("record%03d\n", i)
		if n, err := l.Write([]byte(rec)); n != len(rec) || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		written = append(written, rec)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := os.ReadFile(path + rotatedLogSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(written[30:], ""); string(cur) != want {
		t.Errorf("%s holds %q, want the last records %q", path, cur, want)
	}
	if want := strings.Join(written[20:30], ""); string(prev) != want {
		t.Errorf("%s%s holds %q, want the ten records before %q", path, rotatedLogSuffix, prev, want)
	}
}

// A daemon that logged nothing removes its empty log when it closes it.
func TestDaemonLogEmptyRemoved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "daemon.log")
	l, err := openDaemonLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("an empty log was left: %v", err)
	}
}
