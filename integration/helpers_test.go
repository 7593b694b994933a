package integration_test

import (
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/services/exec"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	// The agent shipped to the SSH targets (this machine) is the one
	// bootstrap.Default() finds: $SPINDLE_AGENT, built here if unset.
	given := os.Getenv("SPINDLE_AGENT") != ""
	agent, err := testagent.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: build the agent:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "integration: goroutines leaked:", err)
			code = 1
		}
	}
	if !given {
		os.RemoveAll(filepath.Dir(agent))
	}
	os.Exit(code)
}

// target is one sshd, one user on it, one authorized client key and a
// known_hosts file that trusts the server.
type target struct {
	s    *sshtest.Server
	u    *sshtest.User
	key  *sshtest.Key
	kh   string
	logs *observer.ObservedLogs
}

func newTarget(t *testing.T, shell string) *target {
	t.Helper()
	return newTargetWith(t, shell, sshtest.Options{})
}

// newTargetWith is newTarget with a server started with opts.
func newTargetWith(t *testing.T, shell string, opts sshtest.Options) *target {
	t.Helper()
	s := sshtest.StartWith(t, opts)
	u := sshtest.CreateUser(t, shell)
	k := sshtest.ClientKey(t)
	s.Authorize(t, u, k)
	return &target{s: s, u: u, key: k, kh: s.KnownHosts(t)}
}

// opts are SSH options for the target that depend on nothing in root's
// ~/.ssh or in an ssh-agent.
func (tg *target) opts() ssh.Options {
	only := true
	return ssh.Options{
		Host:            "127.0.0.1",
		Port:            tg.s.Port,
		User:            tg.u.Name,
		ConfigFile:      "none",
		IdentityFiles:   []string{tg.key.Path},
		IdentitiesOnly:  &only,
		KnownHostsFiles: []string{tg.kh},
		ConnectTimeout:  20 * time.Second,
	}
}

// sshConfig writes an ssh_config whose Host alias reaches tg as opts()
// does, with extra lines ("  Keyword value\n" each) for the alias, and
// returns its path.
func (tg *target) sshConfig(t *testing.T, alias, extra string) string {
	t.Helper()
	cfg := filepath.Join(sshtest.TempDir(t, "ssh-config-"), "config")
	config := fmt.Sprintf("Host %s\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n%s",
		alias, tg.s.Port, tg.u.Name, tg.key.Path, tg.kh, extra)
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// connect starts a controller (closed when t ends) and connects it
// through c. Logs at debug level are kept in tg.logs when tg is not nil.
func connect(t *testing.T, tg *target, c spindle.Connector) (*spindle.Controller, *spindle.Context, error) {
	t.Helper()
	return connectWith(t, tg, c, spindle.Options{})
}

// connectWith is connect with controller options (the logger and
// verbosity are connect's).
func connectWith(t *testing.T, tg *target, c spindle.Connector, opts spindle.Options) (*spindle.Controller, *spindle.Context, error) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	if tg != nil {
		tg.logs = logs
	}
	opts.Logger, opts.Verbosity = zap.New(core), 2
	ctl := spindle.NewController(opts)
	t.Cleanup(func() { ctl.Close() })
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	cx, err := ctl.Connect(ctx, c)
	return ctl, cx, err
}

// throughFirst connects to first, the hop the test's later hops start
// from, and returns a context for the test's calls (90 s, cancelled when
// the test ends) with first's context.
func throughFirst(t *testing.T, first *target) (stdctx.Context, *spindle.Context) {
	t.Helper()
	_, cx := mustConnect(t, first, first.opts())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx, cx
}

// mustConnect is connect that fails t on error.
func mustConnect(t *testing.T, tg *target, c spindle.Connector) (*spindle.Controller, *spindle.Context) {
	t.Helper()
	ctl, cx, err := connect(t, tg, c)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return ctl, cx
}

// run runs argv on cx and returns its stdout; a failure or non-zero exit
// fails t.
func run(t *testing.T, cx *spindle.Context, argv ...string) string {
	t.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	res, err := exec.Run(ctx, cx, exec.Cmd{Argv: argv})
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d, stderr %q", argv, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

// logText is every log message and field recorded, one per line.
func logText(logs *observer.ObservedLogs) string {
	if logs == nil {
		return ""
	}
	var b strings.Builder
	for _, e := range logs.All() {
		b.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			fmt.Fprintf(&b, " %s=%v", k, v)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// agentFiles lists the cached agent files of u, in every candidate dir.
func agentFiles(u *sshtest.User) []string {
	var out []string
	for _, d := range u.CacheDirs() {
		m, _ := filepath.Glob(filepath.Join(d, "agent-*"))
		for _, p := range m {
			if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
				out = append(out, p)
			}
		}
	}
	return out
}

// oneAgentFile is the single cached agent file of u.
func oneAgentFile(t *testing.T, u *sshtest.User) string {
	t.Helper()
	fs := agentFiles(u)
	if len(fs) != 1 {
		t.Fatalf("want one cached agent in %v, found %v", u.CacheDirs(), fs)
	}
	return fs[0]
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// waitGone waits until process pid has exited (an agent after its
// controller closed), so its executable can be rewritten.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	// A pidfd polls readable once the process has exited (a zombie
	// counts): no polling of /proc.
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 10_000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd of %d: %v", pid, err)
		}
		if n == 0 {
			t.Fatalf("pid %d still running 10s later", pid)
		}
		return
	}
}

// waitProcess waits until u runs a process whose command line starts with
// prefix, and returns its pid.
func waitProcess(t *testing.T, u *sshtest.User, prefix string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range u.Pids() {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			if strings.HasPrefix(strings.ReplaceAll(string(b), "\x00", " "), prefix) {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no process %q of %s within 10s", prefix, u.Name)
	return 0
}

// inodeOf identifies a file's current version: inode and mtime.
func inodeOf(t *testing.T, p string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("ino=%d mtime=%d.%09d", st.Ino, st.Mtim.Sec, st.Mtim.Nsec)
}

// lower is strings.ToLower, for tolerant message checks.
func lower(err error) string {
	if err == nil {
		return ""
	}
	return strings.ToLower(err.Error())
}

// startSSHAgent starts a real ssh-agent on a socket of its own, killed
// when t ends, and returns the socket. It says loudly when the OpenSSH
// client tools are missing.
func startSSHAgent(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"ssh-agent", "ssh-add", "ssh-keygen"} {
		if _, err := osexec.LookPath(tool); err != nil {
			sshtest.CannotRun(t, "no "+tool+" (apt-get install openssh-client)")
		}
	}
	sock := filepath.Join(sshtest.TempDir(t, "agent-"), "agent.sock")
	// ssh-agent -a returns once its socket listens; it prints its pid.
	out, err := osexec.Command("ssh-agent", "-s", "-a", sock).Output()
	if err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	m := regexp.MustCompile(`SSH_AGENT_PID=(\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("ssh-agent printed no pid: %q", out)
	}
	t.Cleanup(func() { osexec.Command("kill", m[1]).Run() })
	return sock
}
