package ansible_test

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/becometest"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
)

// fixture is what every controller's runs share: one sshd on 127.0.0.1,
// its users, the inventory and the playbooks, in a directory that the
// containers mount at the same path.
type fixture struct {
	dir       string // inventory, key, known_hosts, playbooks (dir/pb), outputs
	inventory string
	srv       *sshtest.Server
	login     *sshtest.User // key login, sudo without a password, doas
	// The become target: an unprivileged user with a password (su).
	target becometest.User
	// pwLogin logs in with the key and needs its password for sudo.
	pwLogin *sshtest.User
}

// bigSize is the size of the "200 KiB" file the playbook copies.
const bigSize = 200 << 10

// newFixture makes the fixture; withDoas also replaces /etc/doas.conf,
// which only one test at a time can hold (becometest.DoasConf).
func newFixture(t *testing.T, withDoas bool) *fixture {
	t.Helper()
	sshtest.Require(t)
	becometest.NeedRoot(t, "sudo", "su", "doas", "setfacl")
	f := &fixture{dir: sshtest.TempDir(t, "spindle-ansible-")}
	f.srv = sshtest.Start(t)
	key, err := sshtest.NewKey(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	f.login = sshtest.CreateUser(t, "/bin/bash")
	if err := f.login.AllowSudo(); err != nil {
		t.Fatal(err)
	}
	f.srv.Authorize(t, f.login, key)
	f.pwLogin = sshtest.CreateUser(t, "/bin/bash")
	f.srv.Authorize(t, f.pwLogin, key)
	becometest.Sudoers(t, f.pwLogin.Name+" ALL=(ALL:ALL) ALL\n")
	f.target = becometest.NewUser(t, becometest.Password())
	if withDoas {
		becometest.DoasConf(t, "permit nopass "+f.login.Name+" as root\n")
	}

	kh := filepath.Join(f.dir, "known_hosts")
	line, err := f.srv.HostKeyLineFor(f.srv.KnownHostsName())
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, kh, line+"\n", 0o600)

	// The unreachable host: a port nothing listens on.
	dead := sshtest.ClosedPort(t)
	var inv strings.Builder
	host := func(name, user string, port int, vars ...string) {
		fmt.Fprintf(&inv, "%s ansible_host=127.0.0.1 ansible_port=%d ansible_user=%s %s\n", name, port, user, strings.Join(vars, " "))
	}
	home := func(u *sshtest.User) string { return "work_base=" + u.Home }
	inv.WriteString("[target]\n")
	host("t1", f.login.Name, f.srv.Port, home(f.login))
	inv.WriteString("[pw]\n")
	host("pw1", f.pwLogin.Name, f.srv.Port, home(f.pwLogin), "ansible_become_password="+f.pwLogin.Password)
	inv.WriteString("[badpw]\n")
	host("bad1", f.pwLogin.Name, f.srv.Port, home(f.pwLogin), "ansible_become_password=not-"+f.pwLogin.Password)
	inv.WriteString("[nopw]\n")
	host("nopw1", f.pwLogin.Name, f.srv.Port, home(f.pwLogin))
	inv.WriteString("[dead]\n")
	host("dead1", f.login.Name, dead, home(f.login))
	inv.WriteString("[fleet]\n")
	for i := 1; i <= 10; i++ {
		host(fmt.Sprintf("h%02d", i), f.login.Name, f.srv.Port, home(f.login))
	}
	fmt.Fprintf(&inv, `[all:vars]
ansible_ssh_private_key_file=%s
ansible_ssh_common_args='-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes'
target_user=%s
target_group=%s
target_home=%s
target_password=%s
`, key.Path, kh, f.target.Name, groupName(t, f.target.GID), f.target.Home, f.target.Password)
	f.inventory = filepath.Join(f.dir, "inventory.ini")
	writeFile(t, f.inventory, inv.String(), 0o644)

	copyPlaybooks(t, f.dir)
	writeFile(t, filepath.Join(f.dir, "pb", "files", "big.bin"), string(pseudoRandom(bigSize)), 0o644)
	return f
}

// copyPlaybooks copies testdata to dir/pb, where every controller reads
// it.
func copyPlaybooks(t *testing.T, dir string) {
	t.Helper()
	if err := copyTree("testdata", filepath.Join(dir, "pb")); err != nil {
		t.Fatal(err)
	}
}

// pseudoRandom is n bytes that do not compress: a hash chain.
func pseudoRandom(n int) []byte {
	out := make([]byte, 0, n+sha256.Size)
	h := sha256.Sum256([]byte("spindle"))
	for len(out) < n {
		out = append(out, h[:]...)
		h = sha256.Sum256(h[:])
	}
	return out[:n]
}

func groupName(t *testing.T, gid int) string {
	t.Helper()
	out, err := exec.Command("getent", "group", fmt.Sprint(gid)).Output()
	if err != nil {
		t.Fatalf("getent group %d: %v", gid, err)
	}
	return strings.SplitN(string(out), ":", 2)[0]
}

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, info.Mode().Perm()|0o444)
	})
}
