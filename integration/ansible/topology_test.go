package ansible_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/containertest"
	"github.com/spindle-rpc/spindle/internal/testkit/topology"
)

// TestViaBastion: a host in a network namespace that only a bastion
// reaches, from every controller; -c ssh through a ProxyCommand over the
// bastion, -c spindle through ansible_spindle_via. Both must get there
// (the target sees the bastion's address) and agree task by task.
func TestViaBastion(t *testing.T) {
	t.Parallel()
	tp := topology.New(t)
	f := &fixture{dir: newDir(t)}
	web, bastion := tp.Web, tp.Bastion
	// The key and known_hosts where the containers see them too.
	key, kh := filepath.Join(f.dir, "id_ed25519"), filepath.Join(f.dir, "known_hosts")
	for from, to := range map[string]string{tp.Key.Path: key, tp.KnownHosts: kh} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, to, string(b), 0o600)
	}
	common := fmt.Sprintf("-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes", kh)
	proxy := fmt.Sprintf("ssh -F none -o BatchMode=yes -o IdentitiesOnly=yes -i %s %s -p %d -W %%h:%%p %s",
		key, common, bastion.Port, bastion.Target())
	inv := func(name, vars string) string {
		p := filepath.Join(f.dir, name)
		writeFile(t, p, fmt.Sprintf(`[web]
web1 ansible_host=%s ansible_port=%d ansible_user=%s %s
[web:vars]
ansible_ssh_private_key_file=%s
via_addr=%s
`, web.Addr, web.Port, web.User.Name, vars, key, tp.BastionWebAddr), 0o644)
		return p
	}
	sshInv := inv("inventory-ssh.ini", fmt.Sprintf(`ansible_ssh_common_args='%s -o ProxyCommand="%s"'`, common, proxy))
	spindleInv := inv("inventory-spindle.ini", fmt.Sprintf("ansible_ssh_common_args='%s' ansible_spindle_via=%s@%s:%d",
		common, bastion.User.Name, bastion.Addr, bastion.Port))
	copyPlaybooks(t, f.dir)
	for _, c := range controllers {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctl := prepare(t, c.name, c.suite)
			viaSSH := f.playWith(t, ctl, "ssh", sshInv, "bastion.yml")
			viaSpindle := f.playWith(t, ctl, "spindle", spindleInv, "bastion.yml")
			for _, p := range []playResult{viaSSH, viaSpindle} {
				if len(p.results) == 0 || p.code != 0 {
					t.Errorf("%s, -c %s: exit %d, %d results\n%s", ctl.name, p.conn, p.code, len(p.results), p.output)
				}
				for _, bad := range checkExpected(p.results) {
					t.Errorf("%s, -c %s: %s", ctl.name, p.conn, bad)
				}
			}
			for _, d := range compareResults(viaSSH.results, viaSpindle.results, "ssh", "spindle") {
				t.Errorf("%s: %s", ctl.name, d)
			}
			if t.Failed() {
				t.Logf("-c spindle daemon log:\n%s", viaSpindle.daemonLog())
			}
		})
	}
}

// TestBusyboxContainer: a Python-free busybox container is the host
// itself (ansible_spindle_target: docker:NAME), and raw runs there. The
// host's controller only: the daemon runs docker on this machine.
func TestBusyboxContainer(t *testing.T) {
	t.Parallel()
	ctl := prepare(t, "2.14", "")
	c := containertest.Run(t)
	f := &fixture{dir: newDir(t)}
	f.inventory = filepath.Join(f.dir, "inventory.ini")
	writeFile(t, f.inventory, fmt.Sprintf("[box]\nbox1 ansible_spindle_target=docker:%s container_name=%s\n", c.Name, c.Name), 0o644)
	copyPlaybooks(t, f.dir)
	p := f.play(t, ctl, "spindle", "busybox.yml")
	if len(p.results) != 4 || p.code != 0 {
		t.Errorf("exit %d, %d results, want 0 and 4", p.code, len(p.results))
	}
	for _, bad := range checkExpected(p.results) {
		t.Error(bad)
	}
	if t.Failed() {
		t.Logf("output:\n%s\ndaemon log:\n%s", p.output, p.daemonLog())
	}
}

// newDir is a directory for a test's inventory, playbooks and runs that
// the containers can mount and the test users can read.
func newDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "spindle-ansible-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
