package ssh

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"runtime"

	"github.com/skeema/knownhosts"
	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	gossh "golang.org/x/crypto/ssh"
)

// testServer is an in-process SSH server (x/crypto server side) on
// 127.0.0.1:0: it authenticates with cfg, answers keepalives while answer
// is set, rejects sessions and, when forward is set, serves direct-tcpip
// (what ProxyJump uses).
type testServer struct {
	t          *testing.T
	ln         net.Listener
	hostKey    gossh.Signer
	port       int
	answer     atomic.Bool
	keepalives chan struct{}
	forward    bool
	execEnv    []string // non-nil: run "exec" requests with sh -c in this environment

	mu    sync.Mutex
	conns []io.Closer
	wg    sync.WaitGroup
}

func newTestServer(t *testing.T, cfg *gossh.ServerConfig, forward bool) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{t: t, ln: ln, hostKey: newSigner(t), port: ln.Addr().(*net.TCPAddr).Port,
		keepalives: make(chan struct{}, 100), forward: forward}
	s.answer.Store(true)
	cfg.AddHostKey(s.hostKey)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.track(c)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c, cfg)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *testServer) track(c io.Closer) {
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
}

func (s *testServer) serve(c net.Conn, cfg *gossh.ServerConfig) {
	sc, chans, reqs, err := gossh.NewServerConn(c, cfg)
	if err != nil {
		c.Close()
		return
	}
	s.track(sc)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for r := range reqs {
			switch {
			case r.Type == "keepalive@openssh.com" && s.answer.Load():
				r.Reply(false, nil)
				select {
				case s.keepalives <- struct{}{}:
				default:
				}
			case r.Type == "keepalive@openssh.com":
				// Silent: the client must give up on its own.
			case r.WantReply:
				r.Reply(false, nil)
			}
		}
	}()
	for nc := range chans {
		if nc.ChannelType() == "session" && s.execEnv != nil {
			ch, creqs, err := nc.Accept()
			if err != nil {
				continue
			}
			s.track(ch)
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.session(ch, creqs) }()
			continue
		}
		if nc.ChannelType() != "direct-tcpip" || !s.forward {
			nc.Reject(gossh.Prohibited, "not here")
			continue
		}
		var dt struct {
			Host     string
			Port     uint32
			OrigHost string
			OrigPort uint32
		}
		if err := gossh.Unmarshal(nc.ExtraData(), &dt); err != nil {
			nc.Reject(gossh.ConnectionFailed, err.Error())
			continue
		}
		target, err := net.Dial("tcp", net.JoinHostPort(dt.Host, strconv.Itoa(int(dt.Port))))
		if err != nil {
			nc.Reject(gossh.ConnectionFailed, err.Error())
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			target.Close()
			continue
		}
		s.track(target)
		s.track(ch)
		s.wg.Add(3)
		go func() { defer s.wg.Done(); gossh.DiscardRequests(creqs) }()
		go func() { defer s.wg.Done(); io.Copy(ch, target); ch.CloseWrite() }()
		go func() { defer s.wg.Done(); io.Copy(target, ch); target.(*net.TCPConn).CloseWrite() }()
	}
	sc.Wait()
}

// session runs one exec request with sh -c, its stdio on the channel,
// like sshd does with the user's shell.
func (s *testServer) session(ch gossh.Channel, reqs <-chan *gossh.Request) {
	defer ch.Close()
	for r := range reqs {
		if r.Type != "exec" {
			r.Reply(false, nil)
			continue
		}
		var payload struct{ Command string }
		if err := gossh.Unmarshal(r.Payload, &payload); err != nil {
			r.Reply(false, nil)
			continue
		}
		cmd := exec.Command("/bin/sh", "-c", payload.Command)
		cmd.Env = s.execEnv
		cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
		stdin, err := cmd.StdinPipe()
		if err != nil {
			r.Reply(false, nil)
			return
		}
		if err := cmd.Start(); err != nil {
			r.Reply(false, nil)
			return
		}
		r.Reply(true, nil)
		s.wg.Add(2)
		go func() { defer s.wg.Done(); gossh.DiscardRequests(reqs) }()
		go func() { defer s.wg.Done(); io.Copy(stdin, ch); stdin.Close() }()
		code := 0
		if err := cmd.Wait(); err != nil {
			code = 255
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
		}
		ch.SendRequest("exit-status", false, gossh.Marshal(struct{ Status uint32 }{uint32(code)}))
		return
	}
}

// knownHosts writes a known_hosts file holding the servers' keys.
func knownHosts(t *testing.T, servers ...*testServer) string {
	t.Helper()
	var b strings.Builder
	for _, s := range servers {
		b.WriteString(knownhosts.Line([]string{knownhosts.Normalize("127.0.0.1:" + strconv.Itoa(s.port))}, s.hostKey.PublicKey()) + "\n")
	}
	path := filepath.Join(t.TempDir(), "known_hosts")
	writeFile(t, path, b.String())
	return path
}

// isolate keeps the user's keys, agent and config out of a test.
func isolate(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("SSH_AUTH_SOCK", "")
}

func passwordServer(password string) *gossh.ServerConfig {
	return &gossh.ServerConfig{PasswordCallback: func(c gossh.ConnMetadata, pw []byte) (*gossh.Permissions, error) {
		if c.User() == "tester" && string(pw) == password {
			return nil, nil
		}
		return nil, errors.New("denied")
	}}
}

func TestHandshakeTimeout(t *testing.T) {
	isolate(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // accepted, never a byte sent
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-acceptDone
		for _, c := range held {
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	o := Options{Host: "127.0.0.1", Port: port, User: "tester", ConfigFile: "none", HostKeyPolicy: HostKeyOff,
		Password: "x", ConnectTimeout: 300 * time.Millisecond}
	start := time.Now()
	_, err = o.Start(context.Background(), connectors.StartRequest{ID: 1, Name: o.Name(), Logger: zaptest.NewLogger(t), Agent: bootstrap.Default()})
	el := time.Since(start)
	if err == nil {
		t.Fatal("Start succeeded against a silent server")
	}
	if !errors.Is(err, errkind.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "300ms") {
		t.Fatalf("err = %v, want a timeout naming ConnectTimeout", err)
	}
	if el < 250*time.Millisecond || el > 3*time.Second {
		t.Fatalf("Start took %v, want about 300ms", el)
	}
	t.Log(err)

	// Cancelling ctx aborts the handshake too.
	ctx, cancel := context.WithCancel(context.Background())
	o.ConnectTimeout = time.Minute
	errc := make(chan error, 1)
	go func() {
		_, err := connect(ctx, o, zap.NewNop(), 0)
		errc <- err
	}()
	for {
		mu.Lock()
		n := len(held)
		mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling for the accept, not a sync by sleep
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	isolate(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	o := Options{Host: "127.0.0.1", Port: port, User: "tester", ConfigFile: "none", HostKeyPolicy: HostKeyOff}
	_, err = connect(context.Background(), o, zap.NewNop(), 0)
	want := "connect to 127.0.0.1:" + strconv.Itoa(port) + ": connection refused"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestKeepaliveClosesDeadLink(t *testing.T) {
	isolate(t)
	srv := newTestServer(t, passwordServer("pw"), false)
	o := Options{Host: "127.0.0.1", Port: srv.port, User: "tester", Password: "pw", ConfigFile: "none",
		KnownHostsFiles: []string{knownHosts(t, srv)}, KeepaliveInterval: 50 * time.Millisecond, KeepaliveCountMax: 3}
	l, err := connect(context.Background(), o, zaptest.NewLogger(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Answered keepalives keep the link up.
	for i := 0; i < 3; i++ {
		select {
		case <-srv.keepalives:
		case <-time.After(10 * time.Second):
			t.Fatal("no keepalive sent")
		}
	}
	srv.answer.Store(false)
	stopped := time.Now()
	waited := make(chan error, 1)
	go func() { waited <- l.client.Wait() }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("client not closed after the server stopped answering")
	}
	if el := time.Since(stopped); el < 3*50*time.Millisecond {
		t.Fatalf("closed after %v, before count×interval", el)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close after keepalive failure: %v", err)
	}
}

func TestAuthFailure(t *testing.T) {
	isolate(t)
	srv := newTestServer(t, passwordServer("right"), false)
	o := Options{Host: "127.0.0.1", Port: srv.port, User: "tester", Password: "hunter2", ConfigFile: "none",
		KnownHostsFiles: []string{knownHosts(t, srv)}}
	_, err := connect(context.Background(), o, zap.NewNop(), 0)
	if !errors.Is(err, errkind.ErrAuth) || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "tester@127.0.0.1") {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}

func TestHostKeyOverTheWire(t *testing.T) {
	isolate(t)
	srv := newTestServer(t, passwordServer("pw"), false)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	writeFile(t, empty, "")
	o := Options{Host: "127.0.0.1", Port: srv.port, User: "tester", Password: "pw", ConfigFile: "none",
		KnownHostsFiles: []string{empty}}
	_, err := connect(context.Background(), o, zap.NewNop(), 0)
	if !errors.Is(err, errkind.ErrHostKey) || !strings.Contains(err.Error(), "is not known") {
		t.Fatalf("strict, unknown: %v", err)
	}
	o.HostKeyPolicy = HostKeyAcceptNew
	l, err := connect(context.Background(), o, zap.NewNop(), 0)
	if err != nil {
		t.Fatalf("accept-new: %v", err)
	}
	l.Close()
	// Now known: strict accepts it; a server with another key is refused.
	o.HostKeyPolicy = HostKeyStrict
	l, err = connect(context.Background(), o, zap.NewNop(), 0)
	if err != nil {
		t.Fatalf("strict after accept-new: %v", err)
	}
	l.Close()
	srv2 := newTestServer(t, passwordServer("pw"), false)
	writeFile(t, empty, knownhosts.Line([]string{knownhosts.Normalize("127.0.0.1:" + strconv.Itoa(srv2.port))}, srv.hostKey.PublicKey())+"\n")
	o.Port = srv2.port
	_, err = connect(context.Background(), o, zap.NewNop(), 0)
	if !errors.Is(err, errkind.ErrHostKey) || !strings.Contains(err.Error(), empty+":1") {
		t.Fatalf("changed: %v", err)
	}
}

func TestKeyboardInteractiveAndKeys(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	keyPath, _, pub := keyFiles(t, dir, "id_test", "")
	cfg := &gossh.ServerConfig{
		PublicKeyCallback: func(c gossh.ConnMetadata, k gossh.PublicKey) (*gossh.Permissions, error) {
			if c.User() == "keyuser" && string(k.Marshal()) == string(pub.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("no")
		},
		KeyboardInteractiveCallback: func(c gossh.ConnMetadata, ask gossh.KeyboardInteractiveChallenge) (*gossh.Permissions, error) {
			ans, err := ask("", "", []string{"Password: "}, []bool{false})
			if err != nil {
				return nil, err
			}
			if len(ans) == 1 && ans[0] == "typed" {
				return nil, nil
			}
			return nil, errors.New("no")
		},
	}
	srv := newTestServer(t, cfg, false)
	kh := knownHosts(t, srv)

	o := Options{Host: "127.0.0.1", Port: srv.port, User: "keyuser", ConfigFile: "none", KnownHostsFiles: []string{kh},
		IdentityFiles: []string{keyPath}}
	l, err := connect(context.Background(), o, zap.NewNop(), 0)
	if err != nil {
		t.Fatalf("public key: %v", err)
	}
	l.Close()

	// The prompt is slower than ConnectTimeout: waiting for the user does
	// not count against it.
	var asked atomic.Int32
	o = Options{Host: "127.0.0.1", Port: srv.port, User: "tester", ConfigFile: "none", KnownHostsFiles: []string{kh},
		ConnectTimeout: 200 * time.Millisecond,
		PasswordPrompt: func(p string) (string, error) {
			asked.Add(1)
			time.Sleep(400 * time.Millisecond) // a slow typist
			return "typed", nil
		}}
	l, err = connect(context.Background(), o, zap.NewNop(), 0)
	if err != nil {
		t.Fatalf("keyboard-interactive: %v", err)
	}
	l.Close()
	if asked.Load() != 1 {
		t.Fatalf("asked %d times", asked.Load())
	}
}

func TestProxyJump(t *testing.T) {
	isolate(t)
	bastion := newTestServer(t, passwordServer("pw"), true)
	target := newTestServer(t, passwordServer("pw"), false)
	o := Options{Host: "127.0.0.1", Port: target.port, User: "tester", Password: "pw", ConfigFile: "none",
		KnownHostsFiles: []string{knownHosts(t, bastion, target)},
		ProxyJump:       "tester@127.0.0.1:" + strconv.Itoa(bastion.port)}
	// The jump host gets no password (only the target does): it must be
	// asked through the prompt.
	o.PasswordPrompt = func(string) (string, error) { return "pw", nil }
	l, err := connect(context.Background(), o, zap.NewNop(), 0)
	if err != nil {
		t.Fatalf("ProxyJump: %v", err)
	}
	if l.jump == nil {
		t.Fatal("no jump link")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// An unreachable jump host is named in the error.
	o.ProxyJump = "tester@127.0.0.1:1"
	_, err = connect(context.Background(), o, zap.NewNop(), 0)
	if err == nil || !strings.Contains(err.Error(), "jump host tester@127.0.0.1:1") {
		t.Fatalf("bad jump: %v", err)
	}
}

// cachedSalted returns where the first stage cached src's agent for a
// session with this HOME and XDG_RUNTIME_DIR: usually the machine's
// /dev/shm/spindle-$UID, the first in its order.
func cachedSalted(t *testing.T, src bootstrap.Source, home, xdg string) []string {
	t.Helper()
	bin, err := src.Agent(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, d := range bootstrap.StageCacheDirs(os.Getuid(), home, xdg) {
		found, _ := filepath.Glob(filepath.Join(d, "agent-*-"+bin.Hash[:16]))
		files = append(files, found...)
	}
	return files
}

func TestStartInProcess(t *testing.T) {
	isolate(t)
	// An agent for bootstrap.Default(): $SPINDLE_AGENT, or one built now.
	if _, err := testagent.Build(); err != nil {
		t.Fatalf("building the agent: %v", err)
	}
	// Salted: an agent no cache on this machine holds (the first stage
	// also looks in /dev/shm/spindle-$UID, where other tests leave theirs).
	src := bootstrap.Salted(bootstrap.Default())
	home, xdg := t.TempDir(), t.TempDir()
	// Salted, the agent is of no use to anyone after the test.
	t.Cleanup(func() {
		for _, f := range cachedSalted(t, src, home, xdg) {
			os.Remove(f)
			os.Remove(filepath.Join(filepath.Dir(f), "."+filepath.Base(f)+".ok"))
		}
	})
	srv := newTestServer(t, passwordServer("pw"), false)
	srv.execEnv = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_RUNTIME_DIR=" + xdg, "LANG=C"}
	o := Options{Host: "127.0.0.1", Port: srv.port, User: "tester", Password: "pw", ConfigFile: "none",
		KnownHostsFiles: []string{knownHosts(t, srv)}, ContextName: "ssh:test"}
	for i, what := range []string{"uploaded", "cached"} {
		conn, err := o.Start(context.Background(), connectors.StartRequest{ID: uint32(i + 1), Name: o.Name(), Logger: zaptest.NewLogger(t), Agent: src})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if conn.Hello == nil || conn.Hello.PID == 0 {
			t.Fatalf("%s: hello %+v", what, conn.Hello)
		}
		if err := conn.Close(); err != nil {
			t.Fatalf("%s: close: %v", what, err)
		}
	}

	// A damaged cached agent (still runnable, wrong hash) fails its
	// self-check: Start retries once in a fresh session, which uploads.
	files := cachedSalted(t, src, home, xdg)
	if len(files) != 1 {
		t.Fatalf("cached agents: %v", files)
	}
	f, err := os.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("damage"))
	f.Close()
	conn, err := o.Start(context.Background(), connectors.StartRequest{ID: 9, Name: o.Name(), Logger: zaptest.NewLogger(t), Agent: src})
	if err != nil {
		t.Fatalf("stale agent: %v", err)
	}
	conn.Close()
}

// ConnectionAttempts: a refused connect is tried again, a pause apart,
// as often as ssh_config (or Options) says; the error says how often.
func TestConnectionAttempts(t *testing.T) {
	isolate(t)
	srv := newTestServer(t, passwordServer("pw"), false)
	oldRetry, oldDialer := connectionRetry, dialer
	t.Cleanup(func() { connectionRetry, dialer = oldRetry, oldDialer })
	connectionRetry = time.Millisecond
	var tries, refuse int
	dialer = func(ctx context.Context, d *net.Dialer, addr string) (net.Conn, error) {
		tries++
		if tries <= refuse {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		return d.DialContext(ctx, "tcp", addr)
	}
	cfg := filepath.Join(t.TempDir(), "config")
	writeFile(t, cfg, "Host srv\n  HostName 127.0.0.1\n  Port "+strconv.Itoa(srv.port)+"\n  User tester\n  UserKnownHostsFile "+knownHosts(t, srv)+"\n  ConnectionAttempts 3\n")
	o := Options{Host: "srv", ConfigFile: cfg, Password: "pw"}

	refuse = 2 // a host that answers on the third try
	l, err := connect(context.Background(), o, zap.NewNop(), 0)
	if err != nil || tries != 3 {
		t.Fatalf("ConnectionAttempts 3, refused twice: %v after %d tries", err, tries)
	}
	l.Close()

	tries, refuse = 0, 100
	o.ConnectionAttempts = 2 // Options override the config
	_, err = connect(context.Background(), o, zap.NewNop(), 0)
	if err == nil || tries != 2 || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "2 attempts") {
		t.Fatalf("always refused, 2 attempts: %v after %d tries", err, tries)
	}

	tries, refuse = 0, 100
	o.ConnectionAttempts = 0
	o.ConfigFile = "none" // ssh's default: one try
	o.Host, o.Port, o.User = "127.0.0.1", srv.port, "tester"
	o.KnownHostsFiles = []string{knownHosts(t, srv)}
	if _, err = connect(context.Background(), o, zap.NewNop(), 0); err == nil || tries != 1 || strings.Contains(err.Error(), "attempts") {
		t.Fatalf("default: %v after %d tries; want one try", err, tries)
	}
}
