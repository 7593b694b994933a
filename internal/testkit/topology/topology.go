// Package topology builds a small multi-host network on this machine for
// end-to-end tests, out of Linux network namespaces and real OpenSSH
// servers:
//
//	root namespace (the controller)
//	  └─ veth ── netns "bastion"  (sshd on 10.77.N.2:22)
//	               └─ veth ── netns "web"  (sshd on 10.77.N.6:22)
//
// Each topology owns the subnet 10.77.N.0/24, N being an index from 0 to
// 255 that is unique among the live topologies on the machine (a flock on
// /run/spindle-topology/N.lock is held while the topology lives):
//
//	10.77.N.1/30  root namespace, interface sptopoN-ctl (the controller)
//	10.77.N.2/30  bastion, interface "ctl"      — bastion's sshd listens here
//	10.77.N.5/30  bastion, interface "web"
//	10.77.N.6/30  web, interface "bastion"      — web's sshd listens here
//
// The root namespace has no route to web. Without one, a packet for
// 10.77.N.6 would follow the machine's default route out of the machine,
// so New adds an "unreachable 10.77.N.0/24" route to the root namespace:
// a connection from the controller to web fails at once with "no route to
// host" and no packet leaves the machine (10.77.N.0/30, the bastion link,
// is more specific and still reaches bastion). Neither namespace has a
// default route, and forwarding is turned off in both, so bastion does not
// route between the controller and web either.
//
// Traffic between the root namespace and bastion is delivered locally
// (INPUT/OUTPUT), never forwarded, and bastion↔web traffic does not cross
// the root namespace at all: Docker's FORWARD policy DROP does not matter.
//
// Namespaces share the filesystem and /etc/passwd with the root namespace:
// the test users are ordinary users of the machine, and the sshd processes
// read their configuration from temporary directories in /tmp.
//
// A run that was killed (SIGKILL, test timeout) leaves its namespaces,
// sshd processes, users and route behind; the next New in any process
// removes them, having checked with the index's lock that their owner is
// gone.
//
// New needs root, iproute2 (ip), /usr/sbin/sshd and the user tools: without
// them the test is skipped with a loud message, or fails when CI=true.
package topology

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit"

	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	"golang.org/x/sys/unix"
)

const (
	// Prefix starts the names of everything a topology creates in the
	// root namespace: network namespaces "sptopoN-bastion" and
	// "sptopoN-web", and the veth "sptopoN-ctl".
	Prefix = "sptopo"
	// StateDir holds the per-index lock and state files.
	StateDir = "/run/spindle-topology"
	// SSHPort is the port both sshd instances listen on, each in its own
	// namespace.
	SSHPort = 22
	// maxIndex is the number of topologies that can exist at once.
	maxIndex = 256
)

// Host is one machine of the topology: a network namespace with a sshd.
type Host struct {
	// Role is "bastion" or "web".
	Role string
	// Netns is the network namespace name (for `ip netns exec`).
	Netns string
	// Addr is the IPv4 address sshd listens on, e.g. "10.77.3.2".
	Addr string
	// Port is sshd's port (SSHPort).
	Port int
	// User is the test user who may log in to this host (and only to
	// this host) with the topology's client key. User.Name and User.Home
	// are its name and home directory. The user exists on the whole
	// machine: namespaces share /etc/passwd.
	User *sshtest.User
	// KnownHostsLine is this host's host key as a known_hosts line for
	// Addr:Port ("10.77.3.2 ssh-ed25519 AAAA…"; port 22 is not written).
	KnownHostsLine string
	// Server is the running sshd: Server.Log() is its log, Server.Dir
	// its configuration, host key and authorized_keys directory.
	Server *sshtest.Server
}

// HostPort is "Addr:Port".
func (h *Host) HostPort() string { return net.JoinHostPort(h.Addr, strconv.Itoa(h.Port)) }

// Target is "user@Addr", for ssh.
func (h *Host) Target() string { return h.User.Name + "@" + h.Addr }

// AuthorizedKeys is the authorized_keys file that sshd reads for h.User
// (it lives in Server.Dir, not in the user's home).
func (h *Host) AuthorizedKeys() string {
	return filepath.Join(h.Server.Dir, "authorized_keys", h.User.Name)
}

// Topology is a controller (the root namespace), a bastion reachable from
// it, and a web host reachable only from the bastion.
type Topology struct {
	// Index is N: the topology uses 10.77.N.0/24 and names
	// "sptopoN-…".
	Index int
	// Subnet is "10.77.N.0/24".
	Subnet string
	// ControllerAddr is the root namespace's address on the link to
	// bastion (10.77.N.1): connections from the controller to bastion
	// come from it.
	ControllerAddr string
	// ControllerIface is the root namespace's end of that link.
	ControllerIface string
	// BastionWebAddr is bastion's address on the link to web
	// (10.77.N.5): connections from bastion to web come from it.
	BastionWebAddr string

	Bastion Host
	Web     Host

	// Key is the one client key authorized for both users. The private
	// key (Key.Path) lives in a controller-side temporary directory,
	// outside both users' homes.
	Key *sshtest.Key
	// KnownHosts is a controller-side known_hosts file holding both
	// hosts' keys (Bastion.KnownHostsLine and Web.KnownHostsLine).
	KnownHosts string

	lock  *os.File
	state state
}

// state is what StateDir/N.json records, for the clean-up after a crash.
type state struct {
	PID   int      `json:"pid"`
	Users []string `json:"users,omitempty"`
	Dirs  []string `json:"dirs,omitempty"`
}

// Need skips t loudly, or fails it when CI=true, unless ok.
func Need(t testing.TB, ok bool, why string) {
	t.Helper()
	testkit.Need(t, ok, why)
}

// Require skips t (fails it when CI=true) unless New can run here.
func Require(t testing.TB) {
	t.Helper()
	Need(t, os.Geteuid() == 0, "topology tests create network namespaces, users and sshd servers: they must run as root")
	sshtest.Require(t)
	_, err := exec.LookPath("ip")
	Need(t, err == nil, "ip (package iproute2) is not installed: run scripts/test-deps.sh")
	_, err = os.Stat("/proc/self/ns/net")
	Need(t, err == nil, "this kernel has no network namespaces (/proc/self/ns/net)")
}

var sweepOnce sync.Once

// New builds a fresh topology for t and tears it down when t ends.
func New(t testing.TB) *Topology {
	t.Helper()
	Require(t)
	start := time.Now()
	sweepOnce.Do(func() { Sweep(t) })

	tp := claim(t)
	t.Cleanup(tp.release)
	t.Cleanup(func() {
		if err := teardown(tp.Index); err != nil {
			t.Errorf("topology: tear down %d: %v", tp.Index, err)
		}
	})
	tp.buildNetwork(t)

	tp.Key = sshtest.ClientKey(t)
	tp.record(t, "", filepath.Dir(tp.Key.Path))
	tp.Bastion = tp.host(t, "bastion", tp.Bastion.Netns, tp.Bastion.Addr, nil)
	// The controller cannot reach web: probe its sshd from bastion.
	tp.Web = tp.host(t, "web", tp.Web.Netns, tp.Web.Addr, func(addr string) error {
		c, err := tp.Dial(tp.Bastion.Netns, addr, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})

	dir := sshtest.TempDir(t, Prefix+"-kh-")
	tp.record(t, "", dir)
	tp.KnownHosts = filepath.Join(dir, "known_hosts")
	kh := tp.Bastion.KnownHostsLine + "\n" + tp.Web.KnownHostsLine + "\n"
	if err := os.WriteFile(tp.KnownHosts, []byte(kh), 0o644); err != nil {
		t.Fatalf("topology: %v", err)
	}
	t.Logf("topology %d: controller %s, bastion %s (%s, user %s), web %s (%s, user %s): built in %v",
		tp.Index, tp.ControllerAddr, tp.Bastion.HostPort(), tp.Bastion.Netns, tp.Bastion.User.Name,
		tp.Web.HostPort(), tp.Web.Netns, tp.Web.User.Name, time.Since(start).Round(time.Millisecond))
	return tp
}

// host starts a sshd in netns and creates its user.
func (tp *Topology) host(t testing.TB, role, netns, addr string, probe func(string) error) Host {
	t.Helper()
	srv := sshtest.StartWith(t, sshtest.Options{
		ListenAddress: addr,
		Port:          SSHPort,
		Prefix:        []string{"ip", "netns", "exec", netns},
		Probe:         probe,
	})
	tp.record(t, "", srv.Dir)
	u := sshtest.CreateUser(t, "/bin/bash")
	tp.record(t, u.Name, "")
	srv.Authorize(t, u, tp.Key)
	return Host{Role: role, Netns: netns, Addr: addr, Port: SSHPort, User: u,
		KnownHostsLine: srv.HostKeyLine(t), Server: srv}
}

// names are the root-namespace names of topology n.
func names(n int) (bastionNS, webNS, ctlIface string) {
	p := Prefix + strconv.Itoa(n)
	return p + "-bastion", p + "-web", p + "-ctl"
}

func subnet(n int) string { return fmt.Sprintf("10.77.%d.0/24", n) }

func addr(n, host int) string { return fmt.Sprintf("10.77.%d.%d", n, host) }

// claim locks a free index, clears what a crashed owner left under it and
// returns the topology's skeleton.
func claim(t testing.TB) *Topology {
	t.Helper()
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		t.Fatalf("topology: %v", err)
	}
	first := rand.IntN(maxIndex)
	for i := 0; i < maxIndex; i++ {
		n := (first + i) % maxIndex
		f, ok, err := tryLock(n)
		if err != nil {
			t.Fatalf("topology: %v", err)
		}
		if !ok {
			continue
		}
		if err := teardown(n); err != nil {
			f.Close()
			t.Logf("topology: index %d: clearing a previous run's leftovers: %v (trying another index)", n, err)
			continue
		}
		b, w, ctl := names(n)
		tp := &Topology{Index: n, Subnet: subnet(n), ControllerAddr: addr(n, 1), ControllerIface: ctl,
			BastionWebAddr: addr(n, 5), lock: f, state: state{PID: os.Getpid()}}
		tp.Bastion = Host{Role: "bastion", Netns: b, Addr: addr(n, 2), Port: SSHPort}
		tp.Web = Host{Role: "web", Netns: w, Addr: addr(n, 6), Port: SSHPort}
		tp.record(t, "", "")
		return tp
	}
	t.Fatalf("topology: all %d indexes (10.77.0.0/16) are in use", maxIndex)
	return nil
}

// tryLock takes the lock of index n without waiting.
func tryLock(n int) (*os.File, bool, error) {
	f, err := os.OpenFile(filepath.Join(StateDir, strconv.Itoa(n)+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("flock %s: %w", f.Name(), err)
	}
	return f, true, nil
}

func statePath(n int) string { return filepath.Join(StateDir, strconv.Itoa(n)+".json") }

// record adds a user or a directory to the state file, so that a later
// run can remove them if this one is killed.
func (tp *Topology) record(t testing.TB, userName, dir string) {
	t.Helper()
	if userName != "" {
		tp.state.Users = append(tp.state.Users, userName)
	}
	if dir != "" {
		tp.state.Dirs = append(tp.state.Dirs, dir)
	}
	b, _ := json.Marshal(tp.state)
	if err := os.WriteFile(statePath(tp.Index), b, 0o600); err != nil {
		t.Fatalf("topology: %v", err)
	}
}

// release removes the state file and drops the lock: last, after every
// other clean-up.
func (tp *Topology) release() {
	os.Remove(statePath(tp.Index))
	tp.lock.Close()
}

// buildNetwork creates the namespaces, links, addresses and routes.
func (tp *Topology) buildNetwork(t testing.TB) {
	t.Helper()
	n := tp.Index
	b, w, ctl := tp.Bastion.Netns, tp.Web.Netns, tp.ControllerIface
	steps := [][]string{
		{"netns", "add", b},
		{"netns", "add", w},
		// Links are created with their far end directly in its namespace:
		// the bastion–web pair never appears in the root namespace.
		{"link", "add", ctl, "type", "veth", "peer", "name", "ctl", "netns", b},
		{"-n", b, "link", "add", "web", "type", "veth", "peer", "name", "bastion", "netns", w},
		{"addr", "add", addr(n, 1) + "/30", "dev", ctl},
		{"-n", b, "addr", "add", addr(n, 2) + "/30", "dev", "ctl"},
		{"-n", b, "addr", "add", addr(n, 5) + "/30", "dev", "web"},
		{"-n", w, "addr", "add", addr(n, 6) + "/30", "dev", "bastion"},
		{"link", "set", ctl, "up"},
		{"-n", b, "link", "set", "lo", "up"},
		{"-n", b, "link", "set", "ctl", "up"},
		{"-n", b, "link", "set", "web", "up"},
		{"-n", w, "link", "set", "lo", "up"},
		{"-n", w, "link", "set", "bastion", "up"},
		// Keep everything else in 10.77.N.0/24 (web) on this machine:
		// without this the default route would send it out.
		{"route", "add", "unreachable", subnet(n)},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			t.Fatalf("topology: %v", err)
		}
	}
	// New namespaces copy the root namespace's forwarding setting (1 on a
	// Docker host): neither host routes between its links.
	for _, ns := range []string{b, w} {
		if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-q", "-w",
			"net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0").CombinedOutput(); err != nil {
			t.Fatalf("topology: sysctl in %s: %v: %s", ns, err, bytes.TrimSpace(out))
		}
	}
}

// ip runs the ip tool.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// teardown removes everything topology n may have left: processes in its
// namespaces, links, the route, the namespaces, and — from the state file
// of a run that did not clean up — users and temporary directories. The
// caller holds n's lock. Missing pieces are not errors.
func teardown(n int) error {
	var errs []error
	b, w, ctl := names(n)
	var st state
	if raw, err := os.ReadFile(statePath(n)); err == nil {
		json.Unmarshal(raw, &st)
	}
	for _, ns := range []string{w, b} {
		if exists("/run/netns/" + ns) {
			if err := killNetnsPids(ns); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if _, err := net.InterfaceByName(ctl); err == nil {
		if err := ip("link", "del", ctl); err != nil {
			errs = append(errs, err)
		}
	}
	if exists("/run/netns/" + b) {
		ip("-n", b, "link", "del", "web") // gone with web already, or not yet made
	}
	if hasUnreachableRoute(n) {
		if err := ip("route", "del", "unreachable", subnet(n)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range []string{w, b} {
		if exists("/run/netns/" + ns) {
			if err := ip("netns", "del", ns); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Users and directories: only those of a dead run. A live topology's
	// users and directories are removed by their own sshtest clean-ups,
	// which have run before teardown.
	for _, name := range st.Users {
		if err := removeStaleUser(name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range st.Dirs {
		if filepath.Dir(d) == filepath.Clean(os.TempDir()) &&
			(strings.HasPrefix(filepath.Base(d), "sshtest-") || strings.HasPrefix(filepath.Base(d), Prefix+"-")) {
			os.RemoveAll(d)
		}
	}
	os.Remove(statePath(n))
	return errors.Join(errs...)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func hasUnreachableRoute(n int) bool {
	out, err := exec.Command("ip", "-4", "route", "show", "type", "unreachable", "exact", subnet(n)).Output()
	return err == nil && len(bytes.TrimSpace(out)) > 0
}

// killNetnsPids kills the processes in network namespace ns (our sshd
// servers and their sessions; never this process) and waits until none
// is left.
func killNetnsPids(ns string) error {
	self := os.Getpid()
	for round := 0; round < 100; round++ {
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			return fmt.Errorf("ip netns pids %s: %v", ns, err)
		}
		var left int
		for _, f := range strings.Fields(string(out)) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid == self || pid <= 1 {
				continue
			}
			syscall.Kill(pid, syscall.SIGKILL)
			left++
		}
		if left == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond) // poll: killed processes take a moment to go
	}
	return fmt.Errorf("processes are still running in %s", ns)
}

// removeStaleUser removes a test user left by a run that was killed.
func removeStaleUser(name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return nil // already gone
	}
	uid, _ := strconv.Atoi(u.Uid)
	if uid == 0 {
		return fmt.Errorf("refusing to remove %s: uid 0", name)
	}
	for round := 0; round < 50; round++ {
		pids := uidPids(uid)
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond) // poll: killed processes take a moment to go
	}
	var out []byte
	for attempt := 0; attempt < 20; attempt++ {
		// userdel fails, rather than waits, while a parallel useradd
		// holds /etc/passwd.
		if out, err = exec.Command("userdel", "-r", "-f", name).CombinedOutput(); err == nil ||
			strings.Contains(string(out), "mail spool") {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("userdel %s: %v: %s", name, err, bytes.TrimSpace(out))
}

// uidPids lists the processes running as uid.
func uidPids(uid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name(), &st) == nil && int(st.Uid) == uid {
			out = append(out, p)
		}
	}
	return out
}

var staleName = regexp.MustCompile(`^` + Prefix + `(\d+)-(bastion|web|ctl)$`)

// Sweep removes what killed runs left behind: every index that has
// leftovers (namespaces, a veth, a route, a state file) but whose lock
// nobody holds. New calls it once per process.
func Sweep(t testing.TB) {
	t.Helper()
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		t.Fatalf("topology: %v", err)
	}
	found := map[int]bool{}
	var cands []string
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			cands = append(cands, e.Name())
		}
	}
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			cands = append(cands, i.Name)
		}
	}
	for _, c := range cands {
		if m := staleName.FindStringSubmatch(c); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n < maxIndex {
				found[n] = true
			}
		}
	}
	if ents, err := os.ReadDir(StateDir); err == nil {
		for _, e := range ents {
			if s, ok := strings.CutSuffix(e.Name(), ".json"); ok {
				if n, err := strconv.Atoi(s); err == nil && n < maxIndex {
					found[n] = true
				}
			}
		}
	}
	if out, err := exec.Command("ip", "-4", "route", "show", "type", "unreachable", "root", "10.77.0.0/16").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			var n int
			if _, err := fmt.Sscanf(strings.TrimSpace(l), "unreachable 10.77.%d.0/24", &n); err == nil && n < maxIndex {
				found[n] = true
			}
		}
	}
	for n := range found {
		f, ok, err := tryLock(n)
		if err != nil || !ok {
			continue // a live topology, in this process or another
		}
		if err := teardown(n); err != nil {
			t.Logf("topology: removing leftovers of a killed run (index %d): %v", n, err)
		} else {
			t.Logf("topology: removed leftovers of a killed run (index %d)", n)
		}
		f.Close()
	}
}

// netnsName resolves a namespace: a role ("bastion", "web") or a name.
func (tp *Topology) netnsName(ns string) string {
	switch ns {
	case "bastion":
		return tp.Bastion.Netns
	case "web":
		return tp.Web.Netns
	}
	return ns
}

// ExecTimeout bounds one Exec.
const ExecTimeout = 2 * time.Minute

// Exec runs argv inside network namespace ns (a Netns name, or the role
// "bastion" or "web") with `ip netns exec`, as root, with no stdin, and
// returns its combined stdout and stderr. It is killed after ExecTimeout.
func (tp *Topology) Exec(t testing.TB, ns string, argv ...string) ([]byte, error) {
	t.Helper()
	if len(argv) == 0 {
		t.Fatalf("topology: Exec with no command")
	}
	name := tp.netnsName(ns)
	ctx, cancel := context.WithTimeout(context.Background(), ExecTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", name}, argv...)...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (killed after %v)", err, ExecTimeout)
		}
		return out, fmt.Errorf("in %s: %s: %w", name, strings.Join(argv, " "), err)
	}
	return out, nil
}

// SSHArgs is an OpenSSH client command line that logs in to h as h.User
// with the topology's key and known_hosts (StrictHostKeyChecking=yes, no
// ssh_config, no agent, no password prompt), running remote if given.
// Run it from the root namespace for bastion, or through Exec in bastion
// for web.
func (tp *Topology) SSHArgs(h *Host, remote ...string) []string {
	args := []string{"ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
		"-o", "IdentityAgent=none", "-i", tp.Key.Path,
		"-o", "UserKnownHostsFile=" + tp.KnownHosts, "-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=10",
		"-p", strconv.Itoa(h.Port), h.Target()}
	return append(args, remote...)
}

// Dial opens a TCP connection to addr ("IP:PORT") from inside network
// namespace ns (a Netns name or a role); ns "" dials from the root
// namespace. The connection stays in that namespace and may be used
// from any goroutine.
func (tp *Topology) Dial(ns, addr string, timeout time.Duration) (net.Conn, error) {
	if ns == "" {
		return net.DialTimeout("tcp", addr, timeout)
	}
	return dialIn("/run/netns/"+tp.netnsName(ns), addr, timeout)
}

// dialIn creates the socket on a thread switched into the namespace at
// nsPath (a socket belongs to the namespace it was created in). It runs on
// a goroutine of its own, so that a thread that cannot switch back ends
// with it.
func dialIn(nsPath, addr string, timeout time.Duration) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		conn, restored, err := dialInLocked(nsPath, addr, timeout)
		if restored {
			runtime.UnlockOSThread()
		} // else the thread is stuck in the namespace: it exits with this goroutine.
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}

func dialInLocked(nsPath, addr string, timeout time.Duration) (conn net.Conn, restored bool, err error) {
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, true, err
	}
	defer target.Close()
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return nil, true, err
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("setns %s: %w", nsPath, err)
	}
	conn, err = net.DialTimeout("tcp", addr, timeout)
	if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, false, fmt.Errorf("setns back from %s: %w", nsPath, serr)
	}
	return conn, true, err
}
