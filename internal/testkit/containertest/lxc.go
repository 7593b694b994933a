package containertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit"
)

// LXC containers are made without a template or a download: a directory
// in the LXC store holding a config written here and, as the container's
// root, the busybox tree of scripts/test-image.sh (ROOTFS=DIR), which
// takes well under a second to write, so each container gets a fresh one.

// lxcTools are the classic LXC programs the tests and the lxc connector
// run.
var lxcTools = []string{"lxc-start", "lxc-stop", "lxc-attach", "lxc-info", "lxc-destroy", "lxc-config"}

// NeedLXC ends t through testkit.Unavailable unless it runs as root and
// the lxc package's tools are installed.
func NeedLXC(t testing.TB) {
	t.Helper()
	NeedRoot(t, "the LXC tests create system containers")
	for _, tool := range lxcTools {
		_, err := exec.LookPath(tool)
		testkit.Need(t, err == nil, tool+" is not installed (scripts/test-deps.sh installs the lxc package)")
	}
}

// LXCPath is the LXC store lxc-* use by default (lxc.lxcpath:
// /var/lib/lxc for root).
func LXCPath(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("lxc-config", "lxc.lxcpath").CombinedOutput()
	p := strings.TrimSpace(string(out))
	if err != nil || !filepath.IsAbs(p) {
		t.Fatalf("lxc-config lxc.lxcpath: %v: %q", err, out)
	}
	return p
}

// lxcConfig is the container's config: LXC's common settings (seccomp,
// capability drops, device cgroup), no network but its own namespace
// with a loopback, and `sleep 3600` as pid 1 so that the container runs
// without an init. /dev/shm is a tmpfs of its own, as a distribution's
// init mounts it: without one it is a directory on LXC's 500 kB /dev.
// AppArmor is off: on a machine where the kernel has it but the apparmor
// package is missing (lxc only recommends it), LXC could not load its
// generated profile.
const lxcConfig = `lxc.include = /usr/share/lxc/config/common.conf
lxc.uts.name = %[1]s
lxc.rootfs.path = dir:%[2]s
lxc.net.0.type = empty
lxc.apparmor.profile = unconfined
lxc.tty.max = 0
lxc.mount.entry = tmpfs dev/shm tmpfs rw,nosuid,nodev,mode=1777,create=dir 0 0
lxc.init.cmd = sleep 3600
`

// CreateLXC defines a container spt-RANDOM in the default LXC store, its
// root a fresh busybox tree and its hostname its name, not started. It is
// stopped and destroyed when t ends.
func CreateLXC(t testing.TB) string {
	t.Helper()
	NeedLXC(t)
	name := "spt-" + random()
	dir := filepath.Join(LXCPath(t), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveLXC(t, name, dir) })
	rootfs := filepath.Join(dir, "rootfs")
	script, err := Script("test-image.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "ROOTFS="+rootfs)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s (ROOTFS=%s): %v\n%s", script, rootfs, err, out)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "etc", "hostname"), []byte(name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(fmt.Sprintf(lxcConfig, name, rootfs)), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// RunLXC is CreateLXC, started (lxc-start -d).
func RunLXC(t testing.TB) Container {
	t.Helper()
	name := CreateLXC(t)
	logFile := filepath.Join(t.TempDir(), "lxc-start.log")
	if out, err := exec.Command("lxc-start", "-n", name, "-d", "-l", "INFO", "-o", logFile).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(logFile)
		t.Fatalf("lxc-start -n %s -d: %v: %s\nits log:\n%s", name, err, out, log)
	}
	return Container{Name: name, LeaderPID: LXCLeaderPID(t, name)}
}

// LXCLeaderPID is the host PID of the container's pid 1 (lxc-info -p).
func LXCLeaderPID(t testing.TB, name string) int {
	t.Helper()
	out, err := exec.Command("lxc-info", "-n", name, "-p", "-H").CombinedOutput()
	pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || perr != nil || pid <= 0 {
		t.Fatalf("lxc-info -n %s -p -H: %v: %q", name, err, out)
	}
	return pid
}

// RemoveLXC kills and destroys a container and removes its directory
// (dir; empty for the default store's), whatever its state.
func RemoveLXC(t testing.TB, name, dir string) {
	t.Helper()
	// -k: its pid 1 (sleep) ignores the SIGPWR of a clean stop.
	exec.Command("lxc-stop", "-n", name, "-k").Run()
	if out, err := exec.Command("lxc-destroy", "-n", name).CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "doesn't exist") && !strings.Contains(string(out), "does not exist") {
		t.Logf("lxc-destroy -n %s: %v: %s", name, err, out)
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
}
