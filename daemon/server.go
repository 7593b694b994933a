package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-rpc/spindle/services/tunnel"
	"go.uber.org/zap"
)

// An Endpoint speaks one protocol to the clients of a socket.
type Endpoint interface {
	// ServeConn serves one client's connection and returns when it is
	// done with it (the server closes conn then). ctx ends when the
	// daemon is told to stop by a signal: the client's request ends
	// too. While a request runs, the endpoint holds s.Begin's activity,
	// which keeps the daemon from expiring.
	ServeConn(ctx context.Context, conn net.Conn, s *Server)
}

// Options configure a Server.
type Options struct {
	// Socket is the Unix socket to serve: made 0600, in a directory that
	// should be the user's alone (Socket() makes one). Its pid file,
	// Socket+".pid", names the daemon's process for Stop.
	Socket string
	// Idle is how long the daemon lives on with no request active; a
	// request can change it (Begin).
	Idle time.Duration
	// Log is the daemon's own logger; nil: none.
	Log *zap.Logger
	// Ready, if set, hears one line once: "ok" when the socket listens,
	// "busy" when another daemon serves it already (Serve then returns
	// nil), or why the daemon cannot serve. It is closed after.
	Ready io.WriteCloser
	// Signals: SIGTERM and SIGINT stop the daemon, ending the requests
	// running, and SIGHUP is ignored (a daemon started by a terminal's
	// command outlives the terminal). For a daemon process of its own.
	Signals bool
}

// Server accepts clients on a Unix socket and hands each to an Endpoint,
// until no request has been active for the idle time, a signal, or Stop.
type Server struct {
	o   Options
	log *zap.Logger

	mu     sync.Mutex
	active int           // requests running
	idle   time.Duration // the latest request's idle time
	idleT  *time.Timer
	quit   chan struct{} // closed when the daemon should stop
	once   sync.Once
	// ctx is the requests' parent: cancelled by a signal, which ends
	// them; not when the daemon stops for being idle.
	ctx    context.Context
	cancel context.CancelFunc
}

// NewServer returns a server of o, not serving yet.
func NewServer(o Options) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	return &Server{o: o, log: log, idle: o.Idle, quit: make(chan struct{}), ctx: ctx, cancel: cancel}
}

// Stop makes Serve return once the requests running have ended.
func (s *Server) Stop() { s.once.Do(func() { close(s.quit) }) }

// Serve serves the socket through ep until the daemon stops, and returns
// once every client's connection has ended.
func (s *Server) Serve(ep Endpoint) error {
	say := func(msg string) {
		if s.o.Ready != nil {
			fmt.Fprintln(s.o.Ready, msg)
			s.o.Ready.Close()
			s.o.Ready = nil
		}
	}
	socket := s.o.Socket
	// One daemon per socket: two started at once (two clients that
	// found none) would otherwise both listen, the later one removing
	// the earlier one's socket as stale, and the earlier one, when it
	// exits, the later one's. The lock is held for the daemon's life;
	// the loser waits for the winner to listen, and is "busy".
	lock, busy, err := lockOrWait(socket)
	if err != nil {
		say(err.Error())
		return err
	}
	if busy {
		say("busy")
		return nil
	}
	defer unlock(lock)
	ln, err := tunnel.ListenUnixPrivate(socket)
	if err != nil {
		say(err.Error())
		return err
	}
	defer ln.Close()
	// The pid beside the socket: kill it to close every kept connection.
	pidFile := socket + ".pid"
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		say(err.Error())
		return err
	}
	defer os.Remove(pidFile)
	s.mu.Lock()
	s.idleT = time.AfterFunc(s.idle, s.expire)
	s.mu.Unlock()
	sigs := make(chan os.Signal, 1)
	if s.o.Signals {
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(sigs)
		signal.Ignore(syscall.SIGHUP)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-sigs:
			s.cancel() // the requests running end too
			s.Stop()
		case <-s.quit:
		}
		ln.Close()
	}()
	s.log.Info("daemon serving", zap.String("socket", socket), zap.Duration("idle", s.idle))
	say("ok")
	var wg sync.WaitGroup
	for {
		conn, err := ln.Accept()
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			ep.ServeConn(s.ctx, conn, s)
		}()
	}
	s.Stop()
	<-stopped
	wg.Wait()
	s.cancel()
	s.mu.Lock()
	s.idleT.Stop()
	s.mu.Unlock()
	s.log.Info("daemon stopped")
	return nil
}

// lockSocket takes the lock of socket's daemon (socket+".lock", flock),
// or returns nil when another daemon holds it. The daemon removes the
// file when it exits, before releasing the lock: a lock taken on a file
// removed meanwhile is no lock, and is taken again on the new one.
func lockSocket(socket string) (*os.File, error) {
	path := socket + ".lock"
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, nil
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		held, err1 := f.Stat()
		now, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			return f, nil
		}
		f.Close()
	}
}

// unlock removes the lock file, then releases the lock.
func unlock(f *os.File) {
	os.Remove(f.Name())
	f.Close()
}

// ServeWait bounds how long a daemon that lost the start waits for the
// winner to listen.
var ServeWait = 10 * time.Second

// lockOrWait takes socket's lock, or waits until another daemon serves
// socket (busy), or takes the lock once that daemon exits instead.
func lockOrWait(socket string) (lock *os.File, busy bool, err error) {
	deadline := time.Now().Add(ServeWait)
	for {
		if lock, err = lockSocket(socket); lock != nil || err != nil {
			return lock, false, err
		}
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			return nil, true, nil
		}
		if time.Now().After(deadline) {
			return nil, false, fmt.Errorf("another daemon holds %s.lock but has not served %s for %s", socket, socket, ServeWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expire stops the daemon if no request runs.
func (s *Server) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == 0 {
		s.Stop()
	}
}

// Begin marks a request active until end is called: the daemon does not
// expire meanwhile, and its idle time becomes idle when that is positive
// (the latest client's persist time).
func (s *Server) Begin(idle time.Duration) (end func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active++
	if idle > 0 {
		s.idle = idle
	}
	s.idleT.Stop()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.active--
			if s.active == 0 {
				s.idleT.Reset(s.idle)
			}
		})
	}
}

// ErrNotRunning is Stop's answer when no daemon serves the socket.
var ErrNotRunning = errors.New("no daemon runs for this socket")

// Stop stops the daemon serving socket, through its pid file, and waits
// (10 s at most) until the socket is gone. Only a process whose command
// line names socket (as the argv given to Start does) is signalled: a
// pid file left by a killed daemon may name another process by now. It
// returns the daemon's pid, or ErrNotRunning (wrapped, saying so when a
// stale pid file was removed).
func Stop(socket string) (pid int, err error) {
	b, err := os.ReadFile(socket + ".pid")
	if errors.Is(err, os.ErrNotExist) {
		return 0, ErrNotRunning
	}
	if err != nil {
		return 0, err
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s.pid: no pid in %q", socket, b)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	c, derr := net.Dial("unix", socket)
	if derr == nil {
		c.Close()
	}
	if derr != nil || !bytes.Contains(cmdline, []byte(socket)) {
		os.Remove(socket + ".pid")
		return 0, fmt.Errorf("%w (a stale pid file was removed)", ErrNotRunning)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return pid, fmt.Errorf("stop the daemon (pid %d): %w", pid, err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Stat(socket); errors.Is(err, os.ErrNotExist) {
			return pid, nil
		}
		select {
		case <-tick.C:
		case <-deadline:
			return pid, fmt.Errorf("the daemon (pid %d) still serves %s after 10 s", pid, socket)
		}
	}
}
