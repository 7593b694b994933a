package ansible_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/ansible"
	"github.com/spindle-rpc/spindle/internal/testkit/becometest"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
)

// sudoers installs a sudoers drop-in for the test's duration.
func sudoers(t *testing.T, content string) {
	t.Helper()
	becometest.NeedRoot(t, "sudo")
	becometest.Sudoers(t, content+"\n")
}

func TestBecomeSudo(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	other := sshtest.CreateUser(t, "/bin/bash")
	// Root needs the user's password, the other user none.
	sudoers(t, h.u.Name+" ALL=(ALL:ALL) ALL\n"+h.u.Name+" ALL=("+other.Name+") NOPASSWD: ALL")

	// NOPASSWD, with Ansible's default flags (the connector's own).
	nopass := map[string]any{"method": "sudo", "user": other.Name, "password": nil, "flags": "-H -S -n", "exe": nil}
	r := must(t, sock, execReq(h, "id -un", nopass), nil)
	if strings.TrimSpace(string(r.Stdout)) != other.Name {
		t.Fatalf("sudo to %s: %q", other.Name, r.Stdout)
	}
	// One become child, kept: the same agent runs the next command.
	if a, b := agentPID(t, sock, h, nopass), agentPID(t, sock, h, nopass); a != b {
		t.Errorf("two become requests ran on agents %s and %s", a, b)
	}
	// A command without become runs as the login user still.
	if r := must(t, sock, execReq(h, "id -un", nil), nil); strings.TrimSpace(string(r.Stdout)) != h.u.Name {
		t.Errorf("without become: %q", r.Stdout)
	}

	// With the user's password.
	withPw := map[string]any{"method": "sudo", "user": "root", "password": h.u.Password, "flags": "-H -S -n"}
	r = must(t, sock, execReq(h, "id -u", withPw), nil)
	if strings.TrimSpace(string(r.Stdout)) != "0" {
		t.Fatalf("sudo to root: %q", r.Stdout)
	}
	// put as the become user: the file is root's.
	src := filepath.Join(t.TempDir(), "f")
	os.WriteFile(src, []byte("x"), 0o644)
	must(t, sock, map[string]any{"op": "put", "host": h.vars, "become": withPw, "src": src, "dst": "/root/spindle-ansible-test"}, nil)
	defer os.Remove("/root/spindle-ansible-test")
	if b, err := os.ReadFile("/root/spindle-ansible-test"); err != nil || string(b) != "x" {
		t.Errorf("put as root: %q, %v", b, err)
	}

	// A wrong password: become_password_incorrect, and never shown.
	wrong := "wrong-" + h.u.Password
	e := wantKind(t, sock, execReq(h, "id -u", map[string]any{"method": "sudo", "password": wrong}), ansible.KindBecomeIncorrect)
	if strings.Contains(e.Message, wrong) || strings.Contains(e.Message, h.u.Password) {
		t.Errorf("the password is in the message: %s", e.Message)
	}
	t.Logf("become_password_incorrect: %s", e.Message)
	if !strings.Contains(e.Message, "sudo:root") {
		t.Errorf("the message does not name the chain: %s", e.Message)
	}
	// None where one is needed: become_password_missing.
	wantKind(t, sock, execReq(h, "id -u", map[string]any{"method": "sudo"}), ansible.KindBecomeMissing)
	// No such user: become_failed.
	e = wantKind(t, sock, execReq(h, "id -u", map[string]any{"method": "sudo", "user": "nosuchuser-spindle"}), ansible.KindBecomeFailed)
	t.Logf("become_failed: %s", e.Message)
}

func TestBecomeSu(t *testing.T) {
	sshtest.Require(t)
	becometest.NeedRoot(t, "su")
	sock := startDaemon(t)
	h := newHost(t)
	other := sshtest.CreateUser(t, "/bin/bash")
	su := map[string]any{"method": "su", "user": other.Name, "password": other.Password, "flags": ""}
	r := must(t, sock, execReq(h, "id -un; cat", su), []byte("in"))
	if string(r.Stdout) != other.Name+"\nin" {
		t.Fatalf("su: %q", r.Stdout)
	}
	wantKind(t, sock, execReq(h, "id -un", map[string]any{"method": "su", "user": other.Name, "password": "wrong-pw"}), ansible.KindBecomeIncorrect)
	wantKind(t, sock, execReq(h, "id -un", map[string]any{"method": "su", "user": other.Name}), ansible.KindBecomeMissing)
}

func TestInstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugins", "connection")
	file, err := ansible.Install(dir, "1.2.3", "/opt/spindle/bin/spin\"dle")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil || filepath.Base(file) != "spindle.py" {
		t.Fatal(file, err)
	}
	s := string(b)
	if !strings.Contains(s, "\nSPINDLE_VERSION = \"1.2.3\"\n") || !strings.Contains(s, "\nSPINDLE_PATH = \"/opt/spindle/bin/spin\\\"dle\"\n") ||
		strings.Contains(s, `"dev"`) {
		t.Errorf("stamped plugin:\n%s", s)
	}
	// Python reads the stamped lines back as written.
	if py, err := exec.LookPath("python3"); err == nil {
		out, err := exec.Command(py, "-c", "import runpy,sys; g=runpy.run_path(sys.argv[1]); print(g['SPINDLE_VERSION'], g['SPINDLE_PATH'])", file).CombinedOutput()
		if err == nil && string(out) != "1.2.3 /opt/spindle/bin/spin\"dle\n" {
			t.Errorf("python reads %q", out)
		}
	}
	if !strings.Contains(string(ansible.Plugin), `SPINDLE_VERSION = "dev"`) {
		t.Error("the embedded plugin is not the repository's")
	}
}
