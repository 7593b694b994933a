// Package sshtest is the project's one SSH server fixture, for the tests,
// the benchmark harness (cmd/spindle-bench) and the demo:
//
//   - Server is a real, throwaway OpenSSH server: its own sshd_config,
//     host keys, authorized keys and log in a temporary directory,
//     listening on 127.0.0.1 on a free port. Tests start it with Start or
//     StartWith (killed when the test ends); the bench with Launch and
//     Close.
//   - User and Key are throwaway Unix users (any login shell, optionally
//     with passwordless sudo) and client keys; KnownHosts files hold the
//     server's host key. A TCP proxy (proxy.go) adds latency.
//   - Embedded (embedded.go) is an SSH server written in Go, for the demo,
//     which must run where no sshd is installed.
//
// The OpenSSH parts need root (to run sshd and create users) and
// /usr/sbin/sshd: without them a test skips with a loud message naming
// scripts/test-deps.sh, and fails instead when CI=true, so that CI can
// never pass by skipping.
//
// The system sshd is never started or touched.
package sshtest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit"

	"github.com/spindle-rpc/spindle/bootstrap"
)

// SSHD is the server binary the harness runs.
const SSHD = "/usr/sbin/sshd"

// Require skips t (fails it when CI=true) unless the harness can run here:
// root, sshd, ssh-keygen, useradd.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		CannotRun(t, err.Error()+".\n"+
			"!!! Run scripts/test-deps.sh (or `make test-deps`) as root on Debian to install what is needed")
	}
}

// Available says why Launch and NewUser cannot work here, or nil: they
// need root, sshd, ssh-keygen and the passwd tools.
func Available() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (to run sshd and create test users)")
	}
	if _, err := os.Stat(SSHD); err != nil {
		missing = append(missing, SSHD+" (package openssh-server)")
	}
	for _, tool := range []string{"ssh-keygen", "useradd", "userdel", "chpasswd"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("missing %s", strings.Join(missing, ", "))
}

// CannotRun says loudly that t cannot run here and why, and skips it —
// or fails it when CI=true, so that CI can never pass by skipping.
func CannotRun(t testing.TB, why string) {
	t.Helper()
	testkit.Unavailable(t, why)
}

// RequireShell skips t (fails it when CI=true) unless the shell exists.
func RequireShell(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		return
	}
	testkit.Unavailable(t, path+" is not installed: run scripts/test-deps.sh as root")
}

// Server is a running throwaway sshd.
type Server struct {
	// Dir holds the config, host keys, authorized keys, pid file and log.
	// It is world-traversable: sshd reads authorized keys as the user.
	Dir string
	// Port is the port sshd listens on, on 127.0.0.1 (or on
	// Options.ListenAddress when set).
	Port int

	config  string
	log     string
	hostKey string // private host key path (ed25519)
	host    string // the address sshd listens on
	prefix  []string
	probe   func(addr string) error

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	password bool
}

// Options tunes Start.
type Options struct {
	// Extra lines for sshd_config. sshd keeps the first value it reads
	// for a keyword, so they come first and override the defaults (a
	// Match block would have to come last: not supported).
	Extra []string

	// ListenAddress is the IP address sshd listens on; empty means
	// 127.0.0.1.
	ListenAddress string
	// Port is the port sshd listens on; 0 picks a free port on 127.0.0.1
	// (and retries on another one if it was taken meanwhile). Set it when
	// sshd runs in another network namespace, where this process cannot
	// tell which ports are free.
	Port int
	// Prefix is a command sshd is run under, for instance
	// {"ip", "netns", "exec", "NAME"}: the prefix must exec its last
	// arguments (the sshd command line) in place, so that the process
	// started is sshd itself and Stop can kill it by pid.
	Prefix []string
	// Probe checks that sshd accepts connections on addr ("HOST:PORT")
	// once it logged that it listens; nil dials addr from this process.
	// Set it when this process cannot reach ListenAddress (another network
	// namespace).
	Probe func(addr string) error
}

// Start runs a fresh sshd for t and stops it when t ends.
func Start(t testing.TB) *Server { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	Require(t)
	s, err := Launch(opts)
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("sshtest: sshd log (%s):\n%s", s.log, tail(s.Log(), 200))
		}
		os.RemoveAll(s.Dir)
	})
	return s
}

// Launch runs a fresh sshd, for a program that is not a test (the
// bench); Close stops it and removes its files. Available says whether
// it can work here.
func Launch(opts Options) (_ *Server, err error) {
	dir, err := tempDir("sshtest-srv-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, config: filepath.Join(dir, "sshd_config"), log: filepath.Join(dir, "sshd.log"),
		hostKey: filepath.Join(dir, "host_ed25519"), host: "127.0.0.1", prefix: opts.Prefix, probe: opts.Probe}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if opts.ListenAddress != "" {
		s.host = opts.ListenAddress
	}
	if err := keygen(s.hostKey, "ed25519"); err != nil {
		return nil, err
	}
	// sshd (Debian) insists on its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt < 8; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, fmt.Errorf("pick a port: %w", err)
			}
		}
		s.Port = port
		if err := s.writeConfig(opts); err != nil {
			return nil, err
		}
		if last = s.start(); last == nil {
			return s, nil
		}
		if opts.Port != 0 {
			break // a fixed port: another attempt would fail the same way
		}
	}
	return nil, fmt.Errorf("could not start sshd: %v\n%s", last, tail(s.Log(), 50))
}

// Close stops sshd and removes its files (Launch's).
func (s *Server) Close() {
	s.stop()
	os.RemoveAll(s.Dir)
}

// Addr is "127.0.0.1:PORT" (the listen address when
// Options.ListenAddress was set).
func (s *Server) Addr() string { return net.JoinHostPort(s.host, strconv.Itoa(s.Port)) }

// KnownHostsName is how known_hosts names this server: "[127.0.0.1]:PORT"
// (with the listen address when Options.ListenAddress was set; OpenSSH
// writes a bare "HOST" for port 22).
func (s *Server) KnownHostsName() string {
	if s.Port == 22 {
		return s.host
	}
	return fmt.Sprintf("[%s]:%d", s.host, s.Port)
}

// HostKeyLine is the server's current host key as a known_hosts line.
func (s *Server) HostKeyLine(t testing.TB) string {
	t.Helper()
	line, err := s.HostKeyLineFor(s.KnownHostsName())
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return line
}

// HostKeyLineFor is the server's current host key as a known_hosts line
// for name (say "[127.0.0.1]:PORT" of a proxy in front of the server).
func (s *Server) HostKeyLineFor(name string) (string, error) {
	pub, err := os.ReadFile(s.hostKey + ".pub")
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(pub))
	if len(f) < 2 {
		return "", fmt.Errorf("bad host public key %q", pub)
	}
	return name + " " + f[0] + " " + f[1], nil
}

// KnownHosts writes a known_hosts file holding the server's host key and
// returns its path.
func (s *Server) KnownHosts(t testing.TB) string {
	t.Helper()
	p := filepath.Join(TempDir(t, "sshtest-kh-"), "known_hosts")
	writeFile(t, p, s.HostKeyLine(t)+"\n", 0o600)
	return p
}

// Log is the sshd log so far (LogLevel DEBUG3).
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// RestartWithNewHostKey stops sshd, replaces its host key with a fresh one
// of the same type and starts it again on the same port: known_hosts files
// written before now hold a changed key.
func (s *Server) RestartWithNewHostKey(t testing.TB) {
	t.Helper()
	s.stop()
	os.Remove(s.hostKey)
	os.Remove(s.hostKey + ".pub")
	if err := keygen(s.hostKey, "ed25519"); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		// The old listener's port may linger for a moment.
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("sshtest: restart sshd on port %d: %v\n%s", s.Port, err, tail(s.Log(), 50))
}

// Stop kills sshd now (connections already open keep their session
// processes); later connections are refused.
func (s *Server) Stop() { s.stop() }

func (s *Server) writeConfig(opts Options) error {
	lines := append(append([]string{}, opts.Extra...),
		"ListenAddress "+s.host,
		"Port "+strconv.Itoa(s.Port),
		"HostKey "+s.hostKey,
		"PidFile "+filepath.Join(s.Dir, "sshd.pid"),
		"AuthorizedKeysFile "+filepath.Join(s.Dir, "authorized_keys", "%u"),
		// With UsePAM no, sshd checks /etc/shadow itself (it runs as root),
		// and no PAM session module sets XDG_RUNTIME_DIR or prints a motd.
		"UsePAM no",
		"PasswordAuthentication yes",
		"KbdInteractiveAuthentication no",
		"PubkeyAuthentication yes",
		"PermitRootLogin no",
		"StrictModes no",
		"PrintMotd no",
		"PrintLastLog no",
		"UseDNS no",
		"MaxStartups 100:30:200",
		"MaxSessions 50",
		"MaxAuthTries 6",
		"LoginGraceTime 30",
		"ClientAliveInterval 0",
		"LogLevel DEBUG3",
		"AcceptEnv LANG LC_*",
		"Subsystem sftp internal-sftp",
	)
	if perSourcePenaltiesSupported() {
		// OpenSSH ≥ 9.8 would otherwise refuse 127.0.0.1 after the failed
		// logins that the auth tests make on purpose.
		lines = append(lines, "PerSourcePenalties no")
	}
	if err := os.WriteFile(s.config, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(s.Dir, "authorized_keys"), 0o755)
}

var (
	penaltiesOnce sync.Once
	penaltiesOK   bool
)

func perSourcePenaltiesSupported() bool {
	penaltiesOnce.Do(func() {
		out, _ := exec.Command(SSHD, "-V").CombinedOutput()
		// "OpenSSH_9.2p1 Debian-2+deb12u3, OpenSSL …"
		var major, minor int
		if _, err := fmt.Sscanf(strings.TrimPrefix(strings.TrimSpace(string(out)), "OpenSSH_"), "%d.%d", &major, &minor); err == nil {
			penaltiesOK = major > 9 || (major == 9 && minor >= 8)
		}
	})
	return penaltiesOK
}

// start runs sshd and waits until it listens, or fails if it exits first
// (for instance when another process took the port).
func (s *Server) start() error {
	os.Truncate(s.log, 0)
	pidFile := filepath.Join(s.Dir, "sshd.pid")
	os.Remove(pidFile)
	argv := append(append([]string{}, s.prefix...), SSHD, "-D", "-f", s.config, "-E", s.log)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = nil
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	want := fmt.Sprintf("Server listening on %s port %d", s.host, s.Port)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("sshd exited: %s\n%s", strings.TrimSpace(stderr.String()), tail(s.Log(), 20))
		default:
		}
		// The log says so at LogLevel INFO and above; sshd writes its
		// pid file once it listens, at any level (LogLevel ERROR: the
		// bench's).
		if strings.Contains(s.Log(), want) || pidFileNames(pidFile, cmd.Process.Pid) {
			if s.probe != nil {
				if s.probe(s.Addr()) == nil {
					return nil
				}
			} else if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
				c.Close()
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.stop()
	return fmt.Errorf("sshd did not listen on %s within 15s", s.Addr())
}

// pidFileNames says whether the pid file names pid.
func pidFileNames(file string, pid int) bool {
	b, err := os.ReadFile(file)
	return err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid)
}

// stop kills the listening sshd and its per-connection children (by pid).
func (s *Server) stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	pid := cmd.Process.Pid
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
	for _, child := range childrenOf(pid) {
		syscall.Kill(child, syscall.SIGKILL)
	}
}

// childrenOf lists the pids whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _ := procField(p, "PPid"); ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// procField reads an integer field ("PPid", "Uid" — first value) from
// /proc/pid/status.
func procField(pid int, field string) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			break
		}
		return strconv.Atoi(fs[0])
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// freePort returns a port on 127.0.0.1 that was free a moment ago (sshd
// has no "Port 0"); Start retries when it was taken since.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ClosedPort returns a port on 127.0.0.1 that nothing listens on (a
// moment ago): for connection-refused tests.
func ClosedPort(t testing.TB) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return p
}

// Key is a client key pair.
type Key struct {
	Path   string // private key (no passphrase); Path+".pub" is the public key
	Public string // the authorized_keys line
}

// ClientKey generates an ed25519 client key pair for t.
func ClientKey(t testing.TB) *Key {
	t.Helper()
	k, err := NewKey(TempDir(t, "sshtest-key-"))
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return k
}

// NewKey generates an ed25519 client key pair in dir (id_ed25519).
func NewKey(dir string) (*Key, error) {
	p := filepath.Join(dir, "id_ed25519")
	if err := keygen(p, "ed25519"); err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(p + ".pub")
	if err != nil {
		return nil, err
	}
	return &Key{Path: p, Public: strings.TrimSpace(string(pub))}, nil
}

// Authorize lets k log in as u on this server.
func (s *Server) Authorize(t testing.TB, u *User, k *Key) {
	t.Helper()
	if err := s.AuthorizeKey(u, k); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
}

// AuthorizeKey is Authorize for a program that is not a test.
func (s *Server) AuthorizeKey(u *User, k *Key) error {
	p := filepath.Join(s.Dir, "authorized_keys", u.Name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, k.Public); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func keygen(path, typ string) error {
	args := []string{"-q", "-t", typ, "-N", "", "-C", "sshtest", "-f", path}
	if typ == "rsa" {
		args = append(args, "-b", "2048")
	}
	if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ssh-keygen %v: %v\n%s", args, err, out)
	}
	return nil
}

// User is a throwaway Unix account.
type User struct {
	Name     string
	UID, GID int
	Home     string
	Shell    string
	Password string

	sudoers string // the drop-in AllowSudo wrote
}

// userMu serialises useradd/userdel: they lock /etc/passwd and fail, not
// wait, when another holds it for long.
var userMu sync.Mutex

// CreateUser adds a Unix user with a home directory, the given login shell
// and a random password, and removes it (its processes, home and agent
// cache directories) when t ends. Names are "sp" + random hex.
func CreateUser(t testing.TB, shell string) *User {
	t.Helper()
	Require(t)
	u, err := NewUser(shell)
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	t.Cleanup(func() {
		if err := u.Remove(); err != nil {
			t.Errorf("sshtest: %v", err)
		}
	})
	return u
}

// NewUser is CreateUser for a program that is not a test: Remove removes
// the user.
func NewUser(shell string) (*User, error) {
	name := "sp" + randHex(5)
	pw := randHex(12)
	userMu.Lock()
	out, err := exec.Command("useradd", "-m", "-s", shell, "-K", "MAIL_DIR=/dev/null", name).CombinedOutput()
	if err == nil {
		cmd := exec.Command("chpasswd")
		cmd.Stdin = strings.NewReader(name + ":" + pw + "\n")
		var out2 []byte
		out2, err = cmd.CombinedOutput()
		out = append(out, out2...)
	}
	userMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("useradd %s: %v\n%s", name, err, out)
	}
	u := &User{Name: name, Shell: shell, Password: pw}
	fail := func(err error) (*User, error) {
		u.Remove() //nolint:errcheck // the first error says more
		return nil, err
	}
	for _, f := range []struct {
		flag string
		dst  *int
	}{{"-u", &u.UID}, {"-g", &u.GID}} {
		b, err := exec.Command("id", f.flag, name).Output()
		if err != nil {
			return fail(fmt.Errorf("id %s %s: %v", f.flag, name, err))
		}
		*f.dst, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	b, err := exec.Command("getent", "passwd", name).Output()
	if err != nil {
		return fail(fmt.Errorf("getent passwd %s: %v", name, err))
	}
	if f := strings.Split(strings.TrimSpace(string(b)), ":"); len(f) >= 7 {
		u.Home = f[5]
	}
	return u, nil
}

// AllowSudo gives u passwordless sudo (a drop-in in /etc/sudoers.d,
// removed with the user).
func (u *User) AllowSudo() error {
	u.sudoers = "/etc/sudoers.d/sshtest-" + u.Name
	return os.WriteFile(u.sudoers, []byte(u.Name+" ALL=(ALL:ALL) NOPASSWD: ALL\n"), 0o440)
}

// CacheDirs are the agent cache directories the first stage considers for
// u over SSH, in order (XDG_RUNTIME_DIR is unset: no PAM, no logind).
func (u *User) CacheDirs() []string { return bootstrap.StageCacheDirs(u.UID, u.Home, "") }

// WriteFile writes a file in u's home, owned by u.
func (u *User) WriteFile(t testing.TB, rel, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(u.Home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	writeFile(t, p, content, mode)
	if err := os.Chown(p, u.UID, u.GID); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return p
}

// Pids lists u's processes.
func (u *User) Pids() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if uid, err := procField(p, "Uid"); err == nil && uid == u.UID {
			out = append(out, p)
		}
	}
	return out
}

// Remove removes u: its processes, sudo rights, home and agent cache
// directories.
func (u *User) Remove() error {
	if u.sudoers != "" {
		os.Remove(u.sudoers)
	}
	// Kill the user's processes (our agents, by pid) so userdel can go.
	for round := 0; round < 50; round++ {
		pids := u.Pids()
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, d := range u.CacheDirs() {
		if !strings.HasPrefix(d, u.Home) {
			unmountAll(d)
			os.RemoveAll(d)
		}
	}
	unmountAll(filepath.Join(u.Home, ".cache", "spindle"))
	userMu.Lock()
	out, err := exec.Command("userdel", "-r", "-f", u.Name).CombinedOutput()
	userMu.Unlock()
	if err != nil && !strings.Contains(string(out), "mail spool") {
		return fmt.Errorf("userdel %s: %v\n%s", u.Name, err, out)
	}
	return nil
}

// MountTmpfs mounts a small tmpfs on dir (created if missing) and
// unmounts it when t ends. opts is a comma-separated list of mount flags
// (noexec, nosuid, nodev, ro) and tmpfs options (mode=0700, uid=N, …).
func MountTmpfs(t testing.TB, dir, opts string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	flagBits := map[string]uintptr{"noexec": syscall.MS_NOEXEC, "nosuid": syscall.MS_NOSUID,
		"nodev": syscall.MS_NODEV, "ro": syscall.MS_RDONLY}
	var flags uintptr
	data := []string{"size=8m"}
	for _, o := range strings.Split(opts, ",") {
		if f, ok := flagBits[o]; ok {
			flags |= f
		} else if o != "" {
			data = append(data, o)
		}
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, strings.Join(data, ",")); err != nil {
		// The disk-full and cache-directory tests rest on this mount:
		// without it they prove nothing, so CI must not pass them.
		testkit.Unavailable(t, fmt.Sprintf("sshtest: cannot mount tmpfs (%s) on %s: %v (needs root with CAP_SYS_ADMIN)", opts, dir, err))
	}
	t.Cleanup(func() { unmountAll(dir) })
}

func unmountAll(dir string) {
	for i := 0; i < 10; i++ {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			return
		}
	}
}

// TempDir makes a world-traversable (0755) temporary directory removed when
// t ends: t.TempDir is 0700 under a 0700 parent, which sshd, reading
// authorized keys as the user, cannot enter.
func TempDir(t testing.TB, prefix string) string {
	t.Helper()
	d, err := tempDir(prefix)
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// tempDir is TempDir, removed by the caller.
func tempDir(prefix string) (string, error) {
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(d, 0o755); err != nil {
		os.RemoveAll(d)
		return "", err
	}
	return d, nil
}

func writeFile(t testing.TB, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
