package integration_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
)

// First contact uploads the agent into the user's private cache
// dir; the second contact runs it from there without an upload.
func TestSSHFirstAndCachedContact(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/bash")
	if fs := agentFiles(tg.u); len(fs) != 0 {
		t.Fatalf("fresh user already has cached agents: %v", fs)
	}

	ctl, cx := mustConnect(t, tg, tg.opts())
	if out := run(t, cx, "uname", "-a"); !strings.Contains(out, "Linux") {
		t.Fatalf("uname -a: %q", out)
	}
	if out := run(t, cx, "id", "-un"); strings.TrimSpace(out) != tg.u.Name {
		t.Fatalf("runs as %q, want %s", out, tg.u.Name)
	}
	h := cx.Hello()
	if h.UID != tg.u.UID {
		t.Fatalf("hello uid %d, want %d", h.UID, tg.u.UID)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if err := sys.Ping(ctx, cx); err != nil {
		t.Fatalf("sys.Ping: %v", err)
	}
	info, err := sys.Info(ctx, cx)
	if err != nil {
		t.Fatalf("sys.Info: %v", err)
	}
	if info.User != tg.u.Name || info.Home != tg.u.Home || info.OS != "linux" {
		t.Errorf("sys.Info: user %q home %q os %q; want %s %s linux", info.User, info.Home, info.OS, tg.u.Name, tg.u.Home)
	}
	first := logText(tg.logs)
	agent := oneAgentFile(t, tg.u)
	if want := tg.u.CacheDirs()[0]; filepath.Dir(agent) != want {
		t.Errorf("agent cached in %s, want the first candidate %s", filepath.Dir(agent), want)
	}
	checkPrivate(t, tg.u, agent)
	before := inodeOf(t, agent)
	ctl.Close()
	waitGone(t, h.PID)

	_, cx2 := mustConnect(t, tg, tg.opts())
	if out := run(t, cx2, "echo", "again"); out != "again\n" {
		t.Fatalf("second contact: %q", out)
	}
	if cx2.Hello().PID == h.PID {
		t.Fatalf("second contact reached the first agent (pid %d)", h.PID)
	}
	if after := inodeOf(t, oneAgentFile(t, tg.u)); after != before {
		t.Errorf("the cached agent was rewritten on second contact (%s → %s): not cached", before, after)
	}
	second := logText(tg.logs)
	t.Logf("first contact logs:\n%s\nsecond contact logs:\n%s", first, second)
	// Visible at debug level: the wording is bootstrap's; be tolerant.
	if !regexp.MustCompile(`(?i)upload|send|transfer|deliver`).MatchString(first) {
		t.Errorf("first contact logged nothing about uploading the agent")
	}
	if !regexp.MustCompile(`(?i)cache`).MatchString(second) {
		t.Errorf("second contact logged nothing about a cached agent")
	}
}

// checkPrivate: the cache dir and file belong to the user, 0700 dir.
func checkPrivate(t *testing.T, u *sshtest.User, agent string) {
	t.Helper()
	for _, p := range []string{filepath.Dir(agent), agent} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if int(st.Uid) != u.UID {
			t.Errorf("%s owned by uid %d, want %d", p, st.Uid, u.UID)
		}
		if st.Mode&0o022 != 0 {
			t.Errorf("%s has mode %o: writable by others", p, st.Mode&0o777)
		}
	}
	var st syscall.Stat_t
	syscall.Lstat(filepath.Dir(agent), &st)
	if st.Mode&0o077 != 0 {
		t.Errorf("cache dir mode %o, want 0700", st.Mode&0o777)
	}
}

// The first stage survives every login shell: it is one `exec sh -c '…'` line.
func TestSSHLoginShells(t *testing.T) {
	t.Parallel()
	shells := []string{"/bin/bash", "/bin/dash", "/usr/bin/zsh", "/usr/bin/fish", "/usr/bin/tcsh", "busybox-ash"}
	for _, sh := range shells {
		t.Run(filepath.Base(sh), func(t *testing.T) {
			t.Parallel()
			sshtest.Require(t)
			if sh == "busybox-ash" {
				sshtest.RequireShell(t, "/bin/busybox")
				// sshd runs `$SHELL -c cmd` with argv[0] = basename: a
				// symlink named ash makes busybox act as ash.
				sh = filepath.Join(sshtest.TempDir(t, "ash-"), "ash")
				if err := os.Symlink("/bin/busybox", sh); err != nil {
					t.Fatal(err)
				}
			} else {
				sshtest.RequireShell(t, sh)
			}
			tg := newTarget(t, sh)
			_, cx := mustConnect(t, tg, tg.opts())
			if out := run(t, cx, "echo", "ok"); out != "ok\n" {
				t.Fatalf("echo ok: %q", out)
			}
			// Cached contact through the same shell.
			ctl2, cx2 := mustConnect(t, tg, tg.opts())
			if out := run(t, cx2, "echo", "ok"); out != "ok\n" {
				t.Fatalf("cached: echo ok: %q", out)
			}
			ctl2.Close()
		})
	}
}

// Login scripts that print (even a fake hello) do not break the start and
// never reach a command's output. Each case names the file its shell
// reads for a command over SSH (sshd runs `shell -c cmd`, not a login
// shell): its noise must reach the session, or the test proves nothing.
func TestSSHLoginNoise(t *testing.T) {
	t.Parallel()
	const noise = "NOISE from %s: SPINDLE-HELLO 0000 {\"proto\":1} motd-like text"
	cases := []struct {
		shell string
		files map[string]string
		reads string // which of files the shell reads: its noise must reach the session
	}{
		{"/bin/bash", map[string]string{
			".bashrc":  fmt.Sprintf("echo '%s'; echo 'bashrc stderr' >&2\n", fmt.Sprintf(noise, ".bashrc")),
			".profile": fmt.Sprintf("echo '%s'\n", fmt.Sprintf(noise, ".profile")),
		}, ".bashrc"},
		{"/usr/bin/zsh", map[string]string{".zshenv": fmt.Sprintf("echo '%s'\n", fmt.Sprintf(noise, ".zshenv"))}, ".zshenv"},
		{"/usr/bin/fish", map[string]string{".config/fish/config.fish": fmt.Sprintf("echo '%s'\n", fmt.Sprintf(noise, "config.fish"))}, "config.fish"},
		{"/usr/bin/tcsh", map[string]string{".cshrc": fmt.Sprintf("echo '%s'\n", fmt.Sprintf(noise, ".cshrc"))}, ".cshrc"},
	}
	for _, tc := range cases {
		t.Run(filepath.Base(tc.shell), func(t *testing.T) {
			t.Parallel()
			sshtest.Require(t)
			sshtest.RequireShell(t, tc.shell)
			tg := newTarget(t, tc.shell)
			for name, content := range tc.files {
				tg.u.WriteFile(t, name, content, 0o644)
			}
			want := fmt.Sprintf(noise, tc.reads)
			for _, what := range []string{"first contact", "cached contact"} {
				ctl, cx := mustConnect(t, tg, tg.opts())
				if out := run(t, cx, "echo", "ok"); out != "ok\n" {
					t.Fatalf("%s: echo ok: %q", what, out)
				}
				// The start skipped the noise (logged at debug): proof
				// that the login script printed into this session.
				var skipped []string
				for _, e := range tg.logs.FilterMessage("skipped output before hello").All() {
					skipped = append(skipped, fmt.Sprint(e.ContextMap()["line"]))
				}
				if !slices.Contains(skipped, want) {
					t.Fatalf("%s: %s's noise did not reach the session: the start skipped %q\n%s", what, tc.reads, skipped, logText(tg.logs))
				}
				ctl.Close()
			}
		})
	}
}

// Login scripts that print without a final newline (a terminal title
// escape, a greeting) glue their output to the front of the first stage's
// request line and of the agent's hello: both contacts still connect (not
// at the timeout: that fails the connect), and the noise is logged at
// debug level without its control characters.
func TestSSHLoginNoiseWithoutNewline(t *testing.T) {
	t.Parallel()
	const noise = `printf '\033]0;spindle-title\007NOISE-NO-NEWLINE from %s'`
	cases := []struct {
		shell, file string
	}{
		{"/bin/bash", ".bashrc"},
		{"/usr/bin/zsh", ".zshenv"},
		{"/usr/bin/fish", ".config/fish/config.fish"},
		{"/usr/bin/tcsh", ".cshrc"},
	}
	for _, tc := range cases {
		t.Run(filepath.Base(tc.shell), func(t *testing.T) {
			t.Parallel()
			sshtest.Require(t)
			sshtest.RequireShell(t, tc.shell)
			tg := newTarget(t, tc.shell)
			tg.u.WriteFile(t, tc.file, fmt.Sprintf(noise, filepath.Base(tc.file))+"\n", 0o644)
			for _, what := range []string{"first contact", "cached contact"} {
				ctl, cx := mustConnect(t, tg, tg.opts())
				if out := run(t, cx, "echo", "ok"); out != "ok\n" {
					t.Fatalf("%s: echo ok: %q", what, out)
				}
				logged := logText(tg.logs)
				if !strings.Contains(logged, "NOISE-NO-NEWLINE from "+filepath.Base(tc.file)) {
					t.Errorf("%s: the glued noise was not logged at debug level:\n%s", what, logged)
				}
				if strings.Contains(logged, "\x1b") || strings.Contains(logged, "\a") {
					t.Errorf("%s: the noise's escape sequence reached the log raw:\n%q", what, logged)
				}
				ctl.Close()
			}
		})
	}
}

// An unknown host key is refused by default, accepted and recorded with
// accept-new; a changed key is refused with a warning naming the
// known_hosts line, whatever the policy.
func TestSSHHostKeys(t *testing.T) {
	t.Parallel()
	t.Run("unknown-refused", func(t *testing.T) {
		t.Parallel()
		tg := newTarget(t, "/bin/sh")
		tg.kh = filepath.Join(sshtest.TempDir(t, "kh-"), "known_hosts")
		os.WriteFile(tg.kh, nil, 0o600)
		_, _, err := connect(t, tg, tg.opts())
		if !errors.Is(err, spindle.ErrHostKey) {
			t.Fatalf("unknown host key: want ErrHostKey, got %v", err)
		}
		if b, _ := os.ReadFile(tg.kh); len(b) != 0 {
			t.Fatalf("strict policy wrote known_hosts: %q", b)
		}
		if !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("error does not name the host: %v", err)
		}
		if len(tg.u.Pids()) != 0 {
			t.Errorf("something ran as the user after a refused host key")
		}
	})
	t.Run("unknown-accept-new", func(t *testing.T) {
		t.Parallel()
		tg := newTarget(t, "/bin/sh")
		tg.kh = filepath.Join(sshtest.TempDir(t, "kh-"), "known_hosts")
		os.WriteFile(tg.kh, nil, 0o600)
		o := tg.opts()
		o.HostKeyPolicy = ssh.HostKeyAcceptNew
		ctl, cx := mustConnect(t, tg, o)
		run(t, cx, "true")
		ctl.Close()
		b, _ := os.ReadFile(tg.kh)
		key := strings.Fields(tg.s.HostKeyLine(t))[2]
		if !strings.Contains(string(b), key) {
			t.Fatalf("accept-new did not record the host key; known_hosts is %q", b)
		}
		// Recorded so that a strict connection now trusts it.
		_, cx2 := mustConnect(t, tg, tg.opts())
		run(t, cx2, "true")
	})
	t.Run("changed-refused", func(t *testing.T) {
		t.Parallel()
		tg := newTarget(t, "/bin/sh")
		// Line 2 holds the server's (soon old) key: the error must say so.
		old, _ := os.ReadFile(tg.kh)
		os.WriteFile(tg.kh, append([]byte("# a comment line\n"), old...), 0o600)
		tg.s.RestartWithNewHostKey(t)
		for _, policy := range []ssh.HostKeyPolicy{"", ssh.HostKeyStrict, ssh.HostKeyAcceptNew} {
			o := tg.opts()
			o.HostKeyPolicy = policy
			_, _, err := connect(t, tg, o)
			if !errors.Is(err, spindle.ErrHostKey) {
				t.Fatalf("policy %q: changed host key: want ErrHostKey, got %v", policy, err)
			}
			if !strings.Contains(err.Error(), tg.kh+":2") {
				t.Errorf("policy %q: the error does not name the known_hosts line %s:2: %v", policy, tg.kh, err)
			}
			if !regexp.MustCompile(`(?i)chang`).MatchString(err.Error()) {
				t.Errorf("policy %q: the error does not say the key changed: %v", policy, err)
			}
		}
		if b, _ := os.ReadFile(tg.kh); !strings.HasPrefix(string(b), "# a comment line\n"+string(old)) || len(b) != len(old)+len("# a comment line\n") {
			t.Errorf("known_hosts was modified after a changed key: %q", b)
		}
	})
}

// Authentication failures are ErrAuth, quickly, with no prompt.
func TestSSHAuthFailures(t *testing.T) {
	t.Parallel()
	t.Run("wrong-password", func(t *testing.T) {
		t.Parallel()
		tg := newTarget(t, "/bin/sh")
		o := tg.opts()
		o.IdentityFiles = nil
		o.Password = "not-" + tg.u.Password
		start := time.Now()
		_, _, err := connect(t, tg, o)
		if !errors.Is(err, spindle.ErrAuth) {
			t.Fatalf("wrong password: want ErrAuth, got %v", err)
		}
		t.Logf("wrong password: %v (%v)", err, time.Since(start))
	})
	t.Run("right-password", func(t *testing.T) {
		t.Parallel()
		tg := newTarget(t, "/bin/sh")
		o := tg.opts()
		o.IdentityFiles = nil
		o.Password = tg.u.Password
		_, cx := mustConnect(t, tg, o)
		run(t, cx, "true")
	})
	t.Run("no-acceptable-key", func(t *testing.T) {
		t.Parallel()
		tg := newTarget(t, "/bin/sh")
		o := tg.opts()
		o.IdentityFiles = []string{sshtest.ClientKey(t).Path} // not authorized
		_, _, err := connect(t, tg, o)
		if !errors.Is(err, spindle.ErrAuth) {
			t.Fatalf("unauthorized key: want ErrAuth, got %v", err)
		}
		if !strings.Contains(err.Error(), tg.u.Name) && !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("auth error names neither user nor host: %v", err)
		}
	})
}

// Nothing listening: a prompt, clear error naming the address.
func TestSSHConnectionRefused(t *testing.T) {
	t.Parallel()
	sshtest.Require(t)
	port := sshtest.ClosedPort(t)
	only := true
	o := ssh.Options{Host: "127.0.0.1", Port: port, User: "nobody", ConfigFile: "none", IdentitiesOnly: &only,
		KnownHostsFiles: []string{filepath.Join(t.TempDir(), "known_hosts")}, ConnectTimeout: 10 * time.Second}
	start := time.Now()
	_, _, err := connect(t, nil, o)
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("connection refused took %v", el)
	}
	if !strings.Contains(lower(err), "refused") || !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Errorf("unclear error for a closed port %d: %v", port, err)
	}
	if errors.Is(err, spindle.ErrAuth) || errors.Is(err, spindle.ErrHostKey) {
		t.Errorf("connection refused classified as auth/host key: %v", err)
	}
}

// A user whose every candidate cache dir is unusable gets a clear error;
// one whose first candidate is unusable falls back to the next.
func TestSSHCacheDirs(t *testing.T) {
	t.Parallel()
	t.Run("not-owned", func(t *testing.T) {
		t.Parallel()
		tg := newTarget(t, "/bin/sh")
		// ~/.cache is the user's; every candidate leaf dir is root's.
		tg.u.WriteFile(t, ".cache/.keep", "", 0o644)
		os.Chown(filepath.Join(tg.u.Home, ".cache"), tg.u.UID, tg.u.GID)
		for _, d := range tg.u.CacheDirs() {
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		checkNoCacheDir(t, tg)
	})
	t.Run("noexec", func(t *testing.T) {
		t.Parallel()
		tg := newTarget(t, "/bin/sh")
		for _, d := range tg.u.CacheDirs() {
			sshtest.MountTmpfs(t, d, "noexec,mode=0700,uid="+strconv.Itoa(tg.u.UID)+",gid="+strconv.Itoa(tg.u.GID))
		}
		checkNoCacheDir(t, tg)
	})
	t.Run("fallback", func(t *testing.T) {
		t.Parallel()
		tg := newTarget(t, "/bin/sh")
		dirs := tg.u.CacheDirs()
		sshtest.MountTmpfs(t, dirs[0], "noexec,mode=0700,uid="+strconv.Itoa(tg.u.UID)+",gid="+strconv.Itoa(tg.u.GID))
		_, cx := mustConnect(t, tg, tg.opts())
		run(t, cx, "true")
		if got := filepath.Dir(oneAgentFile(t, tg.u)); got != dirs[1] {
			t.Errorf("agent cached in %s, want the next candidate %s", got, dirs[1])
		}
	})
}

func checkNoCacheDir(t *testing.T, tg *target) {
	t.Helper()
	start := time.Now()
	_, _, err := connect(t, tg, tg.opts())
	if err == nil {
		t.Fatalf("connected with no usable cache dir (agents: %v)", agentFiles(tg.u))
	}
	t.Logf("error after %v: %v", time.Since(start), err)
	if !strings.Contains(lower(err), "cache") {
		t.Errorf("the error does not mention the cache dirs: %v", err)
	}
	if !strings.Contains(err.Error(), tg.u.CacheDirs()[0]) {
		t.Errorf("the error does not name the candidate %s: %v", tg.u.CacheDirs()[0], err)
	}
	if errors.Is(err, spindle.ErrAuth) || errors.Is(err, spindle.ErrHostKey) {
		t.Errorf("classified as auth/host key: %v", err)
	}
}

// A cached agent whose bytes changed is detected and replaced.
func TestSSHTamperedAgent(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"corrupted", "truncated"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			tg := newTarget(t, "/bin/sh")
			agent := agentAfterOneRun(t, tg)
			good := sha256File(t, agent)
			tamper(t, agent, how)
			bad := sha256File(t, agent)
			if bad == good {
				t.Fatal("tampering changed nothing")
			}
			_, cx2 := mustConnect(t, tg, tg.opts())
			if out := run(t, cx2, "echo", "ok"); out != "ok\n" {
				t.Fatalf("echo ok: %q", out)
			}
			now := sha256File(t, oneAgentFile(t, tg.u))
			if now == bad {
				t.Fatalf("the tampered agent is still cached")
			}
			if now != good {
				t.Errorf("the replaced agent's sha256 is %s, want the original %s", now, good)
			}
			t.Logf("logs:\n%s", logText(tg.logs))
		})
	}
}

// agentAfterOneRun connects to tg once, waits until that agent has
// exited, and returns the one agent file it left in the cache.
func agentAfterOneRun(t *testing.T, tg *target) string {
	t.Helper()
	ctl, cx := mustConnect(t, tg, tg.opts())
	pid := cx.Hello().PID
	ctl.Close()
	waitGone(t, pid)
	return oneAgentFile(t, tg.u)
}

func tamper(t *testing.T, p, how string) {
	t.Helper()
	switch how {
	case "truncated":
		if err := os.Truncate(p, 4096); err != nil {
			t.Fatal(err)
		}
	default:
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fi, _ := f.Stat()
		junk := []byte(strings.Repeat("\xde\xad\xbe\xef", 16))
		if _, err := f.WriteAt(junk, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	}
}

// A remote agent killed during a call: the call fails with a disconnected
// error naming the host, well within the keepalive bound.
func TestSSHAgentKilled(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	o := tg.opts()
	o.KeepaliveInterval, o.KeepaliveCountMax = time.Second, 3
	bound := o.KeepaliveInterval*time.Duration(o.KeepaliveCountMax) + 2*time.Second
	_, cx := mustConnect(t, tg, o)
	res := make(chan error, 1)
	go func() {
		_, err := exec.Run(stdctx.Background(), cx, exec.Cmd{Argv: []string{"sleep", "100"}})
		res <- err
	}()
	waitProcess(t, tg.u, "sleep 100")
	start := time.Now()
	if err := syscall.Kill(cx.Hello().PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		t.Logf("failed after %v: %v", time.Since(start), err)
		if !errors.Is(err, spindle.ErrDisconnected) {
			t.Errorf("want ErrDisconnected, got %v", err)
		}
		if err != nil && !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("the error does not name the host: %v", err)
		}
	case <-time.After(bound):
		t.Fatalf("the call did not fail within %v of the agent's death", bound)
	}
	select {
	case <-cx.Done():
	case <-time.After(bound):
		t.Errorf("the context is not marked dead")
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 5*time.Second)
	defer cancel()
	if err := sys.Ping(ctx, cx); !errors.Is(err, spindle.ErrDisconnected) {
		t.Errorf("a call after the death: want ErrDisconnected, got %v", err)
	}
}

// A silently dead network (no FIN, no RST) is detected by the SSH
// keepalives within their bound.
func TestSSHNetworkBlackholed(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	p := sshtest.StartProxy(t, tg.s.Addr(), 0)
	host, portS, _ := strings.Cut(p.Addr(), ":")
	port, _ := strconv.Atoi(portS)
	kh := filepath.Join(sshtest.TempDir(t, "kh-"), "known_hosts")
	line := strings.Replace(tg.s.HostKeyLine(t), tg.s.KnownHostsName(), "["+host+"]:"+portS, 1)
	os.WriteFile(kh, []byte(line+"\n"), 0o600)
	o := tg.opts()
	o.Port, o.KnownHostsFiles = port, []string{kh}
	o.KeepaliveInterval, o.KeepaliveCountMax = time.Second, 3
	bound := o.KeepaliveInterval*time.Duration(o.KeepaliveCountMax+1) + 3*time.Second
	_, cx := mustConnect(t, tg, o)
	run(t, cx, "true")
	res := make(chan error, 1)
	go func() {
		_, err := exec.Run(stdctx.Background(), cx, exec.Cmd{Argv: []string{"sleep", "100"}})
		res <- err
	}()
	waitProcess(t, tg.u, "sleep 100")
	start := time.Now()
	p.Blackhole()
	select {
	case err := <-res:
		t.Logf("failed after %v: %v", time.Since(start), err)
		if !errors.Is(err, spindle.ErrDisconnected) {
			t.Errorf("want ErrDisconnected, got %v", err)
		}
		if el := time.Since(start); el < o.KeepaliveInterval {
			t.Errorf("failed after only %v: before any keepalive could be missed?", el)
		}
	case <-time.After(bound):
		t.Fatalf("the call did not fail within %v of the network's death", bound)
	}
}

// Over a slow link both contacts work, and the cached contact is cheap in
// what it sends: the first contact carries the agent, the cached one must
// not. The bytes are counted at the latency proxy, so the assertion holds
// whatever the machine's speed; how long the contacts take is measured by
// the bench rows ssh_connect_cached_10ms and ssh_connect_cold_10ms.
func TestSSHLatencyCachedContactSendsNoAgent(t *testing.T) {
	t.Parallel()
	const oneWay = 25 * time.Millisecond
	tg := newTarget(t, "/bin/sh")
	p := sshtest.StartProxy(t, tg.s.Addr(), oneWay)
	host, portS, _ := strings.Cut(p.Addr(), ":")
	kh := filepath.Join(sshtest.TempDir(t, "kh-"), "known_hosts")
	line := strings.Replace(tg.s.HostKeyLine(t), tg.s.KnownHostsName(), "["+host+"]:"+portS, 1)
	os.WriteFile(kh, []byte(line+"\n"), 0o600)
	o := tg.opts()
	o.Port, o.KnownHostsFiles = p.Port(), []string{kh}

	var sent [2]int64
	for i := range sent {
		before, _ := p.Forwarded()
		ctl, cx := mustConnect(t, tg, o)
		run(t, cx, "true")
		after, _ := p.Forwarded()
		sent[i] = after - before
		t.Logf("contact %d sent %d bytes", i+1, sent[i])
		pid := cx.Hello().PID
		ctl.Close()
		waitGone(t, pid)
	}
	// The agent travels compressed (gzip or zstd), at about a third of its
	// size; what a contact sends besides it (SSH's handshake, the first
	// stage, the hello) is some kilobytes.
	agent, err := bootstrap.Default().Agent(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatalf("the agent binary: %v", err)
	}
	if least := int64(agent.Size) / 8; sent[0] < least {
		t.Errorf("the first contact sent %d bytes: less than an eighth of the agent's %d, so it did not carry it", sent[0], agent.Size)
	}
	if most := int64(64 << 10); sent[1] > most {
		t.Errorf("the cached contact sent %d bytes, more than %d: it carried (part of) the agent again", sent[1], most)
	}
}

// Agents of other controller versions do not pile up in the target's
// (RAM-backed) cache: a starting agent keeps the newest two others.
func TestSSHCachePruned(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	ours := agentAfterOneRun(t, tg)
	dir := filepath.Dir(ours)
	for i, name := range []string{"agent-old1-aaaa", "agent-old2-bbbb", "agent-old3-cccc", "agent-old4-dddd"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("an older controller's agent"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, tg.u.UID, tg.u.UID); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-time.Duration(i+1) * time.Hour)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	_, cx2 := mustConnect(t, tg, tg.opts())
	if err := sys.Ping(stdctx.Background(), cx2); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range agentFiles(tg.u) {
		left = append(left, filepath.Base(p))
	}
	slices.Sort(left)
	want := []string{filepath.Base(ours), "agent-old1-aaaa", "agent-old2-bbbb"}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Fatalf("cache after a start: %v, want %v", left, want)
	}
}

// TestSSHSessionsRefused: a server that allows no sessions fails the
// connect with an error that says so and where to look.
func TestSSHSessionsRefused(t *testing.T) {
	t.Parallel()
	tg := newTargetWith(t, "/bin/sh", sshtest.Options{Extra: []string{"MaxSessions 0"}})
	_, _, err := connect(t, tg, tg.opts())
	if err == nil || !strings.Contains(err.Error(), "MaxSessions") {
		t.Fatalf("connect to a server with MaxSessions 0: %v; want an error naming MaxSessions", err)
	}
}

// The agent cache outlives the user's $XDG_RUNTIME_DIR, which pam_systemd
// removes when the user's last session ends (10 s later by default): with
// XDG_RUNTIME_DIR set in the session, as logind sets it, the agent is
// cached in /dev/shm, and a connection made after the runtime directory
// was removed and made anew (a logout, then the next login) runs the
// cached agent instead of uploading it again.
func TestCacheOutlivesRuntimeDir(t *testing.T) {
	t.Parallel()
	// Not under t.TempDir, whose parent only root may enter: the user
	// must reach its runtime dir.
	parent, err := os.MkdirTemp("", "spindle-runtime-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	xdg := filepath.Join(parent, "user-runtime")
	tg := newTargetWith(t, "/bin/sh", sshtest.Options{Extra: []string{"SetEnv XDG_RUNTIME_DIR=" + xdg}})
	login := func() {
		t.Helper()
		if err := os.Mkdir(xdg, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(xdg, tg.u.UID, tg.u.GID); err != nil {
			t.Fatal(err)
		}
	}
	login()
	ctl, cx := mustConnect(t, tg, tg.opts())
	// The runtime dir is there and usable: the first stage passed it over
	// for its order, not for a fault.
	if out := run(t, cx, "sh", "-c", `touch "$XDG_RUNTIME_DIR/x" && echo "$XDG_RUNTIME_DIR"`); strings.TrimSpace(out) != xdg {
		t.Fatalf("the session's XDG_RUNTIME_DIR is %q, want %s", out, xdg)
	}
	first := logText(tg.logs)
	agent := oneAgentFile(t, tg.u)
	if want := tg.u.CacheDirs()[0]; filepath.Dir(agent) != want {
		t.Errorf("agent cached in %s, want %s", filepath.Dir(agent), want)
	}
	h := cx.Hello()
	ctl.Close()
	waitGone(t, h.PID)

	if err := os.RemoveAll(xdg); err != nil { // the last session ended
		t.Fatal(err)
	}
	login()
	_, cx2 := mustConnect(t, tg, tg.opts())
	run(t, cx2, "true")
	second := logText(tg.logs)
	if !strings.Contains(first, "agent uploaded") || !strings.Contains(second, "agent cached") {
		t.Fatalf("want an upload, then the cached agent after the runtime dir was removed; logs:\n%s\n---\n%s", first, second)
	}
}

// ProxyCommand from ssh_config, in its classic bastion form: the real
// OpenSSH client's `ssh -W %h:%p gateway` (here the same sshd, which
// forwards TCP to itself) carries the connection; the agent starts over
// it as over any other.
func TestSSHProxyCommand(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	if _, err := osexec.LookPath("ssh"); err != nil {
		sshtest.CannotRun(t, "no OpenSSH client (ssh) to be the ProxyCommand (apt-get install openssh-client)")
	}
	dir := sshtest.TempDir(t, "proxycommand-")
	cfg, mark := filepath.Join(dir, "config"), filepath.Join(dir, "ran")
	common := fmt.Sprintf("  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
		tg.s.Port, tg.u.Name, tg.key.Path, tg.kh)
	config := "Host behind\n" + common +
		fmt.Sprintf("  ProxyCommand sh -c 'echo %%n > %s; exec ssh -F %s -W %%h:%%p -q gateway'\n", mark, cfg) +
		"Host gateway\n" + common
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	o := ssh.Options{Host: "behind", ConfigFile: cfg, ConnectTimeout: 20 * time.Second}
	_, cx := mustConnect(t, tg, o)
	if out := run(t, cx, "id", "-un"); strings.TrimSpace(out) != tg.u.Name {
		t.Fatalf("through ProxyCommand: runs as %q, want %s", out, tg.u.Name)
	}
	if b, err := os.ReadFile(mark); err != nil || strings.TrimSpace(string(b)) != "behind" {
		t.Fatalf("the ProxyCommand did not run with %%n expanded: %q, %v", b, err)
	}

	// A gateway that refuses the forward: the error carries ssh's words.
	o.ProxyCommand = "ssh -F " + cfg + " -W 127.0.0.1:" + strconv.Itoa(sshtest.ClosedPort(t)) + " gateway"
	_, _, err := connect(t, nil, o)
	if err == nil {
		t.Fatal("connected through a forward to a closed port")
	}
	t.Logf("refused forward: %v", err)
	if !strings.Contains(err.Error(), "ProxyCommand") || !strings.Contains(lower(err), "refused") {
		t.Errorf("unclear error for a refused forward: %v", err)
	}
}

// An account whose login shell runs no commands (/bin/false, nologin)
// fails with what the session did: its exit status, what it printed, and
// when it printed nothing, the usual cause.
func TestSSHShellRunsNoCommands(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ shell, want string }{
		{"/bin/false", "exited with status 1 and printed nothing: the account's login shell must run"},
		{"/usr/sbin/nologin", "This account is currently not available"},
	} {
		sshtest.RequireShell(t, c.shell)
		tg := newTarget(t, c.shell)
		_, _, err := connect(t, tg, tg.opts())
		if err == nil {
			t.Fatalf("%s: connected", c.shell)
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "ssh:127.0.0.1") {
			t.Errorf("%s: %v; want it to name the host and say %q", c.shell, err, c.want)
		}
	}
}

// SendEnv and SetEnv reach the agent, and so every command, as they reach
// an ssh session: what the server's AcceptEnv takes (here LANG LC_*), the
// rest left out without failing the connection. Not parallel: it sets a
// variable of this process.
func TestSSHSendEnv(t *testing.T) {
	tg := newTarget(t, "/bin/sh")
	t.Setenv("LC_SPINDLE_SENT", "sent value")
	t.Setenv("LC_SPINDLE_UNSENT", "not asked for")
	cfg := tg.sshConfig(t, "envhost", "  SendEnv LC_SPINDLE_SENT\n  SetEnv LC_SPINDLE_SET=\"set value\" SPINDLE_REFUSED=x\n")
	_, cx := mustConnect(t, tg, ssh.Options{Host: "envhost", ConfigFile: cfg, SetEnv: []string{"LC_SPINDLE_OPT=from options"}})
	out := run(t, cx, "sh", "-c", `printf '%s|%s|%s|%s|%s' "$LC_SPINDLE_SENT" "$LC_SPINDLE_SET" "$LC_SPINDLE_OPT" "${LC_SPINDLE_UNSENT-unset}" "${SPINDLE_REFUSED-unset}"`)
	if want := "sent value|set value|from options|unset|unset"; out != want {
		t.Errorf("the remote environment: %q, want %q", out, want)
	}
}

// AddKeysToAgent: a key whose passphrase was asked for once goes to the
// user's real ssh-agent after it has signed, so the next connection asks
// nothing; without the option the agent is left alone.
func TestSSHAddKeysToAgent(t *testing.T) {
	t.Parallel()
	sock := startSSHAgent(t)
	tg := newTarget(t, "/bin/sh")
	if out, err := osexec.Command("ssh-keygen", "-q", "-p", "-N", "sesame", "-f", tg.key.Path).CombinedOutput(); err != nil {
		t.Fatalf("encrypting the key: %v %s", err, out)
	}
	listed := func() string {
		l := osexec.Command("ssh-add", "-l")
		l.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		b, _ := l.Output()
		return string(b)
	}
	asked := 0
	connectWith := func(addKeys string) error {
		o := tg.opts()
		o.IdentityAgent = sock
		o.AddKeysToAgent = addKeys
		o.PasswordPrompt = func(string) (string, error) { asked++; return "sesame", nil }
		ctl, cx, err := connect(t, nil, o)
		if err == nil {
			_, err = sys.Info(stdctx.Background(), cx)
			ctl.Close()
		}
		return err
	}

	if err := connectWith("no"); err != nil || asked != 1 {
		t.Fatalf("AddKeysToAgent no: %v, asked %d times", err, asked)
	}
	if got := listed(); strings.Contains(got, tg.key.Path) {
		t.Fatalf("AddKeysToAgent no added the key: %q", got)
	}
	if err := connectWith("yes"); err != nil || asked != 2 {
		t.Fatalf("AddKeysToAgent yes: %v, asked %d times", err, asked)
	}
	if got := listed(); !strings.Contains(got, tg.key.Path) || !strings.Contains(got, "ED25519") {
		t.Fatalf("after AddKeysToAgent yes the agent lists %q; want the key, named by its file", got)
	}
	if err := connectWith("yes"); err != nil || asked != 2 {
		t.Fatalf("the next connection: %v, asked %d times; want the key from the agent, no question", err, asked)
	}
}

// A login shell stuck in its start-up files (~/.bashrc sleeping) cannot
// hold a connect past its context: the connect fails as a timeout naming
// the host, directly and for a hop an agent starts, long before the
// shell would go on. (Closing the session does not end a read of its
// output until sshd closes it, which it does when the command exits.)
func TestSSHStuckLoginShell(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/bash")
	tg.u.WriteFile(t, ".bashrc", "sleep 600\n", 0o644)
	connectWithin := func(t *testing.T, connect func(stdctx.Context) error) {
		t.Helper()
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 2*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- connect(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, spindle.ErrTimeout) || !strings.Contains(err.Error(), "ssh:127.0.0.1") {
				t.Errorf("a connect to a stuck login shell: %v; want a timeout naming the host", err)
			}
		case <-time.After(60 * time.Second): // a hang: the shell sleeps ten minutes
			t.Fatal("the connect outlived its context, waiting for the login shell")
		}
	}
	t.Run("direct", func(t *testing.T) {
		connectWithin(t, func(ctx stdctx.Context) error {
			ctl := spindle.NewController(spindle.Options{})
			defer ctl.Close()
			_, err := ctl.Connect(ctx, tg.opts())
			return err
		})
	})
	t.Run("hop through an agent", func(t *testing.T) {
		first := newTarget(t, "/bin/sh")
		_, cx := throughFirst(t, first)
		connectWithin(t, func(ctx stdctx.Context) error {
			_, err := cx.Connect(ctx, tg.opts())
			return err
		})
	})
}
