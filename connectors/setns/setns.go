// Package setns starts an agent inside a running container without the
// container tool's exec: the parent agent (root on the container's host)
// joins the container's namespaces itself, like nsenter(1), and starts the
// first stage there with the container's own sh. The agent binary travels
// over the child's stdin from the parent's RAM, as for every hop.
//
// How, in pure Go (CGO_ENABLED=0): a Go process is multi-threaded, and
// setns(2) refuses to move a multi-threaded process into another mount or
// user namespace. The others are per thread. Start locks a goroutine to
// its OS thread, setns(2)es that thread into the container's ipc, uts,
// net, pid and cgroup namespaces, and starts the child from it: os/exec
// forks on the calling thread, so the child is born in those namespaces
// (in the container's pid namespace, as a new pid there). For the mount
// namespace the child chroots into the container's root
// (/proc/PID/root, through a descriptor opened beforehand) and starts in
// "/": it sees the container's filesystem, mounts included (its /proc is
// the container's). The thread is never unlocked: when the goroutine
// returns, the runtime ends the thread instead of reusing a thread that
// lives in the container's namespaces.
//
// What differs from `docker exec`: the child stays in the agent's cgroups
// (cgroup limits of the container do not apply), in the host's mount
// namespace (chrooted; /proc/self/mountinfo shows the host's view), keeps
// root's full capabilities (no seccomp, AppArmor or capability drop), and
// containers with their own user namespace (rootless podman, unprivileged
// LXC/LXD) are refused: joining a user namespace needs a single-threaded
// process. It needs root on the host, and it runs the container's /bin/sh
// with host root's powers: use it for containers you trust, when the tool
// is missing or too slow, or for containers no tool can exec into.
//
// The container is named by PID (any process in it, usually its leader),
// or by Container, whose leader PID the Runtime reports (`docker inspect
// -f {{.State.Pid}}`, `podman inspect`, `lxc-info -p -H`).
package setns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/lazyre"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
	"golang.org/x/sys/unix"
)

// Runtimes that can report a container's leader PID.
const (
	Docker = "docker"
	Podman = "podman"
	LXC    = "lxc"
)

// DefaultPath is the child's PATH when the container's leader has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Options configures a setns hop. It is msgpack-encoded by the controller
// and decoded by the agent that enters the container (root on its host).
type Options struct {
	// PID is a process in the container, in the agent's pid namespace.
	// Exactly one of PID and Container is set.
	PID int `msgpack:"pid,omitempty"`
	// Container is a container's name or id; Runtime reports its leader
	// PID.
	Container string `msgpack:"container,omitempty"`
	// Runtime is Docker (the default), Podman or LXC.
	Runtime string `msgpack:"runtime,omitempty"`
	// RuntimePath is the runtime's program for the PID look-up; default
	// "docker", "podman" or "lxc-info" on the PATH.
	RuntimePath string `msgpack:"runtime_path,omitempty"`
	// User runs the agent as this user of the container: a name from the
	// container's /etc/passwd, a uid, or uid:gid. Default root (uid 0 with
	// the container's groups for root).
	User string `msgpack:"user,omitempty"`
	// Timeout bounds the start; default container.DefaultTimeout.
	Timeout time.Duration `msgpack:"timeout,omitempty"`
	// ContextName overrides the context's name (default "setns:NAME" or
	// "setns:PID", "setns:USER@…" with a User).
	ContextName string `msgpack:"context_name,omitempty"`
}

func init() {
	connectors.Register("setns", func() connectors.Remote { return &Options{} })
}

// Kind implements connectors.Remote.
func (o Options) Kind() string { return "setns" }

// Name implements connectors.Connector.
func (o Options) Name() string {
	if o.ContextName != "" {
		return o.ContextName
	}
	target := o.Container
	if target == "" {
		target = strconv.Itoa(o.PID)
	}
	if o.User != "" {
		return "setns:" + o.User + "@" + target
	}
	return "setns:" + target
}

func (o Options) runtime() string {
	if o.Runtime == "" {
		return Docker
	}
	return o.Runtime
}

func (o Options) tool() (container.Tool, error) {
	switch o.runtime() {
	case Docker:
		return container.Tool{Name: "docker", Path: o.RuntimePath, Option: "RuntimePath",
			Install: "Docker (the docker.io package on Debian and Ubuntu, or Docker CE)"}, nil
	case Podman:
		return container.Tool{Name: "podman", Path: o.RuntimePath, Option: "RuntimePath", Install: "the podman package"}, nil
	case LXC:
		return container.Tool{Name: "lxc-info", Path: o.RuntimePath, Option: "RuntimePath", Install: "the lxc package"}, nil
	}
	return container.Tool{}, errkind.Errorf(errkind.ErrBadArgs, "setns: Runtime %q: want %q, %q or %q", o.Runtime, Docker, Podman, LXC)
}

// InspectArgv is the command that asks Runtime for Container's leader
// PID (printed alone on stdout). argv[0] is RuntimePath or the runtime's
// program. It is empty for an unknown Runtime.
func (o Options) InspectArgv() []string {
	t, err := o.tool()
	if err != nil {
		return nil
	}
	prog := t.Name
	if o.RuntimePath != "" {
		prog = o.RuntimePath
	}
	switch o.runtime() {
	case LXC:
		return []string{prog, "-n", o.Container, "-p", "-H"}
	default: // docker, podman
		return []string{prog, "inspect", "--type=container", "--format={{.State.Pid}}", o.Container}
	}
}

func (o Options) inspectRules() []container.Rule {
	n, list := o.Container, o.runtime()+" ps -a"
	if o.runtime() == LXC {
		list = "lxc-ls -f"
	}
	return []container.Rule{
		{Match: lazyre.New(`(?i)no such (container|object)|no container with name or id|doesn't exist|does not exist|is not defined`), Err: container.ErrNoContainer,
			Hint: fmt.Sprintf("%s knows no container %q: check the name with `%s`", o.runtime(), n, list)},
		{Match: lazyre.New(`(?i)cannot connect to the docker daemon|is the docker daemon running|cannot connect to podman`), Err: container.ErrNoDaemon,
			Hint: "start the container engine"},
	}
}

// leader returns the PID of the process whose namespaces to join.
func (o Options) leader(ctx context.Context) (int, error) {
	if (o.PID > 0) == (o.Container != "") {
		return 0, errkind.Errorf(errkind.ErrBadArgs, "setns: set exactly one of PID and Container")
	}
	if o.PID > 0 {
		return o.PID, nil
	}
	if err := container.CheckName("setns", "Container", o.Container); err != nil {
		return 0, err
	}
	t, err := o.tool()
	if err != nil {
		return 0, err
	}
	out, err := t.Output(ctx, o.inspectRules(), o.InspectArgv()[1:]...)
	if err != nil {
		return 0, fmt.Errorf("setns: find the container's leader: %w", err)
	}
	if out == "" || out == "0" {
		// docker and podman report 0, lxc-info nothing, for a stopped
		// container.
		return 0, fmt.Errorf("setns: %w: container %q has no running process: start it first", container.ErrNotRunning, o.Container)
	}
	pid, err := strconv.Atoi(out)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("setns: %s printed %q, not a PID", strings.Join(o.InspectArgv(), " "), out)
	}
	return pid, nil
}

// namespaces joined by the starting thread, in this order (pid and cgroup
// affect only the children; net, uts, ipc the thread itself).
var namespaces = []struct {
	name string
	flag int
}{
	{"ipc", unix.CLONE_NEWIPC},
	{"uts", unix.CLONE_NEWUTS},
	{"net", unix.CLONE_NEWNET},
	{"pid", unix.CLONE_NEWPID},
	{"cgroup", unix.CLONE_NEWCGROUP},
}

// target is an opened container: its namespaces and root, held by
// descriptors so that a recycled PID cannot swap them.
type target struct {
	pid  int
	ns   []nsFile
	root *os.File // O_PATH of /proc/PID/root
}

type nsFile struct {
	name string
	flag int
	f    *os.File
}

func (t *target) Close() {
	for _, n := range t.ns {
		n.f.Close()
	}
	if t.root != nil {
		t.root.Close()
	}
}

// open opens pid's namespaces and root, checking that pid still runs
// once they are open (a pidfd, where the kernel has them, pins it).
func open(pid int) (*target, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	havePidfd := err == nil
	switch {
	case havePidfd:
		defer unix.Close(pidfd)
	case errors.Is(err, unix.ESRCH):
		return nil, fmt.Errorf("setns: %w: no process %d", container.ErrNotRunning, pid)
	case !errors.Is(err, unix.ENOSYS): // kernels before 5.3 have none
		return nil, fmt.Errorf("setns: pidfd_open %d: %w", pid, err)
	}
	if same, err := sameNS(pid, "user"); err != nil {
		return nil, err
	} else if !same {
		return nil, fmt.Errorf("setns: process %d is in a user namespace of its own (rootless podman, unprivileged LXC or LXD): "+
			"a multi-threaded Go agent cannot join it; use the container tool's connector (podman, lxc, lxd) instead", pid)
	}
	t := &target{pid: pid}
	for _, n := range namespaces {
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/%s", pid, n.name))
		if errors.Is(err, fs.ErrNotExist) && n.name == "cgroup" {
			continue // kernels before 4.6
		}
		if err != nil {
			t.Close()
			return nil, nsErr(pid, err)
		}
		t.ns = append(t.ns, nsFile{n.name, n.flag, f})
	}
	root, err := os.OpenFile(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Close()
		return nil, nsErr(pid, err)
	}
	t.root = root
	// Still the same process: what was opened is its (a PID is reused
	// only after the process is reaped, which the pidfd would show).
	if havePidfd {
		if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
			t.Close()
			return nil, fmt.Errorf("setns: %w: process %d exited while its namespaces were opened", container.ErrNotRunning, pid)
		}
	}
	return t, nil
}

func nsErr(pid int, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("setns: %w: no process %d", container.ErrNotRunning, pid)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("setns: %w: entering process %d's namespaces needs root on its host (connect a sudo hop first): %v", container.ErrPermission, pid, err)
	}
	return fmt.Errorf("setns: %w", err)
}

// sameNS reports whether pid is in our namespace of that kind.
func sameNS(pid int, kind string) (bool, error) {
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nsErr(pid, err)
		}
		if errors.Is(err, fs.ErrPermission) {
			return false, nsErr(pid, err)
		}
		return false, fmt.Errorf("setns: %w", err)
	}
	ours, err := os.Readlink("/proc/self/ns/" + kind)
	if err != nil {
		return false, fmt.Errorf("setns: %w", err)
	}
	return theirs == ours, nil
}

// launch starts cmd from a thread that has joined t's namespaces.
func (t *target) launch(cmd *exec.Cmd) error {
	var err error
	onDisposableThread(func() {
		for _, n := range t.ns {
			if e := unix.Setns(int(n.f.Fd()), n.flag); e != nil {
				if errors.Is(e, unix.EPERM) {
					err = fmt.Errorf("%w: setns(%s) of process %d: %v: needs root (CAP_SYS_ADMIN) on the container's host",
						container.ErrPermission, n.name, t.pid, e)
					return
				}
				err = fmt.Errorf("setns(%s) of process %d: %w", n.name, t.pid, e)
				return
			}
		}
		err = cmd.Start()
	})
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: the container has no /bin/sh: %v", container.ErrNoShell, err)
	}
	return err
}

// onDisposableThread runs f on an OS thread of its own that ends when f
// returns, and returns then: f may leave the thread in a state no other
// goroutine must inherit (another thread's namespaces).
//
// The goroutine running f locks its thread and never unlocks it: when a
// locked goroutine exits, the runtime ends its thread instead of reusing
// it. Except the main thread, which the runtime never ends (it parks it
// for good, "wedged"): a tainted main thread would change what the whole
// process shows in /proc/PID/ns/* and /proc/self/net. So when the locked
// goroutine finds itself on the main thread, it keeps that thread locked,
// untainted, and runs f in a second locked goroutine, which therefore
// gets another thread. (Threads the runtime creates meanwhile come from
// its template thread, never from a locked one.)
func onDisposableThread(f func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			defer close(done)
			f() // no UnlockOSThread, on purpose
			return
		}
		defer runtime.UnlockOSThread() // the main thread, untouched
		mainThreadDetours.Add(1)
		go func() {
			defer close(done)
			runtime.LockOSThread()
			f() // no UnlockOSThread, on purpose
		}()
		<-done
	}()
	<-done
}

// mainThreadDetours counts the starts that found themselves on the main
// thread (for tests).
var mainThreadDetours atomic.Int64

// user is who the agent runs as in the container.
type user struct {
	uid, gid uint32
	groups   []uint32
	name     string
	home     string
}

// lookupUser resolves spec ("", a name, a uid, or uid:gid) in the
// container's /etc/passwd and /etc/group, read through root.
func lookupUser(root *os.File, spec string) (user, error) {
	if spec == "" {
		spec = "0"
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	passwd, perr := readInRoot(root, "etc/passwd")
	u := user{home: "/"}
	found := false
	if perr == nil {
		for _, line := range strings.Split(string(passwd), "\n") {
			f := strings.Split(line, ":")
			if len(f) < 7 || strings.HasPrefix(line, "#") {
				continue
			}
			if f[0] != name && f[2] != name {
				continue
			}
			uid, err1 := strconv.ParseUint(f[2], 10, 32)
			gid, err2 := strconv.ParseUint(f[3], 10, 32)
			if err1 != nil || err2 != nil {
				continue
			}
			u.uid, u.gid, u.name, u.home, found = uint32(uid), uint32(gid), f[0], f[5], true
			break
		}
	}
	if !found {
		uid, err := strconv.ParseUint(name, 10, 32)
		if err != nil {
			why := "not in its /etc/passwd"
			if perr != nil {
				why = fmt.Sprintf("and its /etc/passwd cannot be read (%v)", perr)
			}
			return user{}, fmt.Errorf("%w: %q is %s: give an existing user, or a numeric uid", container.ErrNoSuchUser, name, why)
		}
		// A uid without an entry runs with gid 0, as docker exec -u does.
		u.uid, u.gid = uint32(uid), 0
	}
	if hasGroup {
		gid, err := strconv.ParseUint(group, 10, 32)
		if err != nil {
			return user{}, errkind.Errorf(errkind.ErrBadArgs, "setns: User %q: the group must be a numeric gid", spec)
		}
		u.gid = uint32(gid)
	}
	u.groups = []uint32{u.gid}
	if u.name != "" {
		if data, err := readInRoot(root, "etc/group"); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				f := strings.Split(line, ":")
				if len(f) < 4 {
					continue
				}
				gid, err := strconv.ParseUint(f[2], 10, 32)
				if err != nil || uint32(gid) == u.gid {
					continue
				}
				for _, m := range strings.Split(f[3], ",") {
					if m == u.name {
						u.groups = append(u.groups, uint32(gid))
					}
				}
			}
		}
	}
	return u, nil
}

// readInRoot reads a small file of the container, resolving symlinks
// inside its root (an absolute link in the container must not lead to the
// host's file).
func readInRoot(root *os.File, path string) ([]byte, error) {
	fd, err := unix.Openat2(int(root.Fd()), path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		// Kernels before 5.6: no symlinks at all then.
		fd, err = unix.Openat(int(root.Fd()), path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: "/" + path, Err: err}
	}
	f := os.NewFile(uintptr(fd), "/"+path)
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4<<20))
}

// environPath is PATH from the environment of process pid, or DefaultPath.
func environPath(pid int) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return DefaultPath
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	sc.Buffer(make([]byte, 4096), 1<<20)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		for i, b := range data {
			if b == 0 {
				return i + 1, data[:i], nil
			}
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "PATH="); ok && p != "" {
			return p
		}
	}
	return DefaultPath
}

// command is the child of one attempt: the container's /bin/sh -c
// script, chrooted into the container's root, as u, with env. The
// namespaces are joined by the launch.
func command(rootFd uintptr, u user, env []string, script string) *exec.Cmd {
	return &exec.Cmd{
		// No LookPath: the path is resolved by execve after the chroot,
		// in the container's filesystem.
		Path: "/bin/sh",
		Args: []string{"sh", "-c", script},
		Dir:  "/",
		Env:  env,
		SysProcAttr: &syscall.SysProcAttr{
			// Through the descriptor, which the child still holds
			// (close-on-exec only acts at its execve).
			Chroot:     fmt.Sprintf("/proc/self/fd/%d", rootFd),
			Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups},
		},
	}
}

// childEnv is the child's environment: the container leader's PATH, and the
// user's HOME, USER and LOGNAME.
func childEnv(pid int, u user) []string {
	env := []string{"PATH=" + environPath(pid), "HOME=" + u.home}
	if u.name != "" {
		env = append(env, "USER="+u.name, "LOGNAME="+u.name)
	}
	return env
}

// Start implements connectors.Connector.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	if req.Name == "" {
		req.Name = o.Name()
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("setns: %w: entering a container's namespaces needs root on its host: connect a sudo hop first (…,sudo,setns:…)", container.ErrPermission)
	}
	pid, err := o.leader(ctx)
	if err != nil {
		return nil, err
	}
	t, err := open(pid)
	if err != nil {
		return nil, err
	}
	defer t.Close() // the child holds what it needs after its start
	u, err := lookupUser(t.root, o.User)
	if err != nil {
		return nil, fmt.Errorf("setns: %w", err)
	}
	env := childEnv(pid, u)
	return container.Start(ctx, req, container.Hop{
		Tool: "setns",
		Command: func(script string) (*exec.Cmd, error) {
			return command(t.root.Fd(), u, env, script), nil
		},
		Launch:  t.launch,
		Rules:   container.ShellRules(o.User),
		Timeout: o.Timeout,
	})
}

var (
	_ connectors.Remote = Options{}
	_ connectors.Remote = (*Options)(nil)
)
