package integration_test

import (
	stdctx "context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/docker"
	"github.com/spindle-rpc/spindle/connectors/kubectl"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/connectors/lxc"
	"github.com/spindle-rpc/spindle/connectors/lxd"
	"github.com/spindle-rpc/spindle/connectors/machinectl"
	"github.com/spindle-rpc/spindle/connectors/podman"
	"github.com/spindle-rpc/spindle/connectors/setns"
	"github.com/spindle-rpc/spindle/internal/testkit"
	"github.com/spindle-rpc/spindle/internal/testkit/containertest"
	"github.com/spindle-rpc/spindle/internal/testkit/standin"
	sexec "github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
)

// The container tests start agents in containers of the busybox-only image
// (scripts/test-image.sh: a static busybox, root and app, nothing else)
// through a local agent, as a controller reaches a container behind a
// host: controller → local agent → docker exec (or setns) → agent in the
// container, which got its binary from the local agent's RAM.

// inContainer checks that cx is an agent inside container c, running as
// uid (user), and that it sees the container's hostname, filesystem, pid
// and network namespaces rather than the host's.
func inContainer(t *testing.T, cx *spindle.Context, c containertest.Container, uid int, user, home string) {
	t.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	info, err := sys.Info(ctx, cx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Hostname != c.Name || info.UID != uid || info.User != user || info.Home != home || info.PID != cx.Hello().PID {
		t.Fatalf("sys.Info in the container: %+v; want hostname %s, uid %d, user %s, home %s, pid %d",
			info, c.Name, uid, user, home, cx.Hello().PID)
	}
	if got := strings.TrimSpace(run(t, cx, "id", "-u")); got != strconv.Itoa(uid) {
		t.Errorf("id -u: %q, want %d", got, uid)
	}
	if got := strings.TrimSpace(run(t, cx, "hostname")); got != c.Name {
		t.Errorf("hostname: %q, want %s", got, c.Name)
	}
	if got := strings.TrimSpace(run(t, cx, "cat", "/etc/hostname")); got != c.Name {
		t.Errorf("/etc/hostname: %q, want %s", got, c.Name)
	}
	// The container's root: sh is the static busybox and the host's
	// files are not there.
	if got := strings.TrimSpace(run(t, cx, "readlink", "-f", "/bin/sh")); got != "/bin/busybox" {
		t.Errorf("/bin/sh is %q, want /bin/busybox (the test image)", got)
	}
	if _, err := os.Stat("/etc/debian_version"); err == nil {
		res, err := sexec.Run(ctx, cx, sexec.Cmd{Argv: []string{"cat", "/etc/debian_version"}})
		if err != nil || res.ExitCode == 0 {
			t.Errorf("the host's /etc/debian_version is visible in the container: %v %+v", err, res)
		}
	}
	// The container's pid namespace: its pid 1 is the image's sleep.
	if got := run(t, cx, "cat", "/proc/1/cmdline"); got != "sleep\x003600\x00" {
		t.Errorf("pid 1 in the agent's view: %q, want the container's sleep 3600", got)
	}
	// The container's network namespace: the same as its leader's, not
	// the host's.
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", c.LeaderPID))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(run(t, cx, "readlink", "/proc/self/ns/net"))
	if got != theirs || got == ours {
		t.Errorf("network namespace in the container: %s; the container's is %s, the host's %s", got, theirs, ours)
	}
}

// gone checks, from another agent in the same container, that process pid
// (in the container's pid namespace) has exited.
func gone(t *testing.T, other *spindle.Context, pid int) {
	t.Helper()
	stat := run(t, other, "sh", "-c", fmt.Sprintf("cat /proc/%d/stat 2>/dev/null; true", pid))
	if stat != "" && !strings.Contains(stat, ") Z ") {
		t.Errorf("the closed agent (pid %d in the container) still runs: %s", pid, stat)
	}
}

func randomName(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// TestContainerDocker: docker exec into a busybox-only container, as root
// and as app; the same hop again is the same child; Close ends the agent
// in the container.
func TestContainerDocker(t *testing.T) {
	t.Parallel()
	c := containertest.Run(t)
	_, parent := mustConnect(t, nil, local.Options{})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()

	engineHops(t, ctx, parent, c, "docker", func(user string) spindle.Connector {
		return docker.Options{Container: c.Name, User: user}
	})
}

// engineHops is what every container engine's hop must do: as root and
// as app, the same hop again is the same child, and Close ends the
// agent in the container. hop builds the engine's connector for a user
// ("" for the default).
func engineHops(t *testing.T, ctx stdctx.Context, parent *spindle.Context, c containertest.Container, kind string, hop func(user string) spindle.Connector) {
	t.Helper()
	root, err := parent.Connect(ctx, hop(""))
	if err != nil {
		t.Fatal(err)
	}
	if want := "local → " + kind + ":" + c.Name; root.Name() != want {
		t.Fatalf("child name %q, want %q", root.Name(), want)
	}
	inContainer(t, root, c, 0, "root", "/root")
	if again, err := parent.Connect(ctx, hop("")); err != nil || again != root {
		t.Fatalf("connecting %s:%s again gave %v, %v; want the running child", kind, c.Name, again, err)
	}

	app, err := parent.Connect(ctx, hop("app"))
	if err != nil {
		t.Fatal(err)
	}
	if app == root || app.Name() != "local → "+kind+":app@"+c.Name {
		t.Fatalf("the app hop is %q (same as root: %v)", app.Name(), app == root)
	}
	inContainer(t, app, c, 1000, "app", "/home/app")

	pid := app.Hello().PID
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	<-app.Done()
	gone(t, root, pid)
}

// TestContainerDockerErrors: what a user gets wrong is a clear error of
// the right kind that names the hop and says what to do.
func TestContainerDockerErrors(t *testing.T) {
	t.Parallel()
	c := containertest.Run(t)
	stopped := containertest.Create(t)
	_, parent := mustConnect(t, nil, local.Options{})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()

	missing := randomName("spt-missing-")
	checkErrors(ctx, t, parent, []errCase{
		{"no such container", docker.Options{Container: missing}, spindle.ErrNotFound,
			[]string{"local → docker:" + missing, "no such container", "docker ps -a"}},
		{"a stopped container", docker.Options{Container: stopped}, spindle.ErrNotFound,
			[]string{"local → docker:" + stopped, "not running", "docker start " + stopped}},
		{"no such user", docker.Options{Container: c.Name, User: "nosuchuser"}, spindle.ErrNotFound,
			[]string{"docker:nosuchuser@" + c.Name, "no such user", "nosuchuser"}},
		{"docker not installed", docker.Options{Container: c.Name, DockerPath: "/nonexistent/docker"}, spindle.ErrNotFound,
			[]string{"docker:" + c.Name, "not installed", "/nonexistent/docker does not exist", "DockerPath"}},
	})
}

// errCase is a hop that must fail with an error of kind that says each
// of want (case aside).
type errCase struct {
	what string
	hop  spindle.Connector
	kind error
	want []string
}

// checkErrors connects each case's hop from parent and checks its error;
// the failures must leave parent working.
func checkErrors(ctx stdctx.Context, t *testing.T, parent *spindle.Context, cases []errCase) {
	t.Helper()
	for _, tc := range cases {
		cx, err := parent.Connect(ctx, tc.hop)
		if err == nil {
			cx.Close()
			t.Errorf("%s: connected to %s", tc.what, cx.Name())
			continue
		}
		if !errors.Is(err, tc.kind) {
			t.Errorf("%s: %v, want an error that is %v", tc.what, err, tc.kind)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(lower(err), strings.ToLower(w)) {
				t.Errorf("%s: %q does not say %q", tc.what, err, w)
			}
		}
		t.Logf("%s: %v", tc.what, err)
	}
	if err := sys.Ping(ctx, parent); err != nil {
		t.Fatalf("the parent after the failed hops: %v", err)
	}
}

// TestContainerSetns: the local agent (root) joins a busybox-only
// container's namespaces itself and starts the agent there with the
// container's sh, by container name (docker inspect) and by PID, as root
// and as app.
func TestContainerSetns(t *testing.T) {
	t.Parallel()
	containertest.NeedRoot(t, "setns enters a container's namespaces")
	c := containertest.Run(t)
	_, parent := mustConnect(t, nil, local.Options{})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()

	root, err := parent.Connect(ctx, setns.Options{Container: c.Name})
	if err != nil {
		t.Fatal(err)
	}
	if want := "local → setns:" + c.Name; root.Name() != want {
		t.Fatalf("child name %q, want %q", root.Name(), want)
	}
	inContainer(t, root, c, 0, "root", "/root")
	if again, err := parent.Connect(ctx, setns.Options{Container: c.Name}); err != nil || again != root {
		t.Fatalf("connecting setns:%s again gave %v, %v; want the running child", c.Name, again, err)
	}

	app, err := parent.Connect(ctx, setns.Options{Container: c.Name, User: "app"})
	if err != nil {
		t.Fatal(err)
	}
	inContainer(t, app, c, 1000, "app", "/home/app")
	if got := strings.TrimSpace(run(t, app, "id", "-G")); got != "1000" {
		t.Errorf("app's groups in the container: %q, want 1000 (the host's groups must not leak in)", got)
	}

	byPID, err := parent.Connect(ctx, setns.Options{PID: c.LeaderPID})
	if err != nil {
		t.Fatal(err)
	}
	if byPID == root || byPID.Name() != "local → setns:"+strconv.Itoa(c.LeaderPID) {
		t.Fatalf("the PID hop is %q", byPID.Name())
	}
	inContainer(t, byPID, c, 0, "root", "/root")

	pid := app.Hello().PID
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	<-app.Done()
	gone(t, root, pid)

	missing := randomName("spt-missing-")
	stopped := containertest.Create(t)
	checkErrors(ctx, t, parent, []errCase{
		{"no such container", setns.Options{Container: missing}, spindle.ErrNotFound,
			[]string{"local → setns:" + missing, "no such container", "docker ps -a"}},
		{"a stopped container", setns.Options{Container: stopped}, spindle.ErrNotFound,
			[]string{"local → setns:" + stopped, "not running", "start it"}},
		{"no such user", setns.Options{Container: c.Name, User: "nosuchuser"}, spindle.ErrNotFound,
			[]string{"setns:nosuchuser@" + c.Name, "no such user", "nosuchuser"}},
		{"docker not installed", setns.Options{Container: c.Name, RuntimePath: "/nonexistent/docker"}, spindle.ErrNotFound,
			[]string{"not installed", "/nonexistent/docker does not exist", "RuntimePath"}},
	})
}

// TestContainerPodman: podman exec (rootful) into a busybox-only
// container, as root and as app; the same hop again is the same child;
// Close ends the agent in the container. setns finds the same container
// through `podman inspect`.
func TestContainerPodman(t *testing.T) {
	t.Parallel()
	c := containertest.Podman.Run(t, containertest.Image)
	_, parent := mustConnect(t, nil, local.Options{})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()

	engineHops(t, ctx, parent, c, "podman", func(user string) spindle.Connector {
		return podman.Options{Container: c.Name, User: user}
	})

	// Rootful podman: the tests run as root, as setns needs.
	byName, err := parent.Connect(ctx, setns.Options{Container: c.Name, Runtime: setns.Podman})
	if err != nil {
		t.Fatal(err)
	}
	inContainer(t, byName, c, 0, "root", "/root")
}

// TestContainerPodmanErrors: what real podman says when the container is
// missing, stopped, has no such user or no sh, and podman itself is
// missing, reaches the user as an error of the right kind that names the
// hop and says what to do.
func TestContainerPodmanErrors(t *testing.T) {
	t.Parallel()
	c := containertest.Podman.Run(t, containertest.Image)
	noShell := containertest.Podman.Run(t, containertest.Image)
	containertest.Podman.Exec(t, noShell.Name, "rm", "/bin/sh")
	stopped := containertest.Podman.Create(t)
	_, parent := mustConnect(t, nil, local.Options{})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()

	missing := randomName("spt-missing-")
	checkErrors(ctx, t, parent, []errCase{
		{"no such container", podman.Options{Container: missing}, spindle.ErrNotFound,
			[]string{"local → podman:" + missing, "no such container", "podman ps -a"}},
		{"a stopped container", podman.Options{Container: stopped}, spindle.ErrNotFound,
			[]string{"local → podman:" + stopped, "not running", "podman start " + stopped}},
		{"no such user", podman.Options{Container: c.Name, User: "nosuchuser"}, spindle.ErrNotFound,
			[]string{"podman:nosuchuser@" + c.Name, "no such user", "nosuchuser"}},
		{"no sh", podman.Options{Container: noShell.Name}, spindle.ErrNotFound,
			[]string{"podman:" + noShell.Name, "no sh in the container", "busybox"}},
		{"podman not installed", podman.Options{Container: c.Name, PodmanPath: "/nonexistent/podman"}, spindle.ErrNotFound,
			[]string{"podman:" + c.Name, "not installed", "/nonexistent/podman does not exist", "PodmanPath"}},
		{"setns: a stopped container", setns.Options{Container: stopped, Runtime: setns.Podman}, spindle.ErrNotFound,
			[]string{"setns:" + stopped, "not running"}},
		{"setns: no such container", setns.Options{Container: missing, Runtime: setns.Podman}, spindle.ErrNotFound,
			[]string{"setns:" + missing, "no such container", "podman ps -a"}},
	})
}

// TestContainerLXC: lxc-attach into a busybox-only LXC system container,
// as root and as uid:gid 1000:1000; the agent gets the container's
// environment, not its parent's; Close ends the agent in the container.
// setns finds the same container through lxc-info.
func TestContainerLXC(t *testing.T) {
	t.Parallel()
	c := containertest.RunLXC(t)
	const marker = "SPINDLE_TEST_HOST_ONLY=parent"
	_, parent := mustConnect(t, nil, local.Options{Env: append(os.Environ(), marker)})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()
	if env := run(t, parent, "env"); !strings.Contains(env, marker) {
		t.Fatalf("the parent agent's environment lacks %s:\n%s", marker, env)
	}

	root, err := parent.Connect(ctx, lxc.Options{Container: c.Name})
	if err != nil {
		t.Fatal(err)
	}
	if want := "local → lxc:" + c.Name; root.Name() != want {
		t.Fatalf("child name %q, want %q", root.Name(), want)
	}
	inContainer(t, root, c, 0, "root", "/root")
	env := run(t, root, "env")
	if strings.Contains(env, marker) || !strings.Contains(env, "container=lxc") {
		t.Errorf("the agent in the container has its parent's environment, or not LXC's:\n%s", env)
	}
	if again, err := parent.Connect(ctx, lxc.Options{Container: c.Name}); err != nil || again != root {
		t.Fatalf("connecting lxc:%s again gave %v, %v; want the running child", c.Name, again, err)
	}

	app, err := parent.Connect(ctx, lxc.Options{Container: c.Name, User: "1000:1000"})
	if err != nil {
		t.Fatal(err)
	}
	if app == root || app.Name() != "local → lxc:1000:1000@"+c.Name {
		t.Fatalf("the app hop is %q (same as root: %v)", app.Name(), app == root)
	}
	inContainer(t, app, c, 1000, "app", "/home/app")
	if got := strings.TrimSpace(run(t, app, "id", "-G")); got != "1000" {
		t.Errorf("app's groups in the container: %q, want 1000", got)
	}
	pid := app.Hello().PID
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	<-app.Done()
	gone(t, root, pid)

	byName, err := parent.Connect(ctx, setns.Options{Container: c.Name, Runtime: setns.LXC})
	if err != nil {
		t.Fatal(err)
	}
	inContainer(t, byName, c, 0, "root", "/root")
}

// TestContainerLXCErrors: what real lxc-attach (and lxc-info) say when
// the container is missing, stopped or has no sh, and lxc-attach itself
// is missing.
func TestContainerLXCErrors(t *testing.T) {
	t.Parallel()
	c := containertest.RunLXC(t)
	noShell := containertest.RunLXC(t)
	if err := os.Remove(filepath.Join(containertest.LXCPath(t), noShell.Name, "rootfs", "bin", "sh")); err != nil {
		t.Fatal(err)
	}
	stopped := containertest.CreateLXC(t)
	_, parent := mustConnect(t, nil, local.Options{})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()

	missing := randomName("spt-missing-")
	checkErrors(ctx, t, parent, []errCase{
		{"no such container", lxc.Options{Container: missing}, spindle.ErrNotFound,
			[]string{"local → lxc:" + missing, "no such container", "lxc-ls -f"}},
		{"a stopped container", lxc.Options{Container: stopped}, spindle.ErrNotFound,
			[]string{"local → lxc:" + stopped, "not running", "is stopped", "lxc-start -n " + stopped}},
		{"no sh", lxc.Options{Container: noShell.Name}, spindle.ErrNotFound,
			[]string{"lxc:" + noShell.Name, "no sh in the container", "busybox"}},
		{"a user name", lxc.Options{Container: c.Name, User: "app"}, spindle.ErrBadArgs,
			[]string{"lxc:app@" + c.Name, "numeric"}},
		{"lxc-attach not installed", lxc.Options{Container: c.Name, AttachPath: "/nonexistent/lxc-attach"}, spindle.ErrNotFound,
			[]string{"lxc:" + c.Name, "not installed", "/nonexistent/lxc-attach does not exist", "AttachPath"}},
		{"setns: a stopped container", setns.Options{Container: stopped, Runtime: setns.LXC}, spindle.ErrNotFound,
			[]string{"setns:" + stopped, "not running"}},
		{"setns: no such container", setns.Options{Container: missing, Runtime: setns.LXC}, spindle.ErrNotFound,
			[]string{"setns:" + missing, "no such container", "lxc-ls -f"}},
	})
}

// The kubectl, lxd and machinectl hops run through stand-ins for their
// tools (internal/testkit/standin): programs that take the argv the real
// tool takes, refuse what it refuses in its words, and run the command
// part on this machine, so that the connector's whole start-up (its argv,
// the first stage, the agent upload, the hello, commands) runs for real
// and its error reports meet the real tools' messages.

// TestContainerKubectlStandIn: kubectl exec -i into pods, by name and
// with namespace, container and kube context; kubectl's failures.
func TestContainerKubectlStandIn(t *testing.T) {
	t.Parallel()
	world := standin.World{Tool: standin.Kubectl, Contexts: []string{"kind-a"}, Objects: map[string]standin.Object{
		"default/web-0":    {State: "Running", Containers: []string{"app", "sidecar"}},
		"prod/db-0":        {State: "Running", Containers: []string{"db"}},
		"default/job-1":    {State: "Succeeded", Containers: []string{"job"}},
		"default/starting": {State: "Pending", Containers: []string{"app"}},
	}}
	k := standin.Install(t, world)
	world.Down = true
	down := standin.Install(t, world)
	_, parent := mustConnect(t, nil, local.Options{})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()

	web, err := parent.Connect(ctx, kubectl.Options{Pod: "web-0", KubectlPath: k})
	if err != nil {
		t.Fatal(err)
	}
	if want := "local → kubectl:web-0"; web.Name() != want {
		t.Fatalf("child name %q, want %q", web.Name(), want)
	}
	// The pod's environment, as the stand-in's exec gives it.
	if got := run(t, web, "sh", "-c", "echo $HOSTNAME"); got != "web-0\n" {
		t.Errorf("HOSTNAME in the pod: %q", got)
	}
	db, err := parent.Connect(ctx, kubectl.Options{Pod: "db-0", Namespace: "prod", Container: "db", KubeContext: "kind-a", KubectlPath: k})
	if err != nil {
		t.Fatal(err)
	}
	if want := "local → kubectl:prod/db-0:db"; db.Name() != want {
		t.Fatalf("child name %q, want %q", db.Name(), want)
	}
	if got := run(t, db, "sh", "-c", "echo $HOSTNAME"); got != "db-0\n" {
		t.Errorf("HOSTNAME in the pod: %q", got)
	}
	pid := db.Hello().PID
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	<-db.Done()
	waitGone(t, pid)

	checkErrors(ctx, t, parent, []errCase{
		{"no such pod", kubectl.Options{Pod: "nope", KubectlPath: k}, spindle.ErrNotFound,
			[]string{"local → kubectl:nope", "no such container", `no pod "nope"`, "kubectl get pods", `pods \"nope\" not found`}},
		{"the pod in another namespace", kubectl.Options{Pod: "db-0", KubectlPath: k}, spindle.ErrNotFound,
			[]string{"kubectl:db-0", `no pod "db-0"`}},
		{"no such container", kubectl.Options{Pod: "web-0", Container: "nope", KubectlPath: k}, spindle.ErrNotFound,
			[]string{"kubectl:web-0:nope", `pod "web-0" has no container "nope"`, "is not valid for pod web-0 out of: app, sidecar"}},
		{"a completed pod", kubectl.Options{Pod: "job-1", KubectlPath: k}, spindle.ErrNotFound,
			[]string{"kubectl:job-1", "not running", "kubectl describe pod job-1", "completed pod"}},
		{"a pending pod", kubectl.Options{Pod: "starting", KubectlPath: k}, spindle.ErrNotFound,
			[]string{"kubectl:starting", "not running", "kubectl describe pod starting", "container not found"}},
		{"no such kube context", kubectl.Options{Pod: "web-0", KubeContext: "nope", KubectlPath: k}, spindle.ErrRemote,
			[]string{"kubectl:web-0", "not reachable", "current-context", "context was not found"}},
		{"no API server", kubectl.Options{Pod: "web-0", KubectlPath: down}, spindle.ErrRemote,
			[]string{"kubectl:web-0", "not reachable", "the connection to the server localhost:8080 was refused"}},
		{"kubectl not installed", kubectl.Options{Pod: "web-0", KubectlPath: "/nonexistent/kubectl"}, spindle.ErrNotFound,
			[]string{"kubectl:web-0", "not installed", "/nonexistent/kubectl does not exist", "KubectlPath"}},
	})
}

// TestContainerLXDStandIn: lxc exec into LXD instances, as root, as
// uid:gid and in a project; the LXD client's failures.
func TestContainerLXDStandIn(t *testing.T) {
	t.Parallel()
	containertest.NeedRoot(t, "the stand-in switches to the hop's uid:gid")
	world := standin.World{Tool: standin.LXD, Objects: map[string]standin.Object{
		"default/c1": {State: "Running"}, "dev/c2": {State: "Running"},
		"default/c3": {State: "Stopped"}, "default/c4": {State: "Frozen"},
	}}
	l := standin.Install(t, world)
	world.Down = true
	down := standin.Install(t, world)
	_, parent := mustConnect(t, nil, local.Options{})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()

	root, err := parent.Connect(ctx, lxd.Options{Container: "c1", LXCPath: l})
	if err != nil {
		t.Fatal(err)
	}
	if want := "local → lxd:c1"; root.Name() != want {
		t.Fatalf("child name %q, want %q", root.Name(), want)
	}
	if got := run(t, root, "sh", "-c", `echo "$(id -u) $USER $HOME $LANG"`); got != "0 root /root C.UTF-8\n" {
		t.Errorf("in the instance as root: %q", got)
	}
	nobody, err := parent.Connect(ctx, lxd.Options{Container: "c1", User: "65534:65534", LXCPath: l})
	if err != nil {
		t.Fatal(err)
	}
	if want := "local → lxd:65534:65534@c1"; nobody.Name() != want {
		t.Fatalf("child name %q, want %q", nobody.Name(), want)
	}
	if got := run(t, nobody, "sh", "-c", `echo "$(id -u) $(id -G)"`); got != "65534 65534\n" {
		t.Errorf("in the instance as 65534:65534: %q", got)
	}
	inProject, err := parent.Connect(ctx, lxd.Options{Container: "c2", Project: "dev", LXCPath: l})
	if err != nil {
		t.Fatal(err)
	}
	pid := inProject.Hello().PID
	if err := inProject.Close(); err != nil {
		t.Fatal(err)
	}
	<-inProject.Done()
	waitGone(t, pid)

	checkErrors(ctx, t, parent, []errCase{
		{"no such instance", lxd.Options{Container: "nope", LXCPath: l}, spindle.ErrNotFound,
			[]string{"local → lxd:nope", "no such container", `LXD knows no instance "nope"`, "lxc list", "Instance not found"}},
		{"the instance in another project", lxd.Options{Container: "c2", LXCPath: l}, spindle.ErrNotFound,
			[]string{"lxd:c2", "no such container"}},
		{"a stopped instance", lxd.Options{Container: "c3", LXCPath: l}, spindle.ErrNotFound,
			[]string{"lxd:c3", "not running", "lxc start c3", "Instance is not running"}},
		{"a frozen instance", lxd.Options{Container: "c4", LXCPath: l}, spindle.ErrNotFound,
			[]string{"lxd:c4", "not running", "lxc start c4", "Instance is frozen"}},
		{"no LXD daemon", lxd.Options{Container: "c1", LXCPath: down}, spindle.ErrRemote,
			[]string{"lxd:c1", "not reachable", "start LXD", "Please check LXD is running"}},
		{"a user name", lxd.Options{Container: "c1", User: "app", LXCPath: l}, spindle.ErrBadArgs,
			[]string{"lxd:app@c1", "numeric"}},
		{"lxc not installed", lxd.Options{Container: "c1", LXCPath: "/nonexistent/lxc"}, spindle.ErrNotFound,
			[]string{"lxd:c1", "not installed", "/nonexistent/lxc does not exist", "LXCPath"}},
	})
}

// TestContainerMachinectlStandIn: systemd-run --machine --pipe into a
// machine, as root and as a user; systemd-run's failures, one of them
// from the real systemd-run.
func TestContainerMachinectlStandIn(t *testing.T) {
	t.Parallel()
	containertest.NeedRoot(t, "the stand-in switches to the hop's user")
	s := standin.Install(t, standin.World{Tool: standin.SystemdRun, Objects: map[string]standin.Object{"m1": {State: "running"}}})
	_, parent := mustConnect(t, nil, local.Options{})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()

	root, err := parent.Connect(ctx, machinectl.Options{Machine: "m1", SystemdRunPath: s})
	if err != nil {
		t.Fatal(err)
	}
	if want := "local → machinectl:m1"; root.Name() != want {
		t.Fatalf("child name %q, want %q", root.Name(), want)
	}
	// A transient service's environment: the stage got there with its
	// dollars intact through systemd's expansion.
	if got := run(t, root, "sh", "-c", `echo "$(id -u) ${#INVOCATION_ID}"`); got != "0 32\n" {
		t.Errorf("in the machine as root: %q", got)
	}
	nobody, err := parent.Connect(ctx, machinectl.Options{Machine: "m1", User: "nobody", SystemdRunPath: s})
	if err != nil {
		t.Fatal(err)
	}
	if want := "local → machinectl:nobody@m1"; nobody.Name() != want {
		t.Fatalf("child name %q, want %q", nobody.Name(), want)
	}
	if got := run(t, nobody, "sh", "-c", `echo "$(id -u) $USER $HOME"`); got != "65534 nobody /nonexistent\n" {
		t.Errorf("in the machine as nobody: %q", got)
	}
	pid := nobody.Hello().PID
	if err := nobody.Close(); err != nil {
		t.Fatal(err)
	}
	<-nobody.Done()
	waitGone(t, pid)

	missing := randomName("spt-missing-")
	cases := []errCase{
		{"no such machine", machinectl.Options{Machine: missing, SystemdRunPath: s}, spindle.ErrNotFound,
			[]string{"local → machinectl:" + missing, "no such container", "machinectl list", "Host is down"}},
		{"no such user", machinectl.Options{Machine: "m1", User: "spindle-no-such-user", SystemdRunPath: s}, spindle.ErrNotFound,
			[]string{"machinectl:spindle-no-such-user@m1", "no such user", "spindle-no-such-user", "journalctl -M m1"}},
		{"systemd-run not installed", machinectl.Options{Machine: "m1", SystemdRunPath: "/nonexistent/systemd-run"}, spindle.ErrNotFound,
			[]string{"machinectl:m1", "not installed", "/nonexistent/systemd-run does not exist", "SystemdRunPath"}},
	}
	checkErrors(ctx, t, parent, cases)
	// The real systemd-run answers for a machine machined does not run
	// without machined, or systemd, running.
	_, err = osexec.LookPath("systemd-run")
	testkit.Need(t, err == nil, "systemd-run is not installed (scripts/test-deps.sh installs systemd)")
	checkErrors(ctx, t, parent, []errCase{
		{"no such machine (the real systemd-run)", machinectl.Options{Machine: missing}, spindle.ErrNotFound,
			[]string{"local → machinectl:" + missing, "no such container", "machinectl list", "Host is down"}},
	})
}

// spindle cp -r --to docker:A --to docker:B: one tree into two containers'
// own filesystems (busybox only), each copy whole, through the CLI.
func TestCLICpToContainers(t *testing.T) {
	t.Parallel()
	a, b := containertest.Run(t), containertest.Run(t)
	bin := buildCLI(t)
	tree := filepath.Join(t.TempDir(), "conf")
	os.MkdirAll(filepath.Join(tree, "sub"), 0o755)
	os.WriteFile(filepath.Join(tree, "app.conf"), []byte("listen 80\n"), 0o644)
	os.WriteFile(filepath.Join(tree, "sub", "extra.conf"), []byte("workers 4\n"), 0o600)
	out, errs, code := cli(t, bin, "cp", "-r", "-p", "--to", "docker:"+a.Name, "--to", "docker:"+b.Name, tree, "/tmp/")
	if code != 0 {
		t.Fatalf("cp -r --to two containers: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	for _, c := range []containertest.Container{a, b} {
		got, err := osexec.Command("docker", "exec", c.Name, "sh", "-c",
			"cat /tmp/conf/app.conf /tmp/conf/sub/extra.conf; stat -c %a /tmp/conf/sub/extra.conf").CombinedOutput()
		if want := "listen 80\nworkers 4\n600\n"; err != nil || string(got) != want {
			t.Errorf("in %s: %q, %v; want %q", c.Name, got, err, want)
		}
	}
}
