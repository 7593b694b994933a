// Package containertest helps test the container connectors against a
// real Docker engine: the busybox-only image of scripts/test-image.sh,
// throw-away containers removed when the test ends, and the loud skip (or
// CI failure) when Docker or root is missing.
package containertest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/becometest"
)

// Image is the image scripts/test-image.sh builds: a static busybox, root
// and app (uid 1000), nothing else.
const Image = "spindle-test/busybox:latest"

// NeedDocker skips t loudly (fails it when CI=true) unless the docker CLI
// is installed and its daemon answers.
func NeedDocker(t testing.TB) {
	t.Helper()
	_, err := exec.LookPath("docker")
	becometest.Need(t, err == nil, "docker is not installed (apt-get install docker.io)")
	out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	becometest.Need(t, err == nil, "the Docker daemon does not answer `docker version`: "+strings.TrimSpace(string(out)))
}

// NeedRoot skips t loudly (fails it when CI=true) unless it runs as root.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	becometest.Need(t, os.Geteuid() == 0, why+": it must run as root")
}

// DebianImage is the image scripts/test-image-debian.sh builds: a Debian
// minbase with sudo, and app (uid 1000) allowed to sudo without a password.
const DebianImage = "spindle-test/debian:bookworm"

// imageScripts build each image.
var imageScripts = map[string]string{Image: "test-image.sh", DebianImage: "test-image-debian.sh"}

var (
	imageMu    sync.Mutex
	imageBuilt = map[string]bool{}
)

// BuildImage runs scripts/test-image.sh once per test binary (it returns
// at once when the image exists). A failure fails t.
func BuildImage(t testing.TB) { BuildImageOf(t, Image) }

// BuildImageOf builds image (Image or DebianImage) once per test binary.
func BuildImageOf(t testing.TB, image string) {
	t.Helper()
	NeedDocker(t)
	imageMu.Lock()
	defer imageMu.Unlock()
	if imageBuilt[image] {
		return
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", imageScripts[image])
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "IMAGE="+image)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	imageBuilt[image] = true
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// Container is a throw-away container of Image.
type Container struct {
	Name      string // also its hostname
	ID        string
	LeaderPID int
}

func random() string {
	b := make([]byte, 5)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Run starts a container of Image that sleeps, named and hostnamed
// spt-RANDOM, removed (with docker rm -f) when t ends.
func Run(t testing.TB) Container { return RunImage(t, Image) }

// RunImage is Run with another image (DebianImage).
func RunImage(t testing.TB, image string) Container { return RunWith(t, image) }

// RunWith is RunImage with extra `docker run` flags ("-e", "K=V", "-v", …).
func RunWith(t testing.TB, image string, flags ...string) Container {
	t.Helper()
	BuildImageOf(t, image)
	name := "spt-" + random()
	c := Container{Name: name}
	args := append([]string{"run", "-d", "--name", name, "--hostname", name}, flags...)
	args = append(args, image, "sleep", "3600")
	out, err := exec.Command("docker", args...).CombinedOutput()
	t.Cleanup(func() { Remove(t, name) })
	if err != nil {
		t.Fatalf("docker run: %v: %s", err, out)
	}
	c.ID = strings.TrimSpace(string(out))
	c.LeaderPID = LeaderPID(t, name)
	return c
}

// Create makes a container of Image that is not started, removed when t
// ends.
func Create(t testing.TB) string {
	t.Helper()
	BuildImage(t)
	name := "spt-" + random()
	out, err := exec.Command("docker", "create", "--name", name, Image, "sleep", "3600").CombinedOutput()
	t.Cleanup(func() { Remove(t, name) })
	if err != nil {
		t.Fatalf("docker create: %v: %s", err, out)
	}
	return name
}

// Remove removes a container, whatever its state.
func Remove(t testing.TB, name string) {
	if out, err := exec.Command("docker", "rm", "-f", "-v", name).CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "No such container") {
		t.Logf("docker rm -f %s: %v: %s", name, err, out)
	}
}

// LeaderPID is the host PID of the container's first process.
func LeaderPID(t testing.TB, name string) int {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "--format", "{{.State.Pid}}", name).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect %s: %v: %s", name, err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		t.Fatalf("docker inspect %s: pid %q", name, out)
	}
	return pid
}
