package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/daemon/proto"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/target"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// The registry tests start local agents: build one (or use
// $SPINDLE_AGENT).
func TestMain(m *testing.M) {
	if _, err := testagent.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// serve runs a server of ep on a socket in a temp dir, and returns once
// it serves; served reports how Serve ended.
func serve(t *testing.T, o Options, ep Endpoint) (s *Server, served chan error) {
	t.Helper()
	if o.Socket == "" {
		o.Socket = filepath.Join(t.TempDir(), "d.sock")
	}
	if o.Idle == 0 {
		o.Idle = time.Minute
	}
	ready, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	o.Ready = w
	s = NewServer(o)
	served = make(chan error, 1)
	go func() { served <- s.Serve(ep) }()
	if line, err := bufio.NewReader(ready).ReadString('\n'); line != "ok\n" {
		t.Fatalf("daemon: %q, %v", line, err)
	}
	return s, served
}

func stop(t *testing.T, s *Server, served chan error) {
	t.Helper()
	s.Stop()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := os.Stat(s.o.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket outlived the daemon: %v", err)
	}
	if _, err := os.Stat(s.o.Socket + ".pid"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pid file outlived the daemon: %v", err)
	}
	if _, err := os.Stat(s.o.Socket + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lock file outlived the daemon: %v", err)
	}
}

// A CLI request: the handler reads stdin, asks the client's user, writes
// both streams, and its exit status and last words reach the client.
func TestCLIRequest(t *testing.T) {
	ep := &CLIEndpoint{Handle: func(ctx context.Context, req *CLIRequest) (int, string) {
		if err := req.Started("", ""); err != nil {
			return 1, err.Error()
		}
		in, _ := io.ReadAll(req.Stdin)
		answer, err := req.Ask(ctx, "Password: ", false)
		if err != nil {
			return 1, err.Error()
		}
		fmt.Fprintf(req.Stdout, "%s %s %s", req.Run.Target, in, answer)
		fmt.Fprint(req.Stderr, "to stderr")
		return 3, "spindle: the end\n"
	}}
	s, served := serve(t, Options{}, ep)
	defer stop(t, s, served)

	conn, err := Dial(s.o.Socket, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(&proto.Msg{Kind: proto.KindRun, Run: &proto.Run{Target: "web1", Argv: []string{"true"}}}); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(&out, c.Stdout) }()
	go func() { defer wg.Done(); io.Copy(&errb, c.Stderr) }()
	var exit *proto.Msg
	for exit == nil {
		m, err := c.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch m.Kind {
		case proto.KindStarted:
			io.WriteString(c.Stdin, "input")
			c.Stdin.Close()
		case proto.KindPrompt:
			if m.Text != "Password: " || m.Echo {
				t.Errorf("prompt %+v", m)
			}
			c.Send(&proto.Msg{Kind: proto.KindAnswer, Text: "s3cret"})
		case proto.KindExit:
			exit = m
		}
	}
	wg.Wait()
	if exit.Code != 3 || exit.Text != "spindle: the end\n" || out.String() != "web1 input s3cret" || errb.String() != "to stderr" {
		t.Errorf("exit %+v, stdout %q, stderr %q", exit, out.String(), errb.String())
	}
}

// A client's signal cancels its request, and the handler can tell which.
func TestCLIRequestSignal(t *testing.T) {
	ep := &CLIEndpoint{Handle: func(ctx context.Context, req *CLIRequest) (int, string) {
		req.Started("", "")
		<-ctx.Done()
		return 128 + int(req.Signal()), ""
	}}
	s, served := serve(t, Options{}, ep)
	defer stop(t, s, served)
	conn, err := Dial(s.o.Socket, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Send(&proto.Msg{Kind: proto.KindRun, Run: &proto.Run{Target: "local"}})
	for {
		m, err := c.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind == proto.KindStarted {
			c.Send(&proto.Msg{Kind: proto.KindSignal, Signal: int(syscall.SIGINT)})
		}
		if m.Kind == proto.KindExit {
			if m.Code != 130 {
				t.Errorf("exit %d after SIGINT, want 130", m.Code)
			}
			return
		}
	}
}

// A client that connects and says nothing is dropped after
// HelloTimeout, so that it cannot keep the daemon from exiting.
func TestDaemonDropsSilentClients(t *testing.T) {
	old := HelloTimeout
	HelloTimeout = 50 * time.Millisecond
	defer func() { HelloTimeout = old }()
	s, served := serve(t, Options{}, &CLIEndpoint{Handle: func(context.Context, *CLIRequest) (int, string) {
		t.Error("a silent client's request was handled")
		return 1, ""
	}})
	c, err := net.Dial("unix", s.o.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(c); err != nil { // returns when the daemon hangs up
		t.Fatalf("a silent client was not dropped: %v", err)
	}
	stop(t, s, served)
}

// endpointFunc is an Endpoint of a function.
type endpointFunc func(ctx context.Context, conn net.Conn, s *Server)

func (f endpointFunc) ServeConn(ctx context.Context, conn net.Conn, s *Server) { f(ctx, conn, s) }

// The daemon exits once no request has been active for its idle time,
// not while one is; a request sets the idle time that follows it.
func TestIdleExpiry(t *testing.T) {
	begun := make(chan struct{})
	release := make(chan struct{})
	ep := endpointFunc(func(_ context.Context, conn net.Conn, s *Server) {
		end := s.Begin(time.Millisecond)
		defer end()
		close(begun)
		<-release
	})
	s, served := serve(t, Options{Idle: time.Hour}, ep)
	c, err := net.Dial("unix", s.o.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-begun
	select {
	case err := <-served:
		t.Fatalf("the daemon expired during a request: %v", err)
	default:
	}
	close(release)
	if err := <-served; err != nil { // expires a millisecond after
		t.Errorf("Serve: %v", err)
	}
}

// A second daemon on a socket already served says "busy" and returns;
// Stop of a socket nobody serves says so.
func TestBusyAndNotRunning(t *testing.T) {
	s, served := serve(t, Options{}, endpointFunc(func(context.Context, net.Conn, *Server) {}))
	defer stop(t, s, served)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := NewServer(Options{Socket: s.o.Socket, Idle: time.Minute, Ready: w}).Serve(nil); err != nil {
		t.Errorf("a second daemon: %v", err)
	}
	if line, _ := bufio.NewReader(r).ReadString('\n'); line != "busy\n" {
		t.Errorf("a second daemon said %q, want busy", line)
	}
	if _, err := Stop(filepath.Join(t.TempDir(), "none.sock")); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Stop without a daemon: %v", err)
	}
}

// Daemons started at once on one socket: one serves, the others say
// "busy" once it does, and the socket is the one that serves.
func TestStartRace(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "d.sock")
	const n = 4
	servers := make([]*Server, n)
	served := make(chan error, n)
	lines := make(chan string, n)
	for i := range servers {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = NewServer(Options{Socket: socket, Idle: time.Minute, Ready: w})
		go func() { served <- servers[i].Serve(endpointFunc(func(context.Context, net.Conn, *Server) {})) }()
		go func() {
			defer r.Close()
			line, _ := bufio.NewReader(r).ReadString('\n')
			lines <- line
		}()
	}
	got := map[string]int{}
	for range servers {
		got[<-lines]++
	}
	if got["ok\n"] != 1 || got["busy\n"] != n-1 {
		t.Errorf("%d daemons started at once said %v: want one ok, the rest busy", n, got)
	}
	for range n - 1 {
		if err := <-served; err != nil {
			t.Errorf("a busy daemon: %v", err)
		}
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatalf("nobody serves the socket: %v", err)
	}
	c.Close()
	for _, s := range servers {
		s.Stop()
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// The registry keeps one connection per key, made once however many ask
// at once, reused while alive, replaced once dead or dropped; keys with
// the same settings share a controller.
func TestRegistry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := NewRegistry()
	defer reg.Close()
	var mu sync.Mutex
	groups, opens := 0, 0
	dialer := func(chain string) Dialer {
		return Dialer{
			NewGroup: func() (*spindle.Controller, *zap.Logger) {
				mu.Lock()
				groups++
				mu.Unlock()
				return spindle.NewController(spindle.Options{}), nil
			},
			Open: func(ctx context.Context, g *Group) (*spindle.Context, []target.Step, error) {
				mu.Lock()
				opens++
				mu.Unlock()
				t, err := target.Parse(chain)
				if err != nil {
					return nil, nil, err
				}
				steps, err := t.Steps(target.Options{})
				if err != nil {
					return nil, nil, err
				}
				cx, err := g.Routes.Open(ctx, steps)
				return cx, steps, err
			},
		}
	}
	key := Key{Settings: "flags", Target: "local"}
	conns := make([]*Conn, 4)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _, err := reg.Get(ctx, key, dialer("local"))
			if err != nil {
				t.Error(err)
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	for _, c := range conns[1:] {
		if c != conns[0] {
			t.Fatalf("one key gave several connections")
		}
	}
	if opens != 1 {
		t.Errorf("one key opened %d times", opens)
	}
	c2, reused, err := reg.Get(ctx, Key{Settings: "flags", Target: "local,local"}, dialer("local,local"))
	if err != nil || reused {
		t.Fatalf("a second target: %v, reused %v", err, reused)
	}
	if c2.Group != conns[0].Group || groups != 1 {
		t.Errorf("two targets with the same settings have %d groups", groups)
	}
	if _, _, err := reg.Get(ctx, Key{Settings: "other", Target: "local"}, dialer("local")); err != nil || groups != 2 {
		t.Errorf("other settings: %v, %d groups", err, groups)
	}

	// Dead: replaced on the next Get.
	conns[0].Context.Close()
	<-conns[0].Context.Done()
	c, reused, err := reg.Get(ctx, key, dialer("local"))
	if err != nil || reused || c == conns[0] || c.Context.Err() != nil {
		t.Errorf("after the connection died: %v, reused %v", err, reused)
	}
	// Dropped: the same.
	reg.Drop(key, c)
	c3, reused, err := reg.Get(ctx, key, dialer("local"))
	if err != nil || reused || c3 == c {
		t.Errorf("after Drop: %v, reused %v", err, reused)
	}
	// Forgotten: closed, and the next Get makes another.
	reg.Forget(key)
	<-c3.Context.Done()
	c4, reused, err := reg.Get(ctx, key, dialer("local"))
	if err != nil || reused || c4 == c3 {
		t.Errorf("after Forget: %v, reused %v", err, reused)
	}
	reg.Forget(Key{Settings: "never", Target: "seen"})
	// The dialer's failure is Get's, and leaves nothing kept.
	bad := Key{Settings: "flags", Target: "nosuch:x"}
	if _, _, err := reg.Get(ctx, bad, dialer("nosuch:x")); !errors.Is(err, target.ErrBadTarget) {
		t.Errorf("a bad target: %v", err)
	}
}
