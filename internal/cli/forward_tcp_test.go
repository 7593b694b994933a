package cli

import (
	"bufio"
	stdctx "context"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

func TestParsePortForward(t *testing.T) {
	for in, want := range map[string]portForward{
		"8080:localhost:80":                 {"tcp", "127.0.0.1:8080", "tcp", "localhost:80"},
		"0:10.0.0.7:22":                     {"tcp", "127.0.0.1:0", "tcp", "10.0.0.7:22"},
		"0.0.0.0:5432:db:5432":              {"tcp", "0.0.0.0:5432", "tcp", "db:5432"},
		"*:5432:db:5432":                    {"tcp", ":5432", "tcp", "db:5432"},
		"[::1]:8080:[fd00::7]:80":           {"tcp", "[::1]:8080", "tcp", "[fd00::7]:80"},
		"8443:intranet.example.com:443":     {"tcp", "127.0.0.1:8443", "tcp", "intranet.example.com:443"},
		"/tmp/d.sock:/var/run/docker.sock":  {"unix", "/tmp/d.sock", "unix", "/var/run/docker.sock"},
		"2375:/var/run/docker.sock":         {"tcp", "127.0.0.1:2375", "unix", "/var/run/docker.sock"},
		"0.0.0.0:2375:/var/run/docker.sock": {"tcp", "0.0.0.0:2375", "unix", "/var/run/docker.sock"},
		"/tmp/pg.sock:localhost:5432":       {"unix", "/tmp/pg.sock", "tcp", "localhost:5432"},
		"[127.0.0.1]:8080:[localhost]:80":   {"tcp", "127.0.0.1:8080", "tcp", "localhost:80"},
		"/run/user/0/x.sock:[::1]:22":       {"unix", "/run/user/0/x.sock", "tcp", "[::1]:22"},
	} {
		got, err := parsePortForward("-L", in)
		if err != nil || got != want {
			t.Errorf("parsePortForward(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "8080", "8080:host", "x:host:80", "8080:host:99999", "8080::80", "8080:host:0",
		"[::1:80:h:1", "a:b:c:d:e", "/a.sock", "relative.sock:/b.sock", "/a.sock:b:c:d"} {
		if _, err := parsePortForward("-L", bad); err == nil {
			t.Errorf("parsePortForward(%q) accepted", bad)
		}
	}
}

// spindle forward, as a user runs it: a port here reaches a server the
// target reaches; an unreachable one is reported without ending the run;
// SIGTERM ends it with status 0.
func TestE2EForward(t *testing.T) {
	checkForward(t, "-L", `^spindle: forwarding (127\.0\.0\.1:\d+) → local → (\S+)\n$`, nil)
}

// spindle forward -R: a port the target's agent listens on reaches a
// server on this side, and the listening socket is the agent's.
func TestE2EForwardRemote(t *testing.T) {
	checkForward(t, "-R", `^spindle: forwarding (127\.0\.0\.1:\d+) on local → here → (\S+)\n$`, func(cmd *osexec.Cmd, good string) {
		if owner := listenerPID(t, good); owner == cmd.Process.Pid {
			t.Fatalf("%s is listened on by spindle forward itself, not by its agent", good)
		}
	})
}

// checkForward runs spindle forward FLAG 0:SERVER FLAG 0:CLOSED local and
// checks it as a user would: each listening address is announced (lineRE
// captures it and the destination); connections to the first reach an
// upper-casing server; the one to a closed port is closed at once and
// reported, and the run goes on; SIGTERM ends it with status 0. check, if
// set, looks at the command and the good address first.
func checkForward(t *testing.T, flag, lineRE string, check func(cmd *osexec.Cmd, good string)) {
	t.Helper()
	ln := upperServer(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	cmd, r := startForward(t, flag, "0:"+ln.Addr().String(), flag, "0:"+closedAddr, "local")
	re := regexp.MustCompile(lineRE)
	var good, bad string
	for i := 0; i < 2; i++ {
		line, err := r.ReadString('\n')
		m := re.FindStringSubmatch(line)
		if err != nil || m == nil {
			t.Fatalf("spindle forward said %q (%v)", line, err)
		}
		if m[2] == closedAddr {
			bad = m[1]
		} else {
			good = m[1]
		}
	}
	if check != nil {
		check(cmd, good)
	}
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", good)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "forwarded")
		c.(*net.TCPConn).CloseWrite()
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(b) != "FORWARDED" {
			t.Fatalf("through the forward: %q, %v", b, err)
		}
	}
	c, err := net.Dial("tcp", bad)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Errorf("the forward to a closed port returned %q", b)
	}
	c.Close()
	line, _ := r.ReadString('\n')
	if !strings.Contains(line, closedAddr) || !strings.Contains(line, "refused") {
		t.Errorf("the failed connection was reported as %q", line)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	rest, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v (stderr %q)", err, rest)
	}
}

// listenerPID returns the PID of the process listening on addr (a
// 127.0.0.1 TCP port), found through /proc: the socket's inode in
// /proc/net/tcp, then the process holding it.
func listenerPID(t *testing.T, addr string) int {
	t.Helper()
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	tab, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	inode := ""
	want := fmt.Sprintf("0100007F:%04X", port)
	for _, line := range strings.Split(string(tab), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == want && f[3] == "0A" { // 0A: LISTEN
			inode = f[9]
		}
	}
	if inode == "" {
		t.Fatalf("nothing listens on %s", addr)
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && l == "socket:["+inode+"]" {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid
		}
	}
	t.Fatalf("no process holds the socket of %s", addr)
	return 0
}

// upperServer answers each connection with what it read, upper-cased,
// once the client half-closes; it stops when t ends.
func upperServer(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				c.Write([]byte(strings.ToUpper(string(b))))
			}()
		}
	}()
	return ln
}

// startForward starts `spindle forward ARGS` (killed when t ends) and
// returns it with its stderr, where it names its listening addresses.
func startForward(t *testing.T, args ...string) (*osexec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := osexec.Command(filepath.Join(binDir, "spindle"), append([]string{"forward"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, bufio.NewReader(stderr)
}

// spindle run -R: the command on the target reaches a server on this side
// through the port its agent listens on, for as long as it runs; a bad
// spec is a usage error before any connection.
func TestE2ERunWithRemoteForward(t *testing.T) {
	greeter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer greeter.Close()
	go func() {
		for {
			c, err := greeter.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "hello from the controller's side\n")
			c.Close()
		}
	}()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(free.Addr().String())
	free.Close()

	stdout, stderr, code := spindleCmd(t, "", "run", "-R", port+":"+greeter.Addr().String(), "local", "--",
		"bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+port+" && cat <&3")
	if code != 0 || stdout != "hello from the controller's side\n" {
		t.Fatalf("run -R: status %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("run -R with a fixed port printed %q; only an allocated port is worth a line", stderr)
	}
	if _, stderr, code := spindleCmd(t, "", "run", "-L", "8080:nohostport", "local", "--", "true"); code != 2 || !strings.Contains(stderr, "-L 8080:nohostport") {
		t.Errorf("a bad -L: status %d, stderr %q; want a usage error naming it", code, stderr)
	}
}

// queueListener hands out the connections queued in it, then blocks until
// closed.
type queueListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *queueListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}
func (l *queueListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *queueListener) Addr() net.Addr { return &net.TCPAddr{} }

// A forward serves at most maxForwardConns connections at once; the rest
// wait until one ends, and all are served.
func TestAcceptEachBound(t *testing.T) {
	old := maxForwardConns
	maxForwardConns = 3
	defer func() { maxForwardConns = old }()
	const total = 10
	ln := &queueListener{conns: make(chan net.Conn, total), closed: make(chan struct{})}
	for range total {
		a, b := net.Pipe()
		defer b.Close()
		ln.conns <- a
	}
	var active, most, served atomic.Int32
	started := make(chan struct{}, total)
	release := make(chan struct{})
	var wg sync.WaitGroup
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	loop := make(chan struct{})
	go func() {
		defer close(loop)
		acceptEach(ctx, ln, &wg, func(net.Conn) {
			n := active.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			started <- struct{}{}
			<-release
			active.Add(-1)
			served.Add(1)
		})
	}()
	for range 3 {
		<-started
	}
	// Were the bound missing, the seven queued connections would start
	// now, while three are held.
	for range total - 3 {
		release <- struct{}{}
		<-started
	}
	close(release)
	ln.Close()
	<-loop
	wg.Wait()
	if most.Load() > 3 || served.Load() != total {
		t.Errorf("at most %d at once, %d served; want at most 3, and %d", most.Load(), served.Load(), total)
	}
}
