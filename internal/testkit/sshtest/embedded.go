package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/spindle-rpc/spindle/bootstrap"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Embedded is a throwaway SSH server written in Go, for the demo, which
// must work where no sshd is installed and without root: it listens on
// 127.0.0.1, accepts only its fresh client key, and serves "exec"
// requests by running the command with /bin/sh -c as the current user, in
// a private HOME and XDG_RUNTIME_DIR. Everything else (shells, PTYs, port
// forwarding, subsystems) is refused.
type Embedded struct {
	ln   net.Listener
	dir  string // temp dir: keys, known_hosts, the sessions' HOME
	home string
	xdg  string

	// KeyFile and KnownHosts are the client's files; Port the server's.
	KeyFile, KnownHosts string
	Port                int

	cfg *ssh.ServerConfig

	mu        sync.Mutex
	conns     map[net.Conn]bool
	closed    bool
	leftovers []string // files outside dir that Close removes
	wg        sync.WaitGroup
}

// StartEmbedded starts the server with files under a new temp dir.
func StartEmbedded() (_ *Embedded, err error) {
	dir, err := os.MkdirTemp("", "spindle-sshtest-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	s := &Embedded{dir: dir, home: filepath.Join(dir, "home"), xdg: filepath.Join(dir, "run"), conns: map[net.Conn]bool{}}
	for _, d := range []string{s.home, s.xdg} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return nil, err
	}
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	sshClientPub, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "sshtest")
	if err != nil {
		return nil, err
	}
	s.KeyFile = filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(s.KeyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	want := string(sshClientPub.Marshal())
	s.cfg = &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if string(key.Marshal()) == want {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	s.cfg.AddHostKey(hostSigner)

	s.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.Port = s.ln.Addr().(*net.TCPAddr).Port
	s.KnownHosts = filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(s.ln.Addr().String())}, hostSigner.PublicKey())
	if err := os.WriteFile(s.KnownHosts, []byte(line+"\n"), 0o600); err != nil {
		s.ln.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// cacheDirs are the first stage's cache directories for our sessions, in
// its order: /dev/shm and /tmp are the machine's, so a demo's agent is
// usually cached outside s.dir.
func (s *Embedded) cacheDirs() []string {
	return bootstrap.StageCacheDirs(os.Getuid(), s.home, s.xdg)
}

// CachedAgent returns the cached agent file with this sha256, and has
// Close remove it and its memo: for a salted agent (bootstrap.Salted),
// which no later run could use.
func (s *Embedded) CachedAgent(hash string) (string, error) {
	for _, d := range s.cacheDirs() {
		files, _ := filepath.Glob(filepath.Join(d, "agent-*-"+hash[:16]))
		if len(files) == 1 {
			s.mu.Lock()
			s.leftovers = append(s.leftovers, files[0], filepath.Join(d, "."+filepath.Base(files[0])+".ok"))
			s.mu.Unlock()
			return files[0], nil
		}
	}
	return "", fmt.Errorf("no agent %s… in the cache directories %v", hash[:16], s.cacheDirs())
}

// Close stops the server, ends its connections and removes its files.
func (s *Embedded) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	os.RemoveAll(s.dir)
	for _, f := range s.leftovers {
		os.Remove(f)
	}
	return err
}

func (s *Embedded) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.handleConn(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

func (s *Embedded) handleConn(c net.Conn) {
	sc, chans, reqs, err := ssh.NewServerConn(c, s.cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		ssh.DiscardRequests(reqs) // keepalives get a "failure", which means alive
	}()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.handleSession(ch, creqs)
		}()
	}
}

// handleSession serves one session: the first "exec" runs; every other
// request is refused.
func (s *Embedded) handleSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	done := make(chan uint32, 1)
	started := false
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				return
			}
			if req.Type != "exec" || started {
				req.Reply(false, nil)
				continue
			}
			var p struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &p); err != nil {
				req.Reply(false, nil)
				continue
			}
			cmd, err := s.command(p.Command, ch)
			if err != nil {
				req.Reply(false, nil)
				fmt.Fprintf(ch.Stderr(), "sshtest: %v\n", err)
				return
			}
			started = true
			req.Reply(true, nil)
			go func() { done <- cmd() }()
		case status := <-done:
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
			return
		}
	}
}

// command starts /bin/sh -c line wired to ch and returns a function that
// waits for it and its output and returns its exit status.
func (s *Embedded) command(line string, ch ssh.Channel) (func() uint32, error) {
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Dir = s.home
	cmd.Env = []string{"HOME=" + s.home, "XDG_RUNTIME_DIR=" + s.xdg, "SHELL=/bin/sh",
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
		"USER=" + os.Getenv("USER"), "LOGNAME=" + os.Getenv("USER"), "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// stdin is not waited for: the client may keep it open after exit.
	go func() {
		io.Copy(stdin, ch) //nolint:errcheck // the command may exit first
		stdin.Close()
	}()
	var out sync.WaitGroup
	out.Add(2)
	go func() { defer out.Done(); io.Copy(ch, stdout) }()          //nolint:errcheck // client gone
	go func() { defer out.Done(); io.Copy(ch.Stderr(), stderr) }() //nolint:errcheck // client gone
	return func() uint32 {
		out.Wait()
		err := cmd.Wait()
		ch.CloseWrite()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
				return 128 + uint32(st.Signal())
			}
			return uint32(ee.ExitCode())
		}
		return 255
	}, nil
}
