package spindle_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/fs"
	"github.com/spindle-rpc/spindle/services/sys"
	gossh "golang.org/x/crypto/ssh"
)

// Every kind of errkind is re-exported by the root package and is what
// errors.Is finds on an error that reaches a user through the real path:
// an agent's error reply decoded from the wire, a call the controller
// fails, a connector's refusal. Each error also names its context chain
// and matches no other kind (ErrRemote aside, which every agent's error
// is).
func TestEveryKindReachesTheUser(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // keep the user's ssh keys, agent and config out
	t.Setenv("SSH_AUTH_SOCK", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	cx, err := ctl.Connect(ctx, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		root    error // the root package's re-export
		kind    error // errkind's
		produce func(t *testing.T) error
	}{
		{"ErrDisconnected", spindle.ErrDisconnected, errkind.ErrDisconnected, func(t *testing.T) error {
			gone, err := ctl.Connect(ctx, local.Options{ContextName: "gone"})
			if err != nil {
				t.Fatal(err)
			}
			gone.Close()
			return sys.Ping(ctx, gone)
		}},
		{"ErrTimeout", spindle.ErrTimeout, errkind.ErrTimeout, func(t *testing.T) error {
			expired, cancel := context.WithDeadline(ctx, time.Now())
			defer cancel()
			_, err := exec.Run(expired, cx, exec.Cmd{Argv: []string{"sleep", "1000"}})
			return err
		}},
		{"ErrCanceled", spindle.ErrCanceled, errkind.ErrCanceled, func(t *testing.T) error {
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			_, err := exec.Run(cancelled, cx, exec.Cmd{Argv: []string{"sleep", "1000"}})
			return err
		}},
		{"ErrRemote", spindle.ErrRemote, errkind.ErrRemote, func(t *testing.T) error {
			// ENOTDIR has no kind of its own: only ErrRemote.
			_, err := fs.Stat(ctx, cx, file+"/below")
			return err
		}},
		{"ErrPermission", spindle.ErrPermission, errkind.ErrPermission, func(t *testing.T) error {
			_, err := exec.Run(ctx, cx, exec.Cmd{Argv: []string{file}}) // not executable, even for root
			return err
		}},
		{"ErrNotFound", spindle.ErrNotFound, errkind.ErrNotFound, func(t *testing.T) error {
			_, err := exec.Run(ctx, cx, exec.Cmd{Argv: []string{filepath.Join(dir, "no-such-program")}})
			return err
		}},
		{"ErrExists", spindle.ErrExists, errkind.ErrExists, func(t *testing.T) error {
			_, err := fs.Mkdir(ctx, cx, file, 0o755, false)
			return err
		}},
		{"ErrUnknownMethod", spindle.ErrUnknownMethod, errkind.ErrUnknownMethod, func(t *testing.T) error {
			return cx.Call(ctx, "no.Such", nil, nil)
		}},
		{"ErrBadArgs", spindle.ErrBadArgs, errkind.ErrBadArgs, func(t *testing.T) error {
			_, err := fs.Read(ctx, cx, "relative/path", 0)
			return err
		}},
		{"ErrAuth", spindle.ErrAuth, errkind.ErrAuth, func(t *testing.T) error {
			srv := startSSHServer(t)
			_, err := ctl.Connect(ctx, srv.options(srv.knownHosts(t)))
			return err
		}},
		{"ErrHostKey", spindle.ErrHostKey, errkind.ErrHostKey, func(t *testing.T) error {
			srv := startSSHServer(t)
			_, err := ctl.Connect(ctx, srv.options(filepath.Join(t.TempDir(), "empty_known_hosts")))
			return err
		}},
		{"ErrTooLarge", spindle.ErrTooLarge, errkind.ErrTooLarge, func(t *testing.T) error {
			_, err := fs.Read(ctx, cx, file, 1)
			return err
		}},
		{"ErrStalled", spindle.ErrStalled, errkind.ErrStalled, func(t *testing.T) error {
			return stalledCall(ctx, t)
		}},
		{"ErrTooManyChildren", spindle.ErrTooManyChildren, errkind.ErrTooManyChildren, func(t *testing.T) error {
			small := spindle.NewController(spindle.Options{MaxChildren: 1})
			defer small.Close()
			parent, err := small.Connect(ctx, local.Options{})
			if err != nil {
				t.Fatal(err)
			}
			child, err := parent.Connect(ctx, local.Options{ContextName: "busy"})
			if err != nil {
				t.Fatal(err)
			}
			busy, stop := context.WithCancel(ctx)
			call := child.Go(busy, exec.MethodRun, &exec.Cmd{Argv: []string{"sleep", "1000"}})
			defer func() {
				stop()
				call.Wait(nil)
			}()
			_, err = parent.Connect(ctx, local.Options{ContextName: "one-too-many"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root != tc.kind {
				t.Fatalf("spindle.%s is not errkind.%s", tc.name, tc.name)
			}
			err := tc.produce(t)
			if !errors.Is(err, tc.root) {
				t.Fatalf("got %v, want an error that errors.Is spindle.%s", err, tc.name)
			}
			t.Log(err)
			var e *spindle.Error
			if !errors.As(err, &e) || e.Chain == "" {
				t.Errorf("%v does not name its context chain", err)
			}
			for _, other := range errkind.All() {
				if other != tc.kind && other != errkind.ErrRemote && errors.Is(err, other) {
					t.Errorf("%v is also of kind %q", err, other)
				}
			}
		})
	}
}

// The table above covers every kind: a kind added to errkind without a
// re-export and a row there fails here.
func TestEveryKindIsTested(t *testing.T) {
	tested := []error{
		spindle.ErrDisconnected, spindle.ErrTimeout, spindle.ErrCanceled, spindle.ErrRemote,
		spindle.ErrPermission, spindle.ErrNotFound, spindle.ErrExists, spindle.ErrUnknownMethod,
		spindle.ErrBadArgs, spindle.ErrAuth, spindle.ErrHostKey, spindle.ErrTooLarge,
		spindle.ErrStalled, spindle.ErrTooManyChildren,
	}
	for _, k := range errkind.All() {
		if !slices.Contains(tested, k) {
			t.Errorf("errkind kind %q has no spindle.Err re-export tested in TestEveryKindReachesTheUser", k)
		}
	}
	if len(tested) != len(errkind.All()) {
		t.Errorf("%d kinds tested, errkind has %d", len(tested), len(errkind.All()))
	}
}

// stalledCall stops a child agent behind a local parent, then calls it with
// 1 MiB of arguments until the parent, whose queue toward it is full,
// refuses a call; it returns that call's error. The child is resumed, and
// the calls let in are answered, before it returns.
func stalledCall(ctx context.Context, t *testing.T) error {
	// No stall bound: the calls let in wait for the child to come back.
	ctl := spindle.NewController(spindle.Options{Router: router.Options{StallTimeout: -1}})
	defer ctl.Close()
	parent, err := ctl.Connect(ctx, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	child, err := parent.Connect(ctx, local.Options{ContextName: "stopped"})
	if err != nil {
		t.Fatal(err)
	}
	pid := child.Hello().PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	// 16 MiB: more than the child's pipe (1 MiB) and the parent's queue
	// toward it (4 MiB) hold.
	const calls = 16
	args := make([]byte, 1<<20)
	errs := make(chan error, calls)
	for range calls {
		f := child.Go(ctx, "no.Such", args)
		go func() { errs <- f.Wait(nil) }()
	}
	// Only refusals come back while the child is stopped.
	refused := <-errs
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for range calls - 1 {
		<-errs
	}
	return refused
}

// sshServer is an in-process SSH server that accepts no login: enough for
// the connector to check its host key and fail to authenticate.
type sshServer struct {
	ln  net.Listener
	key gossh.Signer
}

func startSSHServer(t *testing.T) *sshServer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &gossh.ServerConfig{PasswordCallback: func(gossh.ConnMetadata, []byte) (*gossh.Permissions, error) {
		return nil, errors.New("denied")
	}}
	cfg.AddHostKey(key)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				if sc, _, _, err := gossh.NewServerConn(c, cfg); err == nil {
					sc.Close()
				}
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return &sshServer{ln: ln, key: key}
}

func (s *sshServer) knownHosts(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "known_hosts")
	line := "[127.0.0.1]:" + strconv.Itoa(s.ln.Addr().(*net.TCPAddr).Port) + " " + string(gossh.MarshalAuthorizedKey(s.key.PublicKey()))
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (s *sshServer) options(knownHosts string) ssh.Options {
	port := s.ln.Addr().(*net.TCPAddr).Port
	return ssh.Options{Host: "127.0.0.1", Port: port, User: "tester", Password: "wrong",
		ConfigFile: "none", IdentityAgent: "none", KnownHostsFiles: []string{knownHosts},
		HostKeyPolicy: ssh.HostKeyStrict, ConnectionAttempts: 1}
}
