package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle/internal/daemonproto"
	"github.com/spindle-rpc/spindle/version"
	"go.uber.org/zap"
)

// PersistEnv gives --persist's default.
const PersistEnv = "SPINDLE_PERSIST"

// persistDefault is --persist's default: $SPINDLE_PERSIST, else 0.
func persistDefault() time.Duration {
	d, err := time.ParseDuration(os.Getenv(PersistEnv))
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// persistFlag adds --persist to c (run, shell, cp).
func persistFlag(c *cobra.Command, g *globals) {
	c.Flags().DurationVar(&g.persist, "persist", persistDefault(),
		"keep the connection open this long after the command, for the next one (like ssh's ControlPersist; default $"+PersistEnv+", else 0: not)")
}

// volatileEnv are the variables that may differ between two commands that
// should share a daemon: a shell's bookkeeping, not what a connection
// reads.
var volatileEnv = []string{"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES", "TERM", PersistEnv}

// daemonSocket is the daemon's socket for this user, environment and
// spindle: $XDG_RUNTIME_DIR/spindle-daemon, else
// $TMPDIR/spindle-daemon-UID (a directory of the user's, 0700, apart from
// the agent caches that a user may empty), then daemon-HASH.sock. The hash covers
// the environment (less volatileEnv), so that a daemon never connects
// with another SSH agent, HOME or PATH than the command would have, and
// the executable and its version, so that a new spindle never talks to an
// old daemon.
func daemonSocket() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("spindle-daemon-%d", os.Getuid()))
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
		if fi, err := os.Stat(rt); err == nil && fi.IsDir() {
			dir = filepath.Join(rt, "spindle-daemon")
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || st == nil || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s must be a directory of uid %d with mode 0700, not a symlink", dir, os.Getuid())
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(volatileEnv, name) {
			env = append(env, kv)
		}
	}
	slices.Sort(env)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", version.Version, exe, strings.Join(env, "\x00"))
	return filepath.Join(dir, "daemon-"+hex.EncodeToString(h.Sum(nil))[:16]+".sock"), nil
}

// dialDaemon connects to the daemon at socket, starting it first when
// none listens there.
func (g *globals) dialDaemon(socket string) (net.Conn, error) {
	if c, err := net.Dial("unix", socket); err == nil {
		return c, nil
	}
	if err := startDaemon(socket, g.persist, g.verbose); err != nil {
		return nil, err
	}
	return net.Dial("unix", socket)
}

// startDaemon starts `spindle daemon` in the background, in a session of
// its own (a terminal's hangup does not end it), in / (it keeps no
// directory busy), and waits until it serves socket. It logs to
// socket.log.
func startDaemon(socket string, idle time.Duration, verbose int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	args := []string{"daemon", "--socket", socket, "--idle", idle.String(), "--log", socket + ".log", "--ready-fd", "3"}
	for range verbose {
		args = append(args, "-v")
	}
	cmd := osexec.Command(exe, args...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("start the spindle daemon: %w", err)
	}
	defer cmd.Process.Release()                         //nolint:errcheck // it runs on alone
	r.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a pipe has deadlines
	line, err := bufio.NewReader(r).ReadString('\n')
	switch line = strings.TrimSpace(line); {
	case line == "ok", line == "busy": // busy: another one started first
		return nil
	case err != nil && line == "":
		return fmt.Errorf("the spindle daemon did not start: %w (see %s.log)", err, socket)
	}
	return fmt.Errorf("the spindle daemon did not start: %s", line)
}

// persistOpts are what a command run through the daemon asks for
// besides its command line.
type persistOpts struct {
	forwardAgent bool // -A
	// shell: a terminal command (spindle shell), with escape the -e or
	// -o EscapeChar given ("" for ssh_config's or ~).
	shell  bool
	escape string
	// copy: a spindle cp instead of a command.
	copy *daemonproto.Copy
	// exitText, if set, takes what the daemon says the CLI would have
	// printed on stderr at the end (its error and hint), instead of
	// stderr: run over many targets prints it with the target's name.
	exitText *string
}

// runPersistent runs argv on target through the daemon. It returns
// handled false, and logs why at -v, when the daemon cannot be reached
// or started: the caller then runs the command itself.
func (g *globals) runPersistent(target string, argv []string, o persistOpts) (handled bool, err error) {
	log := g.logger()
	fail := func(err error) (bool, error) {
		log.Info("not through the daemon: " + err.Error())
		return false, nil
	}
	socket, err := daemonSocket()
	if err != nil {
		return fail(err)
	}
	conn, err := g.dialDaemon(socket)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	ys, err := yamux.Client(conn, daemonYamux())
	if err != nil {
		return fail(err)
	}
	defer ys.Close()
	streams := make([]net.Conn, 4)
	for i, role := range []daemonproto.Role{daemonproto.RoleControl, daemonproto.RoleStdin, daemonproto.RoleStdout, daemonproto.RoleStderr} {
		st, err := ys.Open()
		if err == nil {
			_, err = st.Write([]byte{byte(role)})
		}
		if err != nil {
			return fail(err)
		}
		streams[i] = st
	}
	control, stdin, stdout, stderr := streams[0], streams[1], streams[2], streams[3]
	run, err := g.persistRequest(target, argv, o.forwardAgent)
	if err != nil {
		return true, err
	}
	run.Copy = o.copy
	var term *shellTerminal
	if o.shell {
		term = newShellTerminal(g)
		run.PTY, run.Term, run.Escape = true, term.termName(), o.escape
		run.Rows, run.Cols, _ = term.size()
	}
	if err := daemonproto.WriteMsg(control, &daemonproto.Msg{Kind: daemonproto.KindRun, Run: run}); err != nil {
		return fail(err)
	}
	log.Info("through the daemon", zap.String("socket", socket))

	outDone, errDone := make(chan struct{}), make(chan struct{})
	copying := false
	copyOutput := func() {
		if copying {
			return
		}
		copying = true
		go func() { io.Copy(g.stdout, stdout); close(outDone) }() //nolint:errcheck // to the end
		go func() { io.Copy(g.stderr, stderr); close(errDone) }() //nolint:errcheck // to the end
	}
	if term == nil {
		copyOutput()
	} // else once the terminal is raw, or its \n would turn into \r\r\n

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	msgs := make(chan *daemonproto.Msg)
	readErr := make(chan error, 1)
	go func() {
		for {
			m, err := daemonproto.ReadMsg(control)
			if err != nil {
				readErr <- err
				return
			}
			msgs <- m
			if m.Kind == daemonproto.KindExit {
				return
			}
		}
	}()
	var wmu sync.Mutex
	send := func(m *daemonproto.Msg) {
		wmu.Lock()
		defer wmu.Unlock()
		daemonproto.WriteMsg(control, m) //nolint:errcheck // the daemon may be gone; its exit says
	}
	heard := false      // anything from the daemon: it has the request
	var detach func()   // a terminal command's: the terminal back as it was
	var attachErr error // why the terminal could not be used
	for {
		select {
		case s := <-sigs:
			send(&daemonproto.Msg{Kind: daemonproto.KindSignal, Signal: int(s.(syscall.Signal))})
		case err := <-readErr:
			if !heard {
				// Gone before a word (it stopped, idle, as we
				// connected): the command has not started anywhere.
				return fail(fmt.Errorf("the daemon closed the connection: %w", err))
			}
			return true, &connectError{err: fmt.Errorf("the spindle daemon (%s) went away: %w", socket, err)}
		case m := <-msgs:
			heard = true
			switch m.Kind {
			case daemonproto.KindPrompt:
				// Asked here, on this terminal, in its own goroutine:
				// a signal must still get through while it waits.
				go func() {
					answer, err := g.answer(m.Text, m.Echo)
					reply := &daemonproto.Msg{Kind: daemonproto.KindAnswer, Text: answer}
					if err != nil {
						reply.Err = err.Error()
					}
					send(reply)
				}()
			case daemonproto.KindStarted:
				// Only now: a question may have needed the terminal.
				if term != nil {
					esc, err := parseShellEscape(m.Escape)
					if err == nil {
						detach, err = term.attach(g, esc, stdin, func(rows, cols uint16) {
							send(&daemonproto.Msg{Kind: daemonproto.KindResize, Rows: rows, Cols: cols})
						}, func() { send(&daemonproto.Msg{Kind: daemonproto.KindClose}) })
					}
					if err != nil {
						attachErr = err
						send(&daemonproto.Msg{Kind: daemonproto.KindSignal, Signal: int(syscall.SIGHUP)})
					}
					copyOutput()
				} else if g.stdin != nil {
					go func() {
						io.Copy(stdin, g.stdin) //nolint:errcheck // the command may exit first
						stdin.Close()
					}()
				} else {
					stdin.Close()
				}
			case daemonproto.KindExit:
				copyOutput() // if it ended before it started
				<-outDone
				<-errDone
				if detach != nil {
					detach()
				}
				if attachErr != nil {
					return true, attachErr
				}
				if o.exitText != nil {
					*o.exitText = m.Text
				} else {
					io.WriteString(g.stderr, m.Text) //nolint:errcheck // the user's stderr
				}
				return true, &exitError{code: m.Code}
			}
		}
	}
}

// answer asks the user what the daemon asks, as the CLI itself would: on
// the terminal, echoed or not; without one there is no answer.
func (g *globals) answer(text string, echo bool) (string, error) {
	if !g.conn.interactive {
		return "", errors.New("no terminal to ask on")
	}
	if echo {
		ask := g.conn.ask
		if ask == nil {
			ask = readLineTTY
		}
		return ask(text)
	}
	prompt := g.conn.prompt
	if prompt == nil {
		prompt = readSecretTTY
	}
	return prompt(text)
}

// persistRequest is the daemon's request for argv on target with this
// command's flags; relative paths become absolute (the daemon runs in /).
func (g *globals) persistRequest(target string, argv []string, forwardAgent bool) (*daemonproto.Run, error) {
	abs := func(p string) (string, error) {
		if p == "" || p == "none" || filepath.IsAbs(p) || strings.HasPrefix(p, "~") {
			return p, nil
		}
		return filepath.Abs(p)
	}
	c := &g.conn
	cfg, err := abs(c.configFile)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, id := range c.identities {
		a, err := abs(id)
		if err != nil {
			return nil, err
		}
		ids = append(ids, a)
	}
	return &daemonproto.Run{
		Version: version.Version, Target: target, Argv: argv, Via: g.via,
		ConfigFile: cfg, Identities: ids, Options: c.sshOpts, HostKeyPolicy: c.hostKeyPolicy,
		PasswordEnv: c.passwordEnv, BecomePasswordEnv: c.become.passwordEnv, AskBecomePass: c.become.ask,
		ForwardAgent: forwardAgent, TimeoutNS: int64(g.timeout), Interactive: c.interactive, PersistNS: int64(g.persist),
		Verbose: g.verbose,
	}, nil
}

// stopDaemons stops the daemons whose sockets are under the runtime dir
// rt (the bench's own), through the pid files beside the sockets.
func stopDaemons(rt string) {
	pids, _ := filepath.Glob(filepath.Join(rt, "spindle-daemon", "*.pid"))
	for _, f := range pids {
		if b, err := os.ReadFile(f); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGTERM) //nolint:errcheck // it may be gone
			}
		}
	}
}

// parseShellEscape reads the escape character the daemon settled on.
func parseShellEscape(v string) (shellEscape, error) {
	c, on, err := parseEscapeChar(v)
	return shellEscape{c: c, on: on}, err
}
