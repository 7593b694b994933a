package integration_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
)

// buildCLI builds cmd/spindle for t. It embeds no agents (a plain go
// build): it ships $SPINDLE_AGENT, which TestMain set, to this machine.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin, err := testagent.BuildPackage("./cmd/spindle", "spindle")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	return bin
}

// cli runs the spindle binary and returns stdout, stderr, exit status.
func cli(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	return cliEnv(t, bin, nil, args...)
}

// cliEnv is cli with env added to the environment.
func cliEnv(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := osexec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// Nothing from the caller's ssh-agent.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SSH_AUTH_SOCK=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Run()
	code := 0
	var ee *osexec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("spindle %q: %v", args, err)
	}
	return out.String(), errb.String(), code
}

var (
	uploadedRe = regexp.MustCompile(`(?i)upload|sending agent`)
	cachedRe   = regexp.MustCompile(`(?i)cached`)
)

// As a user types it: `spindle run
// ssh:user@127.0.0.1:PORT -- uname -a` against a fresh sshd with an empty
// cache; at -v the first run says it uploaded the agent, the second that
// it used the cached one.
func TestCLIRunSSH(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/bash")
	bin := buildCLI(t)

	t.Run("target", func(t *testing.T) {
		target := fmt.Sprintf("ssh:%s@127.0.0.1:%d", tg.u.Name, tg.s.Port)
		args := []string{"-v", "-F", "none", "-i", tg.key.Path, "-o", "IdentitiesOnly=yes",
			"-o", "UserKnownHostsFile=" + tg.kh, "run", target, "--", "uname", "-a"}
		checkTwoRuns(t, tg, bin, args)
	})

	t.Run("ssh_config", func(t *testing.T) {
		cfg := filepath.Join(sshtest.TempDir(t, "cli-"), "ssh_config")
		os.WriteFile(cfg, []byte(fmt.Sprintf(`Host t
  HostName 127.0.0.1
  Port %d
  User %s
  IdentityFile %s
  IdentitiesOnly yes
  UserKnownHostsFile %s
  StrictHostKeyChecking yes
`, tg.s.Port, tg.u.Name, tg.key.Path, tg.kh)), 0o600)
		// The agent is cached by the first subtest: remove it to start
		// from an empty cache again.
		for _, f := range agentFiles(tg.u) {
			os.Remove(f)
		}
		checkTwoRuns(t, tg, bin, []string{"-v", "-F", cfg, "run", "t", "--", "uname", "-a"})

		// Exit statuses pass through.
		if _, _, code := cli(t, bin, "-F", cfg, "run", "t", "--", "sh", "-c", "exit 3"); code != 3 {
			t.Errorf("exit 3 came back as %d", code)
		}
	})

	t.Run("unknown-host-key", func(t *testing.T) {
		empty := filepath.Join(sshtest.TempDir(t, "cli-"), "known_hosts")
		os.WriteFile(empty, nil, 0o600)
		target := fmt.Sprintf("ssh:%s@127.0.0.1:%d", tg.u.Name, tg.s.Port)
		_, stderr, code := cli(t, bin, "-F", "none", "-i", tg.key.Path, "-o", "UserKnownHostsFile="+empty,
			"run", target, "--", "true")
		if code != 255 {
			t.Errorf("unknown host key: exit %d, want 255", code)
		}
		if !regexp.MustCompile(`(?i)host key`).MatchString(stderr) {
			t.Errorf("unknown host key: stderr does not say so:\n%s", stderr)
		}
	})
}

func checkTwoRuns(t *testing.T, tg *target, bin string, args []string) {
	t.Helper()
	for i, want := range []*regexp.Regexp{uploadedRe, cachedRe} {
		start := time.Now()
		stdout, stderr, code := cli(t, bin, args...)
		t.Logf("run %d (%v): exit %d\nstdout: %s\nstderr:\n%s", i+1, time.Since(start), code, stdout, stderr)
		if code != 0 || !strings.Contains(stdout, "Linux") {
			t.Fatalf("run %d: exit %d, stdout %q", i+1, code, stdout)
		}
		if !want.MatchString(stderr) {
			t.Errorf("run %d: -v stderr does not match %v", i+1, want)
		}
		if i == 1 && uploadedRe.MatchString(stderr) {
			t.Errorf("run 2 uploaded the agent again")
		}
	}
	if fs := agentFiles(tg.u); len(fs) != 1 {
		t.Errorf("cached agents after two runs: %v", fs)
	}
}

// twoHopFlags are the CLI flags that reach first and second (keys and a
// known_hosts with both), and their TARGETs.
func twoHopFlags(t *testing.T, first, second *target) (common []string, via, far string) {
	t.Helper()
	kh := filepath.Join(sshtest.TempDir(t, "cli-"), "known_hosts")
	os.WriteFile(kh, []byte(first.s.HostKeyLine(t)+"\n"+second.s.HostKeyLine(t)+"\n"), 0o600)
	common = []string{"-F", "none", "-i", first.key.Path, "-i", second.key.Path, "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile=" + kh}
	return common, fmt.Sprintf("ssh:%s@127.0.0.1:%d", first.u.Name, first.s.Port), fmt.Sprintf("ssh:%s@127.0.0.1:%d", second.u.Name, second.s.Port)
}

// TestCLIRunVia: `spindle run -J FIRST SECOND -- …` reaches SECOND through
// FIRST's agent, with the controller's key, and the same chain can end in
// a become hop.
func TestCLIRunVia(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/bash")
	sudoers(t, second.u.Name+" ALL=(ALL:ALL) NOPASSWD: ALL")
	bin := buildCLI(t)
	common, via, far := twoHopFlags(t, first, second)

	out, errs, code := cli(t, bin, append(common, "run", "-J", via, far, "--", "id", "-un")...)
	if code != 0 || strings.TrimSpace(out) != second.u.Name {
		t.Fatalf("run -J: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	out, errs, code = cli(t, bin, append(common, "run", via+","+far+",sudo", "--", "id", "-un")...)
	if code != 0 || strings.TrimSpace(out) != "root" {
		t.Fatalf("run FIRST,SECOND,sudo: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if keys := privateKeysUnder(t, first.u.Home); len(keys) > 0 {
		t.Errorf("private keys on the first hop: %v", keys)
	}
}

// spindle run -J bastion web1 web2 -- CMD: both run, their lines
// prefixed, through one connection to the bastion (sshd there accepts
// one login), whose agent starts the two hops.
func TestCLIRunManyVia(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/sh")
	other := sshtest.CreateUser(t, "/bin/sh")
	second.s.Authorize(t, other, second.key)
	bin := buildCLI(t)
	common, via, web1 := twoHopFlags(t, first, second)
	web2 := fmt.Sprintf("ssh:%s@127.0.0.1:%d", other.Name, second.s.Port)
	logins := func() int { return strings.Count(first.s.Log(), "Accepted publickey for "+first.u.Name+" ") }
	before := logins()

	out, errs, code := cli(t, bin, append(common, "run", "-J", via, web1, web2, "--", "id", "-un")...)
	if code != 0 {
		t.Fatalf("run -J BASTION WEB1 WEB2: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	for _, want := range []string{web1 + ": " + second.u.Name + "\n", web2 + ": " + other.Name + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if n := logins() - before; n != 1 {
		t.Errorf("the bastion's sshd accepted %d logins for two targets behind it, want 1", n)
	}

	// Through the daemon (--persist) the same, and after it the next runs
	// over both and a run on one of them log in nowhere: the daemon keeps
	// one connection to the bastion, whose agent started both hops.
	rt := sshtest.TempDir(t, "persist-")
	t.Cleanup(func() { stopDaemons(rt) })
	env := []string{"XDG_RUNTIME_DIR=" + rt}
	webLogins := func() int {
		return strings.Count(second.s.Log(), "Accepted publickey for "+second.u.Name+" ") +
			strings.Count(second.s.Log(), "Accepted publickey for "+other.Name+" ")
	}
	before, beforeWeb := logins(), webLogins()
	for range 2 {
		out, errs, code := cliEnv(t, bin, env, append(common, "run", "--persist", "1m", "-J", via, web1, web2, "--", "id", "-un")...)
		if code != 0 || !strings.Contains(out, web1+": "+second.u.Name+"\n") || !strings.Contains(out, web2+": "+other.Name+"\n") {
			t.Fatalf("run --persist -J BASTION WEB1 WEB2: exit %d, stdout %q, stderr:\n%s", code, out, errs)
		}
	}
	if out, errs, code := cliEnv(t, bin, env, append(common, "run", "--persist", "1m", "-J", via, web2, "--", "id", "-un")...); code != 0 || out != other.Name+"\n" {
		t.Fatalf("run --persist -J BASTION WEB2: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if n, w := logins()-before, webLogins()-beforeWeb; n != 1 || w != 2 {
		t.Errorf("three runs through the daemon: the bastion's sshd accepted %d logins, web's %d; want 1 and 2", n, w)
	}
}

// spindle cp between two SSH targets, as two users who cannot read each
// other's homes: the data passes through the controller, lands owned by
// the destination's user, and a tree keeps its shape and modes.
func TestCLICpBetweenTargets(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/bash")
	bin := buildCLI(t)
	kh := filepath.Join(sshtest.TempDir(t, "cli-"), "known_hosts")
	os.WriteFile(kh, []byte(first.s.HostKeyLine(t)+"\n"+second.s.HostKeyLine(t)+"\n"), 0o600)
	common := []string{"-F", "none", "-i", first.key.Path, "-i", second.key.Path, "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile=" + kh, "cp"}
	from := fmt.Sprintf("ssh:%s@127.0.0.1:%d:", first.u.Name, first.s.Port)
	to := fmt.Sprintf("ssh:%s@127.0.0.1:%d:", second.u.Name, second.s.Port)

	// As the first user: a streamed file and a small tree in a private home.
	own := func(p string) {
		t.Helper()
		if err := os.Chown(p, first.u.UID, first.u.GID); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(first.u.Home, 0o700)
	os.Chmod(second.u.Home, 0o700)
	data := bytes.Repeat([]byte("spindle relay\n"), 300<<10) // 4.2 MB
	big := filepath.Join(first.u.Home, "big")
	os.WriteFile(big, data, 0o600)
	own(big)
	tree := filepath.Join(first.u.Home, "tree")
	for _, d := range []string{"", "sub"} {
		os.Mkdir(filepath.Join(tree, d), 0o750)
		own(filepath.Join(tree, d))
	}
	for name, body := range map[string]string{"a.txt": "a\n", "sub/b.txt": "b\n"} {
		os.WriteFile(filepath.Join(tree, name), []byte(body), 0o640)
		own(filepath.Join(tree, name))
	}

	if out, errs, code := cli(t, bin, append(common, from+big, to+second.u.Home+"/")...); code != 0 {
		t.Fatalf("cp file between targets: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if out, errs, code := cli(t, bin, append(common, "-r", "-p", from+tree, to+second.u.Home)...); code != 0 {
		t.Fatalf("cp -r between targets: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	check := func(rel string, want []byte, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(second.u.Home, rel)
		b, err := os.ReadFile(p)
		st, serr := os.Stat(p)
		if err != nil || serr != nil || !bytes.Equal(b, want) {
			t.Errorf("%s: %d bytes (want %d), %v %v", p, len(b), len(want), err, serr)
			return
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; int(uid) != second.u.UID || st.Mode().Perm() != mode {
			t.Errorf("%s: owner %d, mode %v; want %d, %v", p, uid, st.Mode().Perm(), second.u.UID, mode)
		}
	}
	check("big", data, 0o600)
	check("tree/a.txt", []byte("a\n"), 0o640)
	check("tree/sub/b.txt", []byte("b\n"), 0o640)

	// A source the first user cannot read fails, naming it.
	_, errs, code := cli(t, bin, append(common, from+"/root/.profile", to+"/tmp/x")...)
	if code != 1 || !strings.Contains(errs, "/root/.profile") || !strings.Contains(errs, "permission denied") {
		t.Errorf("cp of an unreadable source: exit %d, stderr %q", code, errs)
	}
}

// -A forwards the controller's real ssh-agent to the target's commands, as
// ssh -A would: ssh-add there lists the key, cannot remove it, and without
// -A finds no agent; the socket goes when the run ends.
func TestCLIForwardAgent(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	sock := startSSHAgent(t)
	bin := buildCLI(t)
	env := []string{"SSH_AUTH_SOCK=" + sock}
	add := osexec.Command("ssh-add", tg.key.Path)
	add.Env = append(os.Environ(), env...)
	if b, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v %s", err, b)
	}
	list := func() string {
		l := osexec.Command("ssh-add", "-l")
		l.Env = append(os.Environ(), env...)
		b, _ := l.Output()
		return string(b)
	}
	want := list()
	if !strings.Contains(want, "ED25519") {
		t.Fatalf("the local agent lists %q", want)
	}

	target := fmt.Sprintf("ssh:%s@127.0.0.1:%d", tg.u.Name, tg.s.Port)
	flags := []string{"-F", "none", "-i", tg.key.Path, "-o", "IdentitiesOnly=yes", "-o", "UserKnownHostsFile=" + tg.kh}
	run := func(fwd bool, argv ...string) (string, string, int) {
		args := append(append([]string{}, flags...), "run")
		if fwd {
			args = append(args, "-A")
		}
		return cliEnv(t, bin, env, append(append(args, target, "--"), argv...)...)
	}

	if out, errs, code := run(true, "ssh-add", "-l"); code != 0 || out != want {
		t.Fatalf("-A: ssh-add -l on the target: exit %d, %q (stderr %q); want %q", code, out, errs, want)
	}
	if out, errs, code := run(false, "ssh-add", "-l"); code != 2 {
		t.Errorf("without -A: ssh-add -l exit %d, %q %q; want 2 (no agent)", code, out, errs)
	}
	if _, _, code := run(true, "ssh-add", "-D"); code == 0 {
		t.Error("-A: ssh-add -D succeeded on the target")
	}
	if got := list(); got != want {
		t.Errorf("after ssh-add -D on the target, the local agent lists %q, want %q", got, want)
	}
	// ssh_config's ForwardAgent does what -A does, and -o overrides it.
	cfg := filepath.Join(sshtest.TempDir(t, "fwd-cfg-"), "config")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("Host fwd\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  ForwardAgent yes\n",
		tg.s.Port, tg.u.Name, tg.key.Path, tg.kh)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := cliEnv(t, bin, env, "-F", cfg, "run", "fwd", "--", "ssh-add", "-l"); code != 0 || out != want {
		t.Errorf("ForwardAgent yes: ssh-add -l exit %d, %q (stderr %q); want %q", code, out, errs, want)
	}
	if _, _, code := cliEnv(t, bin, env, "-F", cfg, "-o", "ForwardAgent=no", "run", "fwd", "--", "ssh-add", "-l"); code != 2 {
		t.Errorf("-o ForwardAgent=no over the config's yes: ssh-add -l exit %d, want 2", code)
	}

	path, _, code := run(true, "sh", "-c", `test -S "$SSH_AUTH_SOCK" && printf %s "$SSH_AUTH_SOCK"`)
	if code != 0 || path == "" {
		t.Fatalf("-A: no socket in SSH_AUTH_SOCK (%q, exit %d)", path, code)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the forwarded socket %s outlives the run: %v", path, err)
	}
}

// spindle forward HOST with no flags applies ssh_config's LocalForward
// for HOST, as ssh would: a TCP port, and a Unix socket here that reaches
// a Unix socket on the target (the docker.sock pattern).
func TestCLIForwardFromConfig(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	bin := buildCLI(t)
	dir := sshtest.TempDir(t, "fwdcfg-") // 0755: the target's user reaches its socket
	// Servers on the target's side (the same machine): each greets.
	greet := func(network, addr, hello string) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		if network == "unix" {
			os.Chmod(addr, 0o666)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, hello)
				c.Close()
			}
		}()
	}
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvAddr := srv.Addr().String()
	srv.Close()
	greet("tcp", srvAddr, "greetings over tcp\n")
	remoteSock := filepath.Join(dir, "remote.sock")
	greet("unix", remoteSock, "greetings over a socket\n")
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(free.Addr().String())
	free.Close()
	localSock := filepath.Join(dir, "local.sock")

	cfg := filepath.Join(dir, "config")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("Host web1\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n"+
		"  LocalForward %s %s\n  LocalForward %s %s\n",
		tg.s.Port, tg.u.Name, tg.key.Path, tg.kh, port, srvAddr, localSock, remoteSock)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(bin, "-F", cfg, "forward", "web1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	r := bufio.NewReader(stderr)
	var said []string
	for len(said) < 2 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("spindle forward web1 said %q, then %v", said, err)
		}
		said = append(said, line)
	}
	for _, via := range []struct{ network, addr, want string }{
		{"tcp", "127.0.0.1:" + port, "greetings over tcp\n"},
		{"unix", localSock, "greetings over a socket\n"},
	} {
		c, err := net.Dial(via.network, via.addr)
		if err != nil {
			t.Fatalf("%s (spindle forward said %q): %v", via.addr, said, err)
		}
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(b) != via.want {
			t.Fatalf("through ssh_config's LocalForward %s: %q, %v", via.addr, b, err)
		}
	}
	if fi, err := os.Stat(localSock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the local socket: %v, %v; want mode 0600", fi, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v", err)
	}
	if _, err := os.Stat(localSock); !os.IsNotExist(err) {
		t.Errorf("the local socket outlives the run: %v", err)
	}
}
