// Package containertest helps test the container connectors against real
// container engines on this machine: Docker and Podman (containers of the
// busybox-only image of scripts/test-image.sh) and LXC (containers whose
// root is the same busybox tree), throw-away containers removed when the
// test ends, and the loud skip (or CI failure) when an engine or root is
// missing.
package containertest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit"
)

// Image is the image scripts/test-image.sh builds: a static busybox, root
// and app (uid 1000), nothing else.
const Image = "spindle-test/busybox:latest"

// DebianImage is the image scripts/test-image-debian.sh builds: a Debian
// minbase with sudo, and app (uid 1000) allowed to sudo without a password.
const DebianImage = "spindle-test/debian:bookworm"

// imageScripts build each image.
var imageScripts = map[string]string{Image: "test-image.sh", DebianImage: "test-image-debian.sh"}

// Engine is a container engine with docker's command line.
type Engine struct {
	// Tool is the program: "docker" or "podman".
	Tool string
	// need checks that the engine can run containers here.
	need func(t testing.TB)
	// runFlags are added to every `run` and `create`.
	runFlags []string
	// rmFlags are added to `rm -f`.
	rmFlags []string
}

// Docker is the Docker engine: the docker CLI and a daemon that answers.
var Docker = Engine{Tool: "docker", need: needDocker}

// Podman is rootful Podman (the tests run as root). Its containers get
//   - --network=none: no bridge, CNI or netavark set-up to depend on; the
//     container still has a network namespace of its own;
//   - lowered nofile and nproc limits: podman's defaults (1048576) are
//     above the hard limits of a root without CAP_SYS_RESOURCE (a root in
//     a container or sandbox), where runc then fails with "error setting
//     rlimit type 7: operation not permitted"; lowering a limit needs no
//     privilege;
//   - --pull=never: the image is local, and a typo must not reach a
//     registry.
var Podman = Engine{Tool: "podman", need: needPodman,
	runFlags: []string{"--network=none", "--pull=never", "--ulimit=nofile=1024:1024", "--ulimit=nproc=4096:4096"},
	// Its sleep is pid 1 and ignores SIGTERM: kill at once instead of
	// waiting podman's 10 s.
	rmFlags: []string{"--time=0"},
}

func needDocker(t testing.TB) {
	t.Helper()
	_, err := exec.LookPath("docker")
	testkit.Need(t, err == nil, "docker is not installed (apt-get install docker.io)")
	out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	testkit.Need(t, err == nil, "the Docker daemon does not answer `docker version`: "+strings.TrimSpace(string(out)))
}

var podmanInfo struct {
	once sync.Once
	err  error
	out  []byte
}

func needPodman(t testing.TB) {
	t.Helper()
	NeedRoot(t, "the podman tests run rootful podman")
	_, err := exec.LookPath("podman")
	testkit.Need(t, err == nil, "podman is not installed (scripts/test-deps.sh installs it)")
	podmanInfo.once.Do(func() {
		podmanInfo.out, podmanInfo.err = exec.Command("podman", "info", "--format", "{{.Host.OCIRuntime.Name}}").CombinedOutput()
	})
	testkit.Need(t, podmanInfo.err == nil, "`podman info` fails: "+strings.TrimSpace(string(podmanInfo.out)))
}

// NeedDocker ends t through testkit.Unavailable unless the docker CLI is
// installed and its daemon answers.
func NeedDocker(t testing.TB) { t.Helper(); Docker.Need(t) }

// NeedRoot ends t through testkit.Unavailable unless it runs as root.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	testkit.Need(t, os.Geteuid() == 0, why+": it must run as root")
}

// Need ends t through testkit.Unavailable unless e can run containers
// here.
func (e Engine) Need(t testing.TB) {
	t.Helper()
	e.need(t)
}

var (
	imageMu    sync.Mutex
	imageBuilt = map[string]bool{}
)

// BuildImage runs scripts/test-image.sh once per test binary (it returns
// at once when the image exists). A failure fails t.
func BuildImage(t testing.TB) { t.Helper(); Docker.BuildImage(t, Image) }

// BuildImageOf builds image (Image or DebianImage) for Docker once per
// test binary.
func BuildImageOf(t testing.TB, image string) { t.Helper(); Docker.BuildImage(t, image) }

// BuildImage builds image (Image or DebianImage) for e once per test
// binary; the script returns at once when the image exists with its
// current recipe.
func (e Engine) BuildImage(t testing.TB, image string) {
	t.Helper()
	e.Need(t)
	imageMu.Lock()
	defer imageMu.Unlock()
	if imageBuilt[e.Tool+" "+image] {
		return
	}
	script, err := Script(imageScripts[image])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "IMAGE="+image, "DOCKER="+e.Tool)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s (%s): %v\n%s", script, e.Tool, err, out)
	}
	imageBuilt[e.Tool+" "+image] = true
}

// Script is the path of scripts/NAME in this module.
func Script(name string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the spindle module")
	}
	return filepath.Join(filepath.Dir(mod), "scripts", name), nil
}

// Container is a throw-away container.
type Container struct {
	Name      string // also its hostname
	ID        string // the engine's id; empty for LXC
	LeaderPID int    // its first process, in this host's pid namespace
}

func random() string {
	b := make([]byte, 5)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Run starts a Docker container of Image that sleeps, named and hostnamed
// spt-RANDOM, removed when t ends.
func Run(t testing.TB) Container { t.Helper(); return Docker.Run(t, Image) }

// RunImage is Run with another image (DebianImage).
func RunImage(t testing.TB, image string) Container { t.Helper(); return Docker.Run(t, image) }

// RunWith is RunImage with extra `docker run` flags ("-e", "K=V", "-v", …).
func RunWith(t testing.TB, image string, flags ...string) Container {
	t.Helper()
	return Docker.Run(t, image, flags...)
}

// Run starts a container of image (Image or DebianImage) that runs
// `sleep 3600`, named and hostnamed spt-RANDOM, with extra `run` flags,
// removed (whatever its state) when t ends.
func (e Engine) Run(t testing.TB, image string, flags ...string) Container {
	t.Helper()
	e.BuildImage(t, image)
	name := "spt-" + random()
	c := Container{Name: name}
	args := append([]string{"run", "-d", "--name", name, "--hostname", name}, e.runFlags...)
	args = append(append(args, flags...), image, "sleep", "3600")
	out, err := exec.Command(e.Tool, args...).CombinedOutput()
	t.Cleanup(func() { e.Remove(t, name) })
	if err != nil {
		t.Fatalf("%s run: %v: %s", e.Tool, err, out)
	}
	c.ID = strings.TrimSpace(string(out))
	c.LeaderPID = e.LeaderPID(t, name)
	return c
}

// Create makes a Docker container of Image that is not started, removed
// when t ends.
func Create(t testing.TB) string { t.Helper(); return Docker.Create(t) }

// Create makes a container of Image that is not started, removed when t
// ends.
func (e Engine) Create(t testing.TB) string {
	t.Helper()
	e.BuildImage(t, Image)
	name := "spt-" + random()
	args := append(append([]string{"create", "--name", name}, e.runFlags...), Image, "sleep", "3600")
	out, err := exec.Command(e.Tool, args...).CombinedOutput()
	t.Cleanup(func() { e.Remove(t, name) })
	if err != nil {
		t.Fatalf("%s create: %v: %s", e.Tool, err, out)
	}
	return name
}

// Remove removes a Docker container, whatever its state.
func Remove(t testing.TB, name string) { t.Helper(); Docker.Remove(t, name) }

// Remove removes a container, whatever its state.
func (e Engine) Remove(t testing.TB, name string) {
	t.Helper()
	args := append(append([]string{"rm", "-f", "-v"}, e.rmFlags...), name)
	if out, err := exec.Command(e.Tool, args...).CombinedOutput(); err != nil &&
		!strings.Contains(strings.ToLower(string(out)), "no such container") {
		t.Logf("%s rm -f %s: %v: %s", e.Tool, name, err, out)
	}
}

// LeaderPID is the host PID of a Docker container's first process.
func LeaderPID(t testing.TB, name string) int { t.Helper(); return Docker.LeaderPID(t, name) }

// LeaderPID is the host PID of the container's first process.
func (e Engine) LeaderPID(t testing.TB, name string) int {
	t.Helper()
	out, err := exec.Command(e.Tool, "inspect", "--format", "{{.State.Pid}}", name).CombinedOutput()
	if err != nil {
		t.Fatalf("%s inspect %s: %v: %s", e.Tool, name, err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		t.Fatalf("%s inspect %s: pid %q", e.Tool, name, out)
	}
	return pid
}

// Exec runs argv in container name with e's exec and returns its combined
// output; a failure fails t.
func (e Engine) Exec(t testing.TB, name string, argv ...string) string {
	t.Helper()
	out, err := exec.Command(e.Tool, append([]string{"exec", name}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s exec %s %q: %v: %s", e.Tool, name, argv, err, out)
	}
	return string(out)
}
