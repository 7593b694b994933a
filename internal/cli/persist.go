package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle/daemon"
	"github.com/spindle-rpc/spindle/daemon/proto"
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

// daemonSocket is the daemon's socket for this environment (daemon.Socket):
// --persist's default is not part of what a connection reads.
func daemonSocket() (string, error) { return daemon.Socket(PersistEnv) }

// dialDaemon connects to the daemon at socket, starting it first when
// none listens there: `spindle daemon` in the background, logging to
// socket.log.
func (g *globals) dialDaemon(socket string) (net.Conn, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := []string{exe, "daemon", "--socket", socket, "--idle", g.persist.String(), "--log", socket + ".log",
		"--ready-fd", strconv.Itoa(daemon.ReadyFD)}
	for range g.verbose {
		argv = append(argv, "-v")
	}
	return daemon.Dial(socket, argv)
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
	copy *proto.Copy
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
	dc, err := daemon.NewClient(conn)
	if err != nil {
		return fail(err)
	}
	defer dc.Close()
	stdin, stdout, stderr := dc.Stdin, dc.Stdout, dc.Stderr
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
	if err := dc.Send(&proto.Msg{Kind: proto.KindRun, Run: run}); err != nil {
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
	msgs := make(chan *proto.Msg)
	readErr := make(chan error, 1)
	go func() {
		for {
			m, err := dc.Recv()
			if err != nil {
				readErr <- err
				return
			}
			msgs <- m
			if m.Kind == proto.KindExit {
				return
			}
		}
	}()
	send := func(m *proto.Msg) {
		dc.Send(m) //nolint:errcheck // the daemon may be gone; its exit says
	}
	heard := false      // anything from the daemon: it has the request
	var detach func()   // a terminal command's: the terminal back as it was
	var attachErr error // why the terminal could not be used
	for {
		select {
		case s := <-sigs:
			send(&proto.Msg{Kind: proto.KindSignal, Signal: int(s.(syscall.Signal))})
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
			case proto.KindPrompt:
				// Asked here, on this terminal, in its own goroutine:
				// a signal must still get through while it waits.
				go func() {
					answer, err := g.answer(m.Text, m.Echo)
					reply := &proto.Msg{Kind: proto.KindAnswer, Text: answer}
					if err != nil {
						reply.Err = err.Error()
					}
					send(reply)
				}()
			case proto.KindStarted:
				// Only now: a question may have needed the terminal.
				if term != nil {
					esc, err := parseShellEscape(m.Escape)
					if err == nil {
						detach, err = term.attach(g, esc, stdin, func(rows, cols uint16) {
							send(&proto.Msg{Kind: proto.KindResize, Rows: rows, Cols: cols})
						}, func() { send(&proto.Msg{Kind: proto.KindClose}) })
					}
					if err != nil {
						attachErr = err
						send(&proto.Msg{Kind: proto.KindSignal, Signal: int(syscall.SIGHUP)})
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
			case proto.KindExit:
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
func (g *globals) persistRequest(target string, argv []string, forwardAgent bool) (*proto.Run, error) {
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
	return &proto.Run{
		Version: version.Version, Target: target, Argv: argv, Via: g.via,
		ConfigFile: cfg, Identities: ids, Options: c.sshOpts, HostKeyPolicy: c.hostKeyPolicy,
		PasswordEnv: c.passwordEnv, BecomePasswordEnv: c.become.passwordEnv, AskBecomePass: c.become.ask,
		ForwardAgent: forwardAgent, TimeoutNS: int64(g.timeout), Interactive: c.interactive, PersistNS: int64(g.persist),
		Verbose: g.verbose, RawLogs: g.rawLogs,
	}, nil
}

// parseShellEscape reads the escape character the daemon settled on.
func parseShellEscape(v string) (shellEscape, error) {
	c, on, err := parseEscapeChar(v)
	return shellEscape{c: c, on: on}, err
}
