// Package testagent builds the agent binary once for a test binary, so
// that tests run against the real agent as it ships.
package testagent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	once sync.Once
	path string
	err  error
)

// Build compiles ./cmd/spindle-agent (or reuses $SPINDLE_AGENT) and sets
// SPINDLE_AGENT so that bootstrap.Default() finds it. Call it from
// TestMain; it returns the binary's path.
func Build() (string, error) {
	once.Do(func() {
		if p := os.Getenv("SPINDLE_AGENT"); p != "" {
			path = p
			return
		}
		path, err = BuildPackage("./cmd/spindle-agent", "spindle-agent")
		if err == nil {
			os.Setenv("SPINDLE_AGENT", path)
		}
	})
	return path, err
}

// BuildPackage builds the main package pkg (relative to the module root)
// into a temporary directory and returns the binary's path.
func BuildPackage(pkg, name string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	removeOrphans()
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", dirPrefix, os.Getpid()))
	if err != nil {
		return "", err
	}
	return buildInto(root, dir, pkg, name)
}

// BuildInto builds the main package pkg (relative to the module root) as
// dir/name and returns that path: for tests that need several binaries
// side by side (a CLI and the agent it finds beside itself).
func BuildInto(dir, pkg, name string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return buildInto(root, dir, pkg, name)
}

func buildInto(root, dir, pkg, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

func moduleRoot() (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(b))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the spindle module")
	}
	return filepath.Dir(mod), nil
}

// dirPrefix starts the temporary directories BuildPackage makes, followed
// by the building process's pid.
const dirPrefix = "spindle-test-"

// removeOrphans removes the directories that test binaries which have
// exited left behind. A TestMain ends in os.Exit (goleak's VerifyTestMain
// does), so a test binary cannot remove the agent it built; the next one
// does, instead of letting a binary per package and run pile up in $TMPDIR.
// Directories without a pid (older builds) go once they are an hour old.
func removeOrphans() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), dirPrefix)
		pidPart, _, hasPid := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidPart)
		if hasPid && err == nil && pid > 0 {
			if syscall.Kill(pid, 0) == syscall.ESRCH {
				os.RemoveAll(d)
			}
			continue
		}
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > time.Hour {
			os.RemoveAll(d)
		}
	}
}
