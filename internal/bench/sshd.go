package bench

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sshdPath is OpenSSH's server, which `spindle-bench ssh` starts a
// throwaway copy of when it runs as root and no --ssh-target is given.
const sshdPath = "/usr/sbin/sshd"

// throwawaySSHD is an OpenSSH server of our own on 127.0.0.1: its own host
// key, one authorized client key, everything in a temp dir, and sessions
// whose XDG_RUNTIME_DIR is a private dir in there. The agent cache the
// first stage picks (/dev/shm/spindle-UID first) is the throwaway user's
// alone, and Close removes it.
//
// Sessions log in as a throwaway user whose login shell is /bin/sh, with
// passwordless sudo: root's own shell start-up files (on this project's
// machines they run `pyenv init`, over a second per session) would
// otherwise be what the OpenSSH baselines measure.
type throwawaySSHD struct {
	Dir        string
	Port       int
	User       string
	KeyFile    string // the client's private key
	KnownHosts string // holds the host key for 127.0.0.1 on Port and ExtraPorts
	XDG        string // the sessions' XDG_RUNTIME_DIR

	cmd     *osexec.Cmd
	log     *syncBuffer
	exited  chan struct{}
	sudoers string // our /etc/sudoers.d drop-in
	made    bool   // User was created by us
	uid     string // User's
}

// canStartSSHD says whether startSSHD can work here, and if not why.
func canStartSSHD() error {
	if os.Geteuid() != 0 {
		return errors.New("not running as root")
	}
	if _, err := os.Stat(sshdPath); err != nil {
		return fmt.Errorf("%s not found (apt-get install openssh-server)", sshdPath)
	}
	if _, err := osexec.LookPath("ssh-keygen"); err != nil {
		return errors.New("ssh-keygen not found (apt-get install openssh-client)")
	}
	for _, tool := range []string{"useradd", "userdel"} {
		if _, err := osexec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found (apt-get install passwd)", tool)
		}
	}
	return nil
}

// startSSHD starts sshd -D on a free port; extraPorts are written to
// known_hosts too (latency proxies in front of the same server).
func startSSHD(extraPorts func(port int) []int) (_ *throwawaySSHD, err error) {
	if err := canStartSSHD(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "spindle-sshd-")
	if err != nil {
		return nil, err
	}
	s := &throwawaySSHD{Dir: dir, KeyFile: filepath.Join(dir, "id_ed25519"), KnownHosts: filepath.Join(dir, "known_hosts"),
		XDG: filepath.Join(dir, "xdg"), log: &syncBuffer{}, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.makeUser(); err != nil {
		return nil, err
	}
	hostKey := filepath.Join(dir, "ssh_host_ed25519_key")
	for _, k := range []string{hostKey, s.KeyFile} {
		if out, err := osexec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "spindle-bench", "-f", k).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(s.KeyFile + ".pub")
	if err != nil {
		return nil, err
	}
	// sshd reads it as the user.
	auth := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(auth, pub, 0o644); err != nil {
		return nil, err
	}
	hostPub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return nil, err
	}
	// sshd refuses to start without its privilege separation directory,
	// which only the distribution's service creates.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		cfg := filepath.Join(dir, "sshd_config")
		conf := strings.Join([]string{
			"ListenAddress 127.0.0.1:" + strconv.Itoa(port),
			"HostKey " + hostKey,
			"AuthorizedKeysFile " + auth,
			"PidFile none",
			"UsePAM no",
			"StrictModes no",
			"PermitRootLogin prohibit-password",
			"PubkeyAuthentication yes",
			"PasswordAuthentication no",
			"KbdInteractiveAuthentication no",
			"PrintMotd no",
			"PrintLastLog no",
			"UseDNS no",
			"MaxStartups 200:30:400",
			// sshd's default, stated: hops that share a connection
			// (via_connect_parallel_20) need as many as a stock server
			// makes them.
			"MaxSessions 10",
			"LogLevel ERROR",
			"SetEnv XDG_RUNTIME_DIR=" + s.XDG,
			"Subsystem sftp internal-sftp",
		}, "\n") + "\n"
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			return nil, err
		}
		cmd := osexec.Command(sshdPath, "-D", "-e", "-f", cfg)
		cmd.Stdout, cmd.Stderr = s.log, s.log
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", sshdPath, err)
		}
		s.cmd = cmd
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }() //nolint:errcheck // reported through the log
		if err := waitSSH(port, exited, 10*time.Second); err != nil {
			lastErr = fmt.Errorf("sshd on port %d: %w: %s", port, err, strings.TrimSpace(s.log.String()))
			cmd.Process.Kill()
			<-exited
			s.cmd = nil
			continue
		}
		s.exited = exited
		s.Port = port
		ports := []int{port}
		if extraPorts != nil {
			ports = append(ports, extraPorts(port)...)
		}
		var kh bytes.Buffer
		for _, p := range ports {
			fmt.Fprintf(&kh, "[127.0.0.1]:%d %s", p, hostPub)
		}
		if err := os.WriteFile(s.KnownHosts, kh.Bytes(), 0o600); err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, lastErr
}

// makeUser creates the sessions' user: /bin/sh, home and XDG dir in
// s.Dir, passwordless sudo (for the become rows).
func (s *throwawaySSHD) makeUser() error {
	// The user must traverse s.Dir to its home and authorized_keys.
	if err := os.Chmod(s.Dir, 0o755); err != nil {
		return err
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	name := "spbench" + hex.EncodeToString(rnd[:])
	// -p '*': no password, but not locked ("!"), which sshd without PAM
	// would refuse for keys too.
	home := filepath.Join(s.Dir, "home")
	if out, err := osexec.Command("useradd", "-M", "-d", home, "-s", "/bin/sh", "-p", "*", "-K", "MAIL_DIR=/dev/null", name).CombinedOutput(); err != nil {
		return fmt.Errorf("useradd %s (the bench logs in as a throwaway user): %v: %s", name, err, bytes.TrimSpace(out))
	}
	s.User, s.made = name, true
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	s.uid = u.Uid
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range []string{home, s.XDG} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		if err := os.Chown(d, uid, gid); err != nil {
			return err
		}
	}
	s.sudoers = "/etc/sudoers.d/" + name
	return os.WriteFile(s.sudoers, []byte(name+" ALL=(ALL:ALL) NOPASSWD: ALL\n"), 0o440)
}

// Close stops sshd, removes its user and files.
func (s *throwawaySSHD) Close() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		<-s.exited
	}
	if s.sudoers != "" {
		os.Remove(s.sudoers)
	}
	if s.made {
		osexec.Command("pkill", "-KILL", "-u", s.User).Run() //nolint:errcheck // none may be left
		osexec.Command("userdel", s.User).Run()              //nolint:errcheck // reported by nothing we could act on
		// The user's agent cache dirs outside s.Dir (the first stage's
		// candidates; its home and XDG dir are inside).
		if s.uid != "" {
			os.RemoveAll("/dev/shm/spindle-" + s.uid)
			os.RemoveAll("/tmp/spindle-" + s.uid)
		}
	}
	os.RemoveAll(s.Dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitSSH waits until 127.0.0.1:port sends an SSH banner.
func waitSSH(port int, exited <-chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited")
		default:
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 4)
			_, err = c.Read(buf)
			c.Close()
			if err == nil && string(buf) == "SSH-" {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("no SSH banner")
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
