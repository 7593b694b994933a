package cli

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/services/exec"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// loginShell runs the agent user's login shell, or /bin/sh.
var loginShell = []string{"/bin/sh", "-c", `exec "${SHELL:-/bin/sh}" -l`}

func newRunCmd(g *globals) *cobra.Command {
	var forward forwardFlags
	var fanout fanoutOptions
	var ship shipFlags
	c := forwardFlag(&cobra.Command{
		Use:               "run TARGET... -- CMD [ARGS...]",
		ValidArgsFunction: g.completeTarget,
		Short:             "Run a command on the target, streaming stdin, stdout and stderr",
		Long: `Run CMD on the target. Standard input is passed through (end of file
half-closes the remote stdin), standard output and error are passed through
as they are produced, and the exit status is the command's (128+N when a
signal N killed it). Ctrl-C or SIGTERM kills the remote process group
(an agent that does not answer, stopped or behind a wedged hop, is
abandoned after 250 ms).
Connection failures exit with 255, like ssh. -L, -R and -D forward ports
as 'spindle forward' does, for as long as the command runs.

--persist DURATION (or SPINDLE_PERSIST=DURATION) keeps the connection
open after the command, like ssh's ControlPersist: the next run with the
same target, flags and environment within DURATION of the last one runs
on it at once. A background 'spindle daemon' of this user keeps it (its
socket is private to the user), started by the first such run; questions
(passwords, host keys) are still asked on the terminal of the command
that connects. Not with -L, -R or -D.

With several TARGETs (the -- is then required; @FILE stands for the
targets FILE lists, whitespace-separated, # starting a comment, and @-
for those on standard input), CMD runs on all of them at once, --fanout
at a time, on connections made in parallel: hops they begin with are
shared (-J bastion web1 web2 web3 dials the bastion once, and its agent
starts the three). Each line of output is prefixed with "TARGET: ", and
its control characters but tab are written out as escapes (\r, \x1b...)
so that no target's output can move the cursor over another's lines
(--raw prints them as they came; one target's output is always passed
through unchanged, as ssh does). Standard input is not read (each
command gets end of file) unless --stdin: then it is read to its end
first (64 MiB at most) and every command reads a copy (spindle run
--stdin @hosts -- sh < script.sh); questions (passwords, host keys) are
asked one at a time, naming their host. --group collects the output
instead and prints each distinct one once at the end, under the targets
that gave it (like dshbak -c). The exit status is the largest of the
targets' (0 only if CMD exited 0 everywhere, 255 if a target could not
be reached), and a last line on standard error lists the targets that
failed. With --persist, every target runs through the daemon, on the
connections it keeps (their hops shared there too), and the next such
run takes a few milliseconds per round of --fanout targets. -L, -R and
-D do not apply.

--ship FILE runs the local program FILE instead of CMD, the words after
-- its arguments (spindle run web1 --ship ./tool -- -v): its bytes cross
the link once per agent, kept by hash in the agent's RAM store, and the
agent writes it once into its private cache directory (0700) and runs it
from there; the next run names it by hash alone. --memfd runs it from a
memfd instead, written nowhere: off by default because kernels with
vm.memfd_noexec=2, SELinux or seccomp policies refuse it (the run then
fails, saying so) and EDR tools alert on fileless execution. With
--ship, runs do not go through the --persist daemon.`,
		Example: `  spindle run local -- uname -a
  echo hi | spindle run local -- cat
  spindle run deploy@web1 -- systemctl status nginx
  spindle run -J bastion web1,sudo:postgres -- psql -c 'select 1'
  spindle run bastion,web1,docker:app1 -- ps aux
  spindle run -A web1 -- git -C /srv/app pull
  spindle run -R 3128:localhost:3128 web1 -- env https_proxy=http://127.0.0.1:3128 apt-get update
  spindle run -J bastion web1 web2 web3,sudo -- systemctl is-active nginx
  spindle run --fanout 64 @hosts.txt -- uptime
  spindle run --stdin @hosts.txt -- sh -s < fix-dns.sh
  spindle run web1 web2 --ship ./healthcheck -- --verbose`,
		Args: func(c *cobra.Command, args []string) error {
			if at := c.ArgsLenAtDash(); at > 1 || at == 1 && isTargetList(args[0]) { // several targets
				if len(args) == at && !ship.shipping() {
					return &usageError{cmd: c.CommandPath(), err: errors.New("run needs a command after the targets: spindle run TARGET... -- CMD [ARGS...]")}
				}
				return nil
			}
			if err := targetArgs(true)(c, args); err != nil {
				return err
			}
			if len(args) < 2 && !ship.shipping() {
				return &usageError{cmd: c.CommandPath(), err: errors.New("run needs a command after the target: spindle run TARGET -- CMD [ARGS...]")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			ports, err := forward.ports.parse(c.CommandPath())
			if err != nil {
				return err
			}
			if err := ship.load(c.CommandPath()); err != nil {
				return err
			}
			if at := c.ArgsLenAtDash(); at > 1 || at == 1 && isTargetList(args[0]) {
				if !ports.empty() {
					return &usageError{cmd: c.CommandPath(), err: errors.New("-L, -R and -D forward ports for one target, not several")}
				}
				if fanout.stdin && slices.Contains(args[:at], "@-") {
					return &usageError{cmd: c.CommandPath(), err: errors.New("@- and --stdin both want standard input: list the targets in a file (@FILE)")}
				}
				targets, err := expandTargets(c.CommandPath(), args[:at], g.stdin)
				if err != nil {
					return err
				}
				fanout.forwardAgent = forward.agent
				fanout.ship = &ship
				return g.runMany(c.Context(), targets, ship.argv(args[at:]), fanout)
			}
			if g.persist > 0 && ports.empty() && !ship.shipping() {
				if handled, err := g.runPersistent(args[0], args[1:], persistOpts{forwardAgent: forward.agent}); handled {
					return err
				}
			}
			ctx, sig, stop := SignalContext(c.Context())
			defer stop()
			s, err := g.connect(ctx, args[0])
			if err != nil {
				return err
			}
			defer s.closeAfter(sig)
			stopFwd, err := g.startForwards(ctx, s, &forward, ports)
			if err != nil {
				return err
			}
			defer stopFwd()
			res, err := runStreaming(ctx, s.cx, exec.Cmd{Argv: ship.argv(args[1:])}, &ship, g.stdin, g.stdout, g.stderr)
			return commandExit(res, err, sig())
		},
	}, &forward)
	persistFlag(c, g)
	ship.add(c)
	c.Flags().IntVar(&fanout.fanout, "fanout", defaultFanout, "with several targets: how many to connect to and run on at once")
	c.Flags().BoolVar(&fanout.stdin, "stdin", false, "with several targets: read standard input to its end (64 MiB at most) and give every command a copy, as one target's command would read it")
	c.Flags().BoolVar(&fanout.raw, "raw", false, "with several targets: print the targets' output with its control characters as they came, instead of escaped (\\r, \\x1b...)")
	c.Flags().BoolVar(&fanout.group, "group", false, "with several targets: print each distinct output (stdout and stderr, with the exit status) once at the end, under the targets that gave it, instead of prefixed lines as they come (like pdsh | dshbak -c)")
	return c
}

// runStreaming runs cmd through exec.Start (ship's, for --ship): stdin is copied to the process
// (and half-closed at EOF) by a goroutine that is not waited for, since a
// read from a terminal cannot be interrupted; output is copied as it comes.
func runStreaming(ctx stdctx.Context, cx *spindle.Context, cmd exec.Cmd, ship *shipFlags, stdin io.Reader, stdout, stderr io.Writer) (*exec.Result, error) {
	p, err := ship.start(ctx, cx, cmd)
	if err != nil {
		return nil, err
	}
	return streamProcess(p, stdin, stdout, stderr)
}

// streamProcess is runStreaming once the process has started.
func streamProcess(p *exec.Process, stdin io.Reader, stdout, stderr io.Writer) (*exec.Result, error) {
	if stdin != nil {
		go func() {
			in := p.Stdin()
			io.Copy(in, stdin) //nolint:errcheck // the process may exit first
			in.Close()
		}()
	} else {
		p.Stdin().Close()
	}
	cerr := p.CopyOutput(stdout, stderr)
	res, err := p.Wait()
	if err == nil && cerr != nil {
		err = cerr
	}
	return res, err
}

// commandExit maps a remote command's result to the CLI's exit status: the
// command's exit code, 128+N for signal N, and for a call cancelled by a
// signal to the controller, 128+that signal.
func commandExit(res *exec.Result, err error, got syscall.Signal) error {
	if err != nil {
		if got != 0 && (errors.Is(err, spindle.ErrCanceled) || errors.Is(err, spindle.ErrDisconnected)) {
			return &exitError{code: exitSignalBase + int(got)}
		}
		return err
	}
	return &exitError{code: resultExitCode(res)}
}

// resultExitCode is a Result's status as a shell reports it.
func resultExitCode(res *exec.Result) int {
	if res.Signal != "" {
		if n := unix.SignalNum(res.Signal); n != 0 {
			return exitSignalBase + int(n)
		}
		return exitSignalBase
	}
	if res.ExitCode < 0 || res.ExitCode > 255 {
		return exitFailure
	}
	return res.ExitCode
}

func newShellCmd(g *globals) *cobra.Command {
	var forward forwardFlags
	var escape string
	c := forwardFlag(&cobra.Command{
		Use:               "shell TARGET [-- CMD [ARGS...]]",
		ValidArgsFunction: g.completeTarget,
		Short:             "Open an interactive shell (or run CMD) on a terminal on the target",
		Long: `Open the target user's login shell ($SHELL -l, else /bin/sh) on a
pseudo-terminal. The local terminal is put in raw mode and restored on exit;
window size changes are forwarded. The exit status is the shell's.
-L, -R and -D forward ports as 'spindle forward' does, for as long as the
shell runs.

On a terminal, ssh's escape sequences work after a newline: ~. closes the
connection (exit status 255), ~^Z suspends spindle, ~? lists them, ~~
sends one ~. -e (or -o EscapeChar, or ssh_config's EscapeChar for the
chain's last SSH hop) picks another character, ^X for a control
character, or none.

--persist DURATION (or SPINDLE_PERSIST) keeps the connection open after
the shell, as for 'spindle run'.`,
		Example: `  spindle shell web1
  spindle shell ssh:bastion,ssh:web1,setns:app1,sudo:postgres
  spindle shell local -- top
  spindle shell -e '^]' web1`,
		Args: targetArgs(true),
		RunE: func(c *cobra.Command, args []string) error {
			argv := loginShell
			if len(args) > 1 {
				argv = args[1:]
			}
			// SIGINT stays with the terminal in raw mode (it is ^C, a byte
			// sent to the remote terminal); SIGTERM and SIGHUP end the call.
			ports, err := forward.ports.parse(c.CommandPath())
			if err != nil {
				return err
			}
			flag := "-e"
			if escape == "" {
				escape, flag = g.conn.optionValue("EscapeChar"), "-o EscapeChar"
			}
			if _, _, err := parseEscapeChar(escape); escape != "" && err != nil {
				return &usageError{cmd: c.CommandPath(), err: fmt.Errorf("%s: %w", flag, err)}
			}
			if g.persist > 0 && ports.empty() {
				if handled, err := g.runPersistent(args[0], argv, persistOpts{forwardAgent: forward.agent, shell: true, escape: escape}); handled {
					return err
				}
			}
			ctx, sig, stop := SignalContext(c.Context())
			defer stop()
			s, err := g.connect(ctx, args[0])
			if err != nil {
				return err
			}
			defer s.closeAfter(sig)
			esc, err := s.escapeChar(ctx, escape)
			if err != nil {
				return err
			}
			stopFwd, err := g.startForwards(ctx, s, &forward, ports)
			if err != nil {
				return err
			}
			defer stopFwd()
			res, err := runShell(ctx, s.cx, argv, esc, g)
			if errors.Is(err, errEscapeDisconnect) {
				return &exitError{code: exitConnect, err: fmt.Errorf("connection to %s closed (%s.)", s.cx.Name(), escapeName(esc.c))}
			}
			return commandExit(res, err, sig())
		},
	}, &forward)
	c.Flags().StringVarP(&escape, "escape", "e", "", "escape character on a terminal (like ssh -e): a character, ^X, or none; default: -o EscapeChar, ssh_config's, else ~")
	persistFlag(c, g)
	return c
}

// shellEscape is the escape character runShell acts on, if on.
type shellEscape struct {
	c  byte
	on bool
}

// escapeChar resolves the shell's escape character: flag (-e, else -o
// EscapeChar), else ssh_config's EscapeChar for the chain's last SSH
// hop, else ~.
func (s *session) escapeChar(ctx stdctx.Context, flag string) (shellEscape, error) {
	v, where := flag, "-e"
	if so, ok := s.lastSSH(); v == "" && ok {
		cv, err := so.ConfigEscapeChar(ctx, s.log)
		if err != nil {
			return shellEscape{}, &connectError{err: fmt.Errorf("%s: ssh_config: %w", s.cx.Name(), err)}
		}
		v, where = cv, "ssh_config's EscapeChar for "+s.cx.Name()
	}
	if v == "" {
		v = defaultEscapeChar
	}
	c, on, err := parseEscapeChar(v)
	if err != nil {
		return shellEscape{}, &exitError{code: exitFailure, err: fmt.Errorf("%s: %w", where, err)}
	}
	return shellEscape{c: c, on: on}, nil
}

// errEscapeDisconnect ends a shell closed by <escape>.
var errEscapeDisconnect = errors.New("closed by the escape sequence")

func runShell(ctx stdctx.Context, cx *spindle.Context, argv []string, esc shellEscape, g *globals) (*exec.Result, error) {
	t := newShellTerminal(g)
	cmd := exec.Cmd{Argv: argv, PTY: true, Term: t.termName()}
	cmd.Rows, cmd.Cols, _ = t.size()
	ctx, cancel := stdctx.WithCancelCause(ctx)
	defer cancel(nil)
	p, err := exec.Start(ctx, cx, cmd)
	if err != nil {
		return nil, err
	}
	// Cancelling the call kills the remote process group, as ssh's
	// closing the channel hangs the shell up.
	stop, err := t.attach(g, esc, p.Stdin(), func(rows, cols uint16) {
		p.Resize(rows, cols) //nolint:errcheck // the shell may be gone
	}, func() { cancel(errEscapeDisconnect) })
	if err != nil {
		p.Close()
		return nil, err
	}
	defer stop()
	cerr := p.CopyOutput(g.stdout, g.stderr)
	res, err := p.Wait()
	if err == nil && cerr != nil {
		err = cerr
	}
	if errors.Is(stdctx.Cause(ctx), errEscapeDisconnect) {
		return res, errEscapeDisconnect
	}
	return res, err
}

// ttyFd returns f's descriptor and whether it is a terminal.
func ttyFd(f any) (int, bool) {
	if file, ok := f.(*os.File); ok {
		fd := int(file.Fd())
		return fd, term.IsTerminal(fd)
	}
	return -1, false
}
