package ssh

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ProxyCommand support: ssh_config's ProxyCommand (or Options.ProxyCommand)
// is run the way ssh runs it, and its stdin and stdout become the
// connection to the SSH server. It is how many sites reach hosts that
// ProxyJump cannot: `ssh -W %h:%p bastion` written before ProxyJump
// existed, `aws ssm start-session`, `cloudflared access ssh`, `nc -X 5 -x
// socks:1080 %h %p`, and Ansible's classic bastion recipe
// (ansible_ssh_common_args='-o ProxyCommand="ssh -W %h:%p -q bastion"').

// proxyWaitDelay bounds how long closing the connection waits for the
// command's stderr after the command exited: a descendant it left running
// may hold the pipe.
const proxyWaitDelay = time.Second

// proxyKillDelay is how long a proxy command gets to exit after its
// hangup before it is killed.
const proxyKillDelay = 2 * time.Second

// proxyStderrTail is how much of the command's stderr an error quotes.
const proxyStderrTail = 2048

// expandProxyCommand expands ProxyCommand's %-tokens as ssh does: %h the
// host name to connect to, %p the port, %r the remote user, %n the host as
// the user named it, %k the host key alias (else the host name), %u the
// local user, %d the local home, %i the local uid, %l and %L the local host
// name (full, first label), %%. Any other token is an error, as in ssh.
func expandProxyCommand(command string, s *settings, keyHost string) (string, error) {
	if !strings.Contains(command, "%") {
		return command, nil
	}
	full, _ := os.Hostname()
	short := full
	if i := strings.IndexByte(short, '.'); i > 0 {
		short = short[:i]
	}
	localUser := ""
	if u, err := user.Current(); err == nil {
		localUser = u.Username
	}
	tk := map[byte]string{
		'h': s.hostname, 'p': strconv.Itoa(s.port), 'r': s.user, 'n': s.display, 'k': keyHost,
		'u': localUser, 'd': homeDir(), 'i': strconv.Itoa(os.Getuid()), 'l': full, 'L': short,
	}
	var b strings.Builder
	for i := 0; i < len(command); i++ {
		if command[i] != '%' {
			b.WriteByte(command[i])
			continue
		}
		if i+1 == len(command) {
			return "", fmt.Errorf("ProxyCommand %q ends with a lone %%", command)
		}
		i++
		if command[i] == '%' {
			b.WriteByte('%')
			continue
		}
		v, ok := tk[command[i]]
		if !ok {
			return "", fmt.Errorf("ProxyCommand %q: unknown token %%%c (known: %%h %%p %%r %%n %%k %%u %%d %%i %%l %%L %%%%)", command, command[i])
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// dialProxyCommand starts command (already expanded) as ssh does, `exec
// COMMAND` through the user's shell ($SHELL, else /bin/sh), and returns
// the connection over its stdin and stdout. Its stderr is logged at info
// level and the end of it kept for error messages. The command is not
// tied to a context: it lives as long as the connection, whose Close
// hangs it up (SIGHUP, as ssh does) and reaps it.
func dialProxyCommand(command, source, host string, log *zap.Logger) (*proxyConn, error) {
	shell := os.Getenv("SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	// Our ends are non-blocking (os.Pipe), so that deadlines work; the
	// child's ends, handed over through exec, are made blocking.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	c := &proxyConn{command: command, source: source,
		stderr: &stderrTail{log: log.With(zap.String("host", host), zap.String("proxy_command", command)),
			level: zap.InfoLevel, msg: "proxy command stderr"}}
	c.cmd = exec.Command(shell, "-c", "exec "+command)
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = inR, outW, c.stderr
	c.cmd.WaitDelay = proxyWaitDelay
	err = c.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("ProxyCommand %q (%s): cannot start %s: %w", command, source, shell, err)
	}
	c.r, c.w = outR, inW
	log.Debug("proxy command started", zap.String("host", host), zap.String("proxy_command", command), zap.Int("pid", c.cmd.Process.Pid))
	return c, nil
}

// proxyConn is a net.Conn over a proxy command's stdin and stdout.
type proxyConn struct {
	cmd     *exec.Cmd
	r       *os.File // the command's stdout
	w       *os.File // the command's stdin
	command string
	source  string // where the command came from, for messages
	stderr  *stderrTail

	closeOnce sync.Once
}

func (c *proxyConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *proxyConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close closes the pipes, hangs the command up if it is still running and
// reaps it (waiting at most proxyWaitDelay for its stderr). A command that
// ignores the hangup is killed after proxyKillDelay.
func (c *proxyConn) Close() error {
	c.closeOnce.Do(func() {
		c.w.Close()
		c.r.Close()
		// Harmless if it has exited already: it is a zombie until Wait.
		c.cmd.Process.Signal(syscall.SIGHUP)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.cmd.Wait()
		}()
		t := time.NewTimer(proxyKillDelay)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			c.cmd.Process.Kill()
			<-done
		}
	})
	return nil
}

func (c *proxyConn) LocalAddr() net.Addr  { return proxyAddr(c.command) }
func (c *proxyConn) RemoteAddr() net.Addr { return proxyAddr(c.command) }

func (c *proxyConn) SetDeadline(t time.Time) error {
	return errors.Join(c.r.SetReadDeadline(t), c.w.SetWriteDeadline(t))
}
func (c *proxyConn) SetReadDeadline(t time.Time) error  { return c.r.SetReadDeadline(t) }
func (c *proxyConn) SetWriteDeadline(t time.Time) error { return c.w.SetWriteDeadline(t) }

// explain adds to a failed handshake's err what the command said and how
// it ended, closing the connection first so that both are known. A command
// that exited by itself (nc refused, the bastion unreachable, a typo) is
// the cause, and the error leads with it; one that was still running when
// Close hung it up was not.
func (c *proxyConn) explain(err error) error {
	c.Close()
	said := c.stderr.String()
	if st := c.cmd.ProcessState; st != nil && st.Exited() {
		msg := fmt.Sprintf("ProxyCommand %q (%s) exited with status %d", c.command, c.source, st.ExitCode())
		if said != "" {
			msg += ": " + said
		} else {
			msg += " and printed nothing on stderr"
		}
		return &errkind.Error{Msg: msg + " (" + err.Error() + ")", Err: err}
	}
	msg := err.Error() + " (through ProxyCommand " + strconv.Quote(c.command)
	if said != "" {
		msg += ", which said: " + said
	}
	return &errkind.Error{Msg: msg + ")", Err: err}
}

type proxyAddr string

func (proxyAddr) Network() string  { return "proxycommand" }
func (a proxyAddr) String() string { return string(a) }

// stderrTail logs a remote or proxy command's stderr line by line (a
// proxy command's at info level: ssh shows it on the terminal, the CLI
// does at -v) and keeps its last proxyStderrTail bytes for errors.
type stderrTail struct {
	log   *zap.Logger
	level zapcore.Level
	msg   string
	mu    sync.Mutex
	tail  []byte
	line  []byte // an incomplete line
}

func (s *stderrTail) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tail = append(s.tail, p...)
	if over := len(s.tail) - proxyStderrTail; over > 0 {
		s.tail = append(s.tail[:0], s.tail[over:]...)
	}
	s.line = append(s.line, p...)
	for {
		i := bytes.IndexByte(s.line, '\n')
		if i < 0 {
			break
		}
		s.log.Log(s.level, s.msg, zap.ByteString("line", bytes.TrimRight(s.line[:i], "\r")))
		s.line = s.line[i+1:]
	}
	if len(s.line) > proxyStderrTail {
		s.log.Log(s.level, s.msg, zap.ByteString("line", s.line))
		s.line = s.line[:0]
	}
	return len(p), nil
}

// String is the kept stderr on one line: lines joined with "; ", and
// control characters removed (it goes into an error message).
func (s *stderrTail) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for _, l := range strings.Split(string(s.tail), "\n") {
		l = strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f {
				return -1
			}
			return r
		}, l)
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}
