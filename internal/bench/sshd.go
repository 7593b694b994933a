package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
)

// throwawaySSHD is the ssh group's own server when no --ssh-target is
// given: the project's sshd fixture (package sshtest) on 127.0.0.1, one
// authorized client key, and sessions whose XDG_RUNTIME_DIR is a private
// dir of its own. The agent cache the first stage picks
// (/dev/shm/spindle-UID first) is the throwaway user's alone, and Close
// removes it.
//
// Sessions log in as a throwaway user whose login shell is /bin/sh, with
// passwordless sudo (the become rows): root's own shell start-up files
// (on this project's machines they run `pyenv init`, over a second per
// session) would otherwise be what the OpenSSH baselines measure.
type throwawaySSHD struct {
	Port       int
	User       string
	KeyFile    string // the client's private key
	KnownHosts string // holds the host key for 127.0.0.1 on Port and the extra ports
	XDG        string // the sessions' XDG_RUNTIME_DIR

	dir  string // the key, known_hosts and XDG dir
	srv  *sshtest.Server
	user *sshtest.User
}

// canStartSSHD says whether startSSHD can work here, and if not why.
func canStartSSHD() error { return sshtest.Available() }

// startSSHD starts the server; extraPorts are written to known_hosts too
// (latency proxies in front of the same server).
func startSSHD(extraPorts func(port int) []int) (_ *throwawaySSHD, err error) {
	if err := canStartSSHD(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "spindle-sshd-")
	if err != nil {
		return nil, err
	}
	s := &throwawaySSHD{dir: dir, KnownHosts: filepath.Join(dir, "known_hosts"), XDG: filepath.Join(dir, "xdg")}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	// The user must traverse dir to its XDG dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if s.user, err = sshtest.NewUser("/bin/sh"); err != nil {
		return nil, fmt.Errorf("the bench logs in as a throwaway user: %w", err)
	}
	s.User = s.user.Name
	if err := s.user.AllowSudo(); err != nil {
		return nil, err
	}
	if err := os.Mkdir(s.XDG, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chown(s.XDG, s.user.UID, s.user.GID); err != nil {
		return nil, err
	}
	key, err := sshtest.NewKey(dir)
	if err != nil {
		return nil, err
	}
	s.KeyFile = key.Path
	// sshd keeps the first value it reads: these override the fixture's
	// test settings with a stock server's, quiet (a log line per
	// connection would be measured too).
	s.srv, err = sshtest.Launch(sshtest.Options{Extra: []string{
		"LogLevel ERROR",
		"PasswordAuthentication no",
		"MaxStartups 200:30:400",
		// sshd's default, stated: hops that share a connection
		// (via_connect_parallel_20) need as many as a stock server
		// makes them.
		"MaxSessions 10",
		"SetEnv XDG_RUNTIME_DIR=" + s.XDG,
	}})
	if err != nil {
		return nil, err
	}
	if err := s.srv.AuthorizeKey(s.user, key); err != nil {
		return nil, err
	}
	s.Port = s.srv.Port
	ports := []int{s.Port}
	if extraPorts != nil {
		ports = append(ports, extraPorts(s.Port)...)
	}
	var kh bytes.Buffer
	for _, p := range ports {
		line, err := s.srv.HostKeyLineFor("[127.0.0.1]:" + strconv.Itoa(p))
		if err != nil {
			return nil, err
		}
		kh.WriteString(line + "\n")
	}
	if err := os.WriteFile(s.KnownHosts, kh.Bytes(), 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

// Close stops sshd, removes its user (processes, sudo rights, agent
// caches) and files.
func (s *throwawaySSHD) Close() {
	if s.srv != nil {
		s.srv.Close()
	}
	if s.user != nil {
		s.user.Remove() //nolint:errcheck // nothing the bench could do about it
	}
	os.RemoveAll(s.dir)
}
