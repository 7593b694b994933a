package sshtest

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sshRun runs OpenSSH's own client against the server: the harness is
// checked with the reference client, independently of Spindle.
func sshRun(t *testing.T, addr string, port int, u *User, k *Key, kh string, cmd string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		CannotRun(t, "no ssh client (package openssh-client): run scripts/test-deps.sh")
	}
	c := exec.Command("ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+kh,
		"-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes", "-i", k.Path,
		"-p", strconv.Itoa(port), u.Name+"@"+addr, cmd)
	out, err := c.CombinedOutput()
	return string(out), err
}

func TestHarness(t *testing.T) {
	t.Parallel()
	s := Start(t)
	u := CreateUser(t, "/bin/bash")
	k := ClientKey(t)
	s.Authorize(t, u, k)
	kh := s.KnownHosts(t)
	out, err := sshRun(t, "127.0.0.1", s.Port, u, k, kh, "id -un; echo XDG=$XDG_RUNTIME_DIR")
	if err != nil || !strings.Contains(out, u.Name) || !strings.Contains(out, "XDG=\n") {
		t.Fatalf("ssh: %v\n%s", err, out)
	}
	s.RestartWithNewHostKey(t)
	out, err = sshRun(t, "127.0.0.1", s.Port, u, k, kh, "true")
	if err == nil || !strings.Contains(out, "HOST IDENTIFICATION HAS CHANGED") {
		t.Fatalf("changed host key accepted: %v\n%s", err, out)
	}
	// Password auth works against /etc/shadow with UsePAM no.
	if _, err := exec.LookPath("sshpass"); err == nil {
		c := exec.Command("sshpass", "-p", u.Password, "ssh", "-F", "none", "-o", "StrictHostKeyChecking=no",
			"-o", "UserKnownHostsFile=/dev/null", "-o", "PubkeyAuthentication=no", "-p", strconv.Itoa(s.Port), u.Name+"@127.0.0.1", "true")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("password login: %v\n%s", err, out)
		}
	}
}

func TestProxyLatency(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := StartProxy(t, s.Addr(), 50*time.Millisecond)
	u := CreateUser(t, "/bin/sh")
	k := ClientKey(t)
	s.Authorize(t, u, k)
	host, portS, _ := strings.Cut(p.Addr(), ":")
	port, _ := strconv.Atoi(portS)
	kh := TempDir(t, "kh-") + "/known_hosts"
	line := strings.Replace(s.HostKeyLine(t), s.KnownHostsName(), "["+host+"]:"+portS, 1)
	if err := os.WriteFile(kh, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := sshRun(t, host, port, u, k, kh, "echo ok")
	if err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("ssh through proxy: %v\n%s", err, out)
	}
	// An SSH login takes several round trips; each costs ≥ 100ms here.
	if el := time.Since(start); el < 400*time.Millisecond {
		t.Fatalf("login through a 50ms proxy took only %v", el)
	}
}

func TestUserCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("create", func(t *testing.T) {
		u := CreateUser(t, "/usr/bin/fish")
		name = u.Name
		if u.UID == 0 || u.Home == "" {
			t.Fatalf("user %+v", u)
		}
	})
	if err := exec.Command("id", name).Run(); err == nil {
		t.Fatalf("user %s still exists after its test", name)
	}
}

// Password auth against /etc/shadow works with UsePAM no (checked with
// x/crypto/ssh directly, so the harness does not depend on Spindle).
func TestPasswordAuth(t *testing.T) {
	t.Parallel()
	s := Start(t)
	u := CreateUser(t, "/bin/sh")
	for _, tc := range []struct {
		pw string
		ok bool
	}{{u.Password, true}, {"wrong" + u.Password, false}} {
		cfg := &ssh.ClientConfig{User: u.Name, Auth: []ssh.AuthMethod{ssh.Password(tc.pw)},
			HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second}
		c, err := ssh.Dial("tcp", s.Addr(), cfg)
		if (err == nil) != tc.ok {
			t.Fatalf("password ok=%v: %v", tc.ok, err)
		}
		if c != nil {
			c.Close()
		}
	}
}

// The embedded server runs an exec request as the current user and
// reports its exit status; it refuses what it does not serve.
func TestEmbedded(t *testing.T) {
	t.Parallel()
	s, err := StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key, err := os.ReadFile(s.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	kh, err := knownhosts.New(s.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), &ssh.ClientConfig{User: "any",
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: kh, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Output("echo $HOME; exit 3")
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 3 || !strings.HasPrefix(string(out), "/") {
		t.Errorf("exec: %q, %v; want HOME and exit status 3", out, err)
	}
	sess, err = c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.Shell(); err == nil {
		t.Errorf("a shell request was served")
	}
}
