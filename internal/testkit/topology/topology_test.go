package topology_test

import (
	"bufio"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit/topology"
)

// needSSH requires the OpenSSH client: the harness is checked with the
// reference client, independently of Spindle.
func needSSH(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("ssh")
	topology.Need(t, err == nil, "no ssh client (package openssh-client): run scripts/test-deps.sh")
}

func run(t *testing.T, argv []string) (string, error) {
	t.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	return string(out), err
}

// From the root namespace, the controller logs in to bastion with the
// client key, checking the host key against the topology's known_hosts.
func TestSSHToBastion(t *testing.T) {
	t.Parallel()
	needSSH(t)
	tp := topology.New(t)

	// Exactly the command line of the brief.
	out, err := run(t, []string{"ssh", "-i", tp.Key.Path, "-o", "UserKnownHostsFile=" + tp.KnownHosts,
		"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", tp.Bastion.User.Name + "@" + tp.Bastion.Addr, "true"})
	if err != nil {
		t.Fatalf("ssh to bastion: %v\n%s\nsshd log:\n%s", err, out, tp.Bastion.Server.Log())
	}
	out, err = run(t, tp.SSHArgs(&tp.Bastion, "id -un; echo $HOME; echo $SSH_CONNECTION"))
	if err != nil {
		t.Fatalf("ssh to bastion: %v\n%s", err, out)
	}
	lines := strings.Fields(out)
	if len(lines) != 6 || lines[0] != tp.Bastion.User.Name || lines[1] != tp.Bastion.User.Home ||
		lines[2] != tp.ControllerAddr || lines[4] != tp.Bastion.Addr || lines[5] != "22" {
		t.Fatalf("want user %s, home %s, connection %s → %s:22; got:\n%s",
			tp.Bastion.User.Name, tp.Bastion.User.Home, tp.ControllerAddr, tp.Bastion.Addr, out)
	}

	// The known_hosts file is what makes it work: with an empty one,
	// StrictHostKeyChecking refuses the host.
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, []string{"ssh", "-F", "none", "-o", "BatchMode=yes", "-i", tp.Key.Path,
		"-o", "UserKnownHostsFile=" + empty, "-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes", tp.Bastion.Target(), "true"})
	if err == nil || !strings.Contains(out, "Host key verification failed") {
		t.Fatalf("unknown host key accepted: %v\n%s", err, out)
	}

	// The key is authorized for bastion's user only.
	args := tp.SSHArgs(&tp.Bastion, "true")
	args[len(args)-2] = tp.Web.User.Name + "@" + tp.Bastion.Addr
	out, err = run(t, args)
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Fatalf("web's user logged in to bastion: %v\n%s", err, out)
	}
}

// The controller has no way to web: a direct connection fails locally
// (unreachable route, no packet leaves the machine), and neither host
// forwards.
func TestWebUnreachableFromController(t *testing.T) {
	t.Parallel()
	tp := topology.New(t)

	c, err := net.DialTimeout("tcp", tp.Web.HostPort(), 10*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("the root namespace connected to web at %s", tp.Web.HostPort())
	}
	if !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("dial web from the root namespace: want EHOSTUNREACH (the unreachable route), got %v", err)
	}
	t.Logf("root → web: %v", err)

	out, err := exec.Command("ip", "-4", "route", "get", tp.Web.Addr).CombinedOutput()
	if err == nil || strings.Contains(string(out), " dev ") {
		t.Fatalf("ip route get %s in the root namespace: %v: %s", tp.Web.Addr, err, out)
	}

	// Bastion itself reaches web's sshd, from its address on the web link.
	c, err = tp.Dial("bastion", tp.Web.HostPort(), 10*time.Second)
	if err != nil {
		t.Fatalf("dial web from bastion: %v", err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	banner, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(banner, "SSH-2.0-") {
		t.Fatalf("web's banner through bastion: %q, %v", banner, err)
	}
	if got, _, _ := net.SplitHostPort(c.LocalAddr().String()); got != tp.BastionWebAddr {
		t.Fatalf("bastion → web from %s, want %s", got, tp.BastionWebAddr)
	}
	c.Close()

	// Web has no route back to the controller.
	c, err = tp.Dial("web", net.JoinHostPort(tp.ControllerAddr, "22"), 10*time.Second)
	if err == nil {
		c.Close()
		t.Fatal("web connected to the controller")
	}
	if !errors.Is(err, syscall.ENETUNREACH) {
		t.Fatalf("dial the controller from web: want ENETUNREACH, got %v", err)
	}

	// Neither namespace forwards (new namespaces copy the root's 1).
	for _, ns := range []string{"bastion", "web"} {
		out, err := tp.Exec(t, ns, "sysctl", "-n", "net.ipv4.ip_forward")
		if err != nil || strings.TrimSpace(string(out)) != "0" {
			t.Fatalf("ip_forward in %s: %q, %v", ns, out, err)
		}
		out, err = tp.Exec(t, ns, "ip", "-4", "route", "show", "default")
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Fatalf("default route in %s: %q, %v", ns, out, err)
		}
	}

	// And ssh from the root namespace to web fails.
	if _, err := exec.LookPath("ssh"); err == nil {
		if out, err := run(t, tp.SSHArgs(&tp.Web, "true")); err == nil {
			t.Fatalf("ssh from the root namespace to web worked:\n%s", out)
		}
	}
}

// From inside bastion's namespace, ssh to web with the same
// (controller-side) key works: the harness is sound. Spindle itself will
// hop through an agent on bastion instead.
func TestSSHFromBastionToWeb(t *testing.T) {
	t.Parallel()
	needSSH(t)
	tp := topology.New(t)
	out, err := tp.Exec(t, tp.Bastion.Netns, tp.SSHArgs(&tp.Web, "id -un; echo $SSH_CONNECTION")...)
	if err != nil {
		t.Fatalf("ssh bastion → web: %v\n%s\nweb sshd log:\n%s", err, out, tp.Web.Server.Log())
	}
	f := strings.Fields(string(out))
	if len(f) != 5 || f[0] != tp.Web.User.Name || f[1] != tp.BastionWebAddr || f[3] != tp.Web.Addr {
		t.Fatalf("want %s from %s to %s, got:\n%s", tp.Web.User.Name, tp.BastionWebAddr, tp.Web.Addr, out)
	}
}

// Classic OpenSSH jumping works too: the controller reaches web through
// bastion's sshd (ssh -W, TCP forwarding on bastion).
func TestSSHJumpThroughBastion(t *testing.T) {
	t.Parallel()
	needSSH(t)
	tp := topology.New(t)
	jump := strings.Join(tp.SSHArgs(&tp.Bastion, "-W", "%h:%p"), " ")
	args := tp.SSHArgs(&tp.Web, "id -un")
	args = append(args[:1], append([]string{"-o", "ProxyCommand=" + jump}, args[1:]...)...)
	out, err := run(t, args)
	if err != nil || strings.TrimSpace(out) != tp.Web.User.Name {
		t.Fatalf("ssh to web through bastion: %v\n%s", err, out)
	}
}

// The private key is only on the controller side: nothing in either
// user's home holds a private key.
func TestNoPrivateKeyInHomes(t *testing.T) {
	t.Parallel()
	tp := topology.New(t)
	for _, h := range []*topology.Host{&tp.Bastion, &tp.Web} {
		if strings.HasPrefix(tp.Key.Path, h.User.Home+"/") {
			t.Fatalf("the key %s is in %s's home", tp.Key.Path, h.Role)
		}
		err := filepath.WalkDir(h.User.Home, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), "PRIVATE KEY") {
				t.Errorf("private key in %s's home: %s", h.Role, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(h.AuthorizedKeys()); err != nil || strings.TrimSpace(string(b)) != tp.Key.Public {
			t.Fatalf("%s authorized_keys: %q, %v", h.Role, b, err)
		}
	}
	if tp.Bastion.User.Name == tp.Web.User.Name {
		t.Fatal("bastion and web share a user")
	}
}

// Two topologies get disjoint names and subnets, and are isolated from
// each other.
func TestTwoTopologies(t *testing.T) {
	t.Parallel()
	a, b := topology.New(t), topology.New(t)
	if a.Index == b.Index || a.Bastion.Netns == b.Bastion.Netns || a.Subnet == b.Subnet {
		t.Fatalf("clash: %d %s %s / %d %s %s", a.Index, a.Bastion.Netns, a.Subnet, b.Index, b.Bastion.Netns, b.Subnet)
	}
	c, err := a.Dial("bastion", b.Web.HostPort(), 10*time.Second)
	if err == nil {
		c.Close()
		t.Fatal("one topology's bastion reached another's web")
	}
}

// When the test ends, nothing is left: namespaces, veth, route, users,
// processes, state file.
func TestCleanup(t *testing.T) {
	t.Parallel()
	var (
		tp   *topology.Topology
		pids []string
	)
	t.Run("build", func(t *testing.T) {
		tp = topology.New(t)
		for _, ns := range []string{tp.Bastion.Netns, tp.Web.Netns} {
			out, err := exec.Command("ip", "netns", "pids", ns).Output()
			if err != nil || len(strings.Fields(string(out))) == 0 {
				t.Fatalf("ip netns pids %s: %q, %v", ns, out, err)
			}
			pids = append(pids, strings.Fields(string(out))...)
		}
	})
	if tp == nil {
		t.Fatal("no topology")
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{tp.Bastion.Netns, tp.Web.Netns} {
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == ns {
				t.Errorf("namespace %s is still there:\n%s", ns, out)
			}
		}
	}
	if _, err := net.InterfaceByName(tp.ControllerIface); err == nil {
		t.Errorf("veth %s is still there", tp.ControllerIface)
	}
	if out, _ := exec.Command("ip", "-4", "route", "show", "exact", tp.Subnet).Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("route to %s is still there: %s", tp.Subnet, out)
	}
	for _, h := range []*topology.Host{&tp.Bastion, &tp.Web} {
		if _, err := user.Lookup(h.User.Name); err == nil {
			t.Errorf("user %s is still there", h.User.Name)
		}
		if _, err := os.Stat(h.User.Home); err == nil {
			t.Errorf("home %s is still there", h.User.Home)
		}
		if _, err := os.Stat(h.Server.Dir); err == nil {
			t.Errorf("sshd directory %s is still there", h.Server.Dir)
		}
	}
	for _, p := range pids {
		if _, err := os.Stat("/proc/" + p + "/ns/net"); err == nil {
			t.Errorf("process %s from the topology's namespaces is still running", p)
		}
	}
	if _, err := os.Stat(filepath.Dir(tp.Key.Path)); err == nil {
		t.Errorf("key directory %s is still there", filepath.Dir(tp.Key.Path))
	}
	if _, err := os.Stat(tp.KnownHosts); err == nil {
		t.Errorf("known_hosts %s is still there", tp.KnownHosts)
	}
	if st := filepath.Join(topology.StateDir, strconv.Itoa(tp.Index)+".json"); exists(st) {
		t.Errorf("state file %s is still there", st)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
