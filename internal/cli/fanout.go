package cli

import (
	"bytes"
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/internal/printable"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/target"
)

// defaultFanout is how many targets `spindle run T1 T2 ... -- CMD` works on
// at once: enough that a hundred hosts take a few rounds, few enough that
// a laptop's sshd connections and CPU do not choke.
const defaultFanout = 32

// lineWriter prefixes every line written to it with prefix and writes
// whole lines to out under mu, so that the lines of many targets
// interleave but never mix. Close writes a last unterminated line.
//
// Unless raw, a line's control characters are escaped (printable): a
// target's carriage return or escape sequence could otherwise move the
// cursor over another target's lines on the terminal, or over its own
// prefix, and show what no target printed.
type lineWriter struct {
	mu     *sync.Mutex
	out    io.Writer
	prefix string
	raw    bool
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	i := bytes.LastIndexByte(w.buf, '\n')
	if i < 0 {
		return len(p), nil
	}
	w.emit(w.buf[:i+1])
	w.buf = append(w.buf[:0], w.buf[i+1:]...)
	return len(p), nil
}

func (w *lineWriter) emit(lines []byte) {
	var b bytes.Buffer
	for len(lines) > 0 {
		line := lines
		if i := bytes.IndexByte(lines, '\n'); i >= 0 {
			line = lines[:i+1]
		}
		lines = lines[len(line):]
		b.WriteString(w.prefix)
		if w.raw {
			b.Write(line)
		} else {
			b.Write(printable.AppendEscaped(b.AvailableBuffer(), line))
		}
		if line[len(line)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out.Write(b.Bytes()) //nolint:errcheck // as for a single target's output
}

// Close writes what is left of a last line without its newline.
func (w *lineWriter) Close() error {
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
	return nil
}

// isTargetList says whether a TARGET argument is @FILE: a list of targets.
func isTargetList(arg string) bool { return len(arg) > 1 && arg[0] == '@' }

// expandTargets replaces every @FILE argument with the targets FILE lists
// (@- reads them from stdin), whitespace-separated, # starting a comment,
// as pdsh's -w ^FILE and pssh's -h FILE take them. cmd names the command
// in errors.
func expandTargets(cmd string, args []string, stdin io.Reader) ([]string, error) {
	var targets []string
	for _, a := range args {
		if !isTargetList(a) {
			targets = append(targets, a)
			continue
		}
		var b []byte
		var err error
		if a == "@-" {
			b, err = io.ReadAll(stdin)
		} else {
			b, err = os.ReadFile(a[1:])
		}
		if err != nil {
			return nil, &usageError{cmd: cmd, err: fmt.Errorf("target list %s: %w", a, err)}
		}
		n := len(targets)
		for _, line := range strings.Split(string(b), "\n") {
			line, _, _ = strings.Cut(line, "#")
			targets = append(targets, strings.Fields(line)...)
		}
		if len(targets) == n {
			return nil, &usageError{cmd: cmd, err: fmt.Errorf("target list %s names no target", a)}
		}
	}
	return targets, nil
}

// oneAtATime serialises calls to fn (def when fn is nil).
func oneAtATime(fn, def func(string) (string, error)) func(string) (string, error) {
	if fn == nil {
		fn = def
	}
	var mu sync.Mutex
	return func(q string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		return fn(q)
	}
}

// fanoutResult is one target's outcome.
type fanoutResult struct {
	target string
	code   int
	err    error  // why it has no exit status of its own (not connected, lost)
	output []byte // --group: its stdout and stderr, as they came
	lost   int64  // --group: bytes of output beyond maxGroupedOutput
}

// fanoutOptions are runMany's flags.
type fanoutOptions struct {
	fanout       int  // targets at once
	forwardAgent bool // -A
	group        bool // collect output, print it once per distinct output
	// stdin (--stdin): standard input is read to its end first, and
	// every command gets a copy (input, once read).
	stdin bool
	input []byte
	// raw (--raw): targets' output as it came, control characters
	// included; by default they are escaped (lineWriter says why).
	raw bool
	// ship (--ship): the local program that runs, from each agent's
	// module store.
	ship *shipFlags
}

// maxBroadcastInput is how much standard input --stdin keeps in memory
// for every target to read: a script or a config file, not a disk image
// (spindle cp is for files).
const maxBroadcastInput = 64 << 20

// readBroadcastInput reads what --stdin gives every target.
func readBroadcastInput(stdin io.Reader) ([]byte, error) {
	if stdin == nil {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxBroadcastInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading standard input for --stdin: %w", err)
	}
	if len(b) > maxBroadcastInput {
		return nil, &usageError{cmd: "spindle run", err: fmt.Errorf("--stdin keeps at most %d MiB of standard input for the targets; copy larger input with spindle cp", maxBroadcastInput>>20)}
	}
	return b, nil
}

// commandInput is what one target's command reads: a copy of --stdin's
// input, or nothing (end of file at once).
func (o *fanoutOptions) commandInput() io.Reader {
	if !o.stdin {
		return nil
	}
	return bytes.NewReader(o.input)
}

// maxGroupedOutput is how much of each target's output --group keeps:
// a thousand targets' worth fits in memory.
const maxGroupedOutput = 1 << 20

// cappedBuffer keeps the first max bytes written to it and counts the
// rest.
type cappedBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	max  int
	lost int64
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := min(len(p), c.max-c.b.Len())
	c.b.Write(p[:keep])
	c.lost += int64(len(p) - keep)
	return len(p), nil
}

// runMany runs argv on every target at once (at most opts.fanout at a
// time), each line of output prefixed with "TARGET: " (or, with
// opts.group, each distinct output printed once at the end under the
// targets that gave it), and returns the largest exit status: 0 only if
// the command exited 0 everywhere, 255 if a target could not be reached.
// Standard input is not read (every command gets end of file at once)
// unless opts.stdin: then every command reads a copy of it.
func (g *globals) runMany(ctx stdctx.Context, targets, argv []string, opts fanoutOptions) error {
	if opts.fanout < 1 {
		return &usageError{cmd: "spindle run", err: fmt.Errorf("--fanout %d: want at least 1", opts.fanout)}
	}
	// Connections start at once: their questions (passwords, host keys)
	// are asked one at a time, each naming its host.
	g.conn.prompt = oneAtATime(g.conn.prompt, readSecretTTY)
	g.conn.ask = oneAtATime(g.conn.ask, readLineTTY)
	chains, err := g.chains(targets)
	if err != nil {
		return err
	}
	if opts.stdin {
		if opts.input, err = readBroadcastInput(g.stdin); err != nil {
			return err
		}
	}
	// The daemon runs command lines; a shipped program runs here.
	daemon := g.persist > 0 && (opts.ship == nil || !opts.ship.shipping()) && g.daemonUp()
	ctx, sig, stop := SignalContext(ctx)
	defer stop()
	// Targets run here, on connections of this process's, unless the
	// daemon runs them: then only those it could not take.
	var ctl *spindle.Controller
	direct := sync.OnceValue(func() *target.Routes {
		ctl = spindle.NewController(g.controllerOptions(g.logger()))
		return target.NewRoutes(ctl)
	})
	defer func() {
		if ctl != nil {
			closeWithin(sig() != 0, g.logger(), func() { ctl.Close() })
		}
	}()

	var outMu, errMu sync.Mutex
	results := forEachTarget(ctx, targets, opts.fanout, func(i int) fanoutResult {
		if daemon {
			if res, ok := g.runOneThroughDaemon(targets[i], argv, opts, &outMu, &errMu); ok {
				return res
			}
		}
		return g.runOne(ctx, direct(), targets[i], chains[i], argv, opts, &outMu, &errMu)
	})
	if opts.group && sig() == 0 {
		g.printGroups(results, opts.raw)
	}
	return g.fanoutExit(results, sig())
}

// forEachTarget runs do for every target (by index), at most fanout at
// once, and returns their results; a target not begun when ctx ends is
// not reached.
func forEachTarget(ctx stdctx.Context, targets []string, fanout int, do func(i int) fanoutResult) []fanoutResult {
	results := make([]fanoutResult, len(targets))
	slots := make(chan struct{}, fanout)
	var wg sync.WaitGroup
	for i, target := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				results[i] = fanoutResult{target: target, code: exitConnect, err: &connectError{err: ctx.Err()}}
				return
			}
			results[i] = do(i)
		}()
	}
	wg.Wait()
	return results
}

// fanoutExit prints why each target failed (unless a signal ended the
// command) and a last line listing them, and returns the largest exit
// status: 0 only if all succeeded, 255 if one could not be reached,
// 128+N after signal N.
func (g *globals) fanoutExit(results []fanoutResult, sig syscall.Signal) error {
	worst, failed := exitOK, []string{}
	for _, res := range results {
		if res.err != nil && sig == 0 {
			var dr *daemonReport
			if errors.As(res.err, &dr) {
				for _, line := range strings.Split(strings.TrimRight(dr.text, "\n"), "\n") {
					fmt.Fprintf(g.stderr, "spindle: %s: %s\n", res.target, strings.TrimPrefix(line, "spindle: "))
				}
			} else {
				fmt.Fprintf(g.stderr, "spindle: %s: %v\n", res.target, res.err)
				if hint := g.hint(res.err); hint != "" {
					fmt.Fprintf(g.stderr, "spindle: %s: hint: %s\n", res.target, hint)
				}
			}
		}
		if res.code != exitOK {
			what := fmt.Sprintf("exit %d", res.code)
			if res.err != nil {
				what = "not reached"
				if res.code != exitConnect {
					what = "failed"
				}
			}
			failed = append(failed, res.target+" ("+what+")")
		}
		worst = max(worst, res.code)
	}
	if sig != 0 {
		return &exitError{code: exitSignalBase + int(sig)}
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		fmt.Fprintf(g.stderr, "spindle: %d of %d targets failed: %s\n", len(failed), len(results), strings.Join(failed, ", "))
	}
	return &exitError{code: worst}
}

// daemonUp says whether the daemon for --persist runs, starting it if
// not; why not is logged at -v, and the targets then run here.
func (g *globals) daemonUp() bool {
	socket, err := daemonSocket()
	if err == nil {
		var c net.Conn
		if c, err = g.dialDaemon(socket); err == nil {
			c.Close()
			return true
		}
	}
	g.logger().Info("not through the daemon: " + err.Error())
	return false
}

// daemonReport is what the daemon would have printed on stderr for a
// target that failed (its error, and a hint): runMany prints it with the
// target's name.
type daemonReport struct{ text string }

func (e *daemonReport) Error() string { return strings.TrimSpace(e.text) }

// runOneThroughDaemon runs argv on one target of runMany through the
// daemon (--persist), on the connection it keeps, as runOne does here.
// ok is false when the daemon did not take the command: it has not
// started anywhere.
func (g *globals) runOneThroughDaemon(target string, argv []string, opts fanoutOptions, outMu, errMu *sync.Mutex) (res fanoutResult, ok bool) {
	gt := *g
	gt.stdin = opts.commandInput()
	var collected *cappedBuffer
	var stdout, stderr *lineWriter
	if opts.group {
		collected = &cappedBuffer{max: maxGroupedOutput}
		gt.stdout, gt.stderr = collected, collected
	} else {
		stdout = &lineWriter{mu: outMu, out: g.stdout, prefix: target + ": ", raw: opts.raw}
		stderr = &lineWriter{mu: errMu, out: g.stderr, prefix: target + ": ", raw: opts.raw}
		gt.stdout, gt.stderr = stdout, stderr
	}
	var text string
	handled, err := gt.runPersistent(target, argv, persistOpts{forwardAgent: opts.forwardAgent, exitText: &text})
	if stdout != nil {
		stdout.Close()
		stderr.Close()
	}
	if !handled {
		return fanoutResult{}, false
	}
	res = daemonResult(target, err, text)
	if collected != nil {
		res.output, res.lost = collected.b.Bytes(), collected.lost
	}
	return res, true
}

// daemonResult is the result of a target that the daemon took, given
// what runPersistent returned and the daemon's last words (exitText).
func daemonResult(target string, err error, text string) fanoutResult {
	res := fanoutResult{target: target, code: exitCode(err)}
	var ee *exitError
	switch {
	case text != "":
		res.err = &daemonReport{text: text}
	case err != nil && (!errors.As(err, &ee) || ee.err != nil):
		res.err = err // the daemon lost
	}
	return res
}

// runOne connects to one target of runMany and runs argv there.
func (g *globals) runOne(ctx stdctx.Context, r *target.Routes, target string, chain targetChain, argv []string, opts fanoutOptions, outMu, errMu *sync.Mutex) fanoutResult {
	cctx := ctx
	if g.timeout > 0 {
		var cancel stdctx.CancelFunc
		cctx, cancel = stdctx.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	cx, err := r.Open(cctx, chain.steps)
	if err != nil {
		return fanoutResult{target: target, code: exitConnect, err: &connectError{err: err}}
	}
	// -A, or ssh_config's ForwardAgent for the last hop, as for one target.
	s := &session{ctl: r.Controller(), cx: cx, log: g.logger(), last: chain.last()}
	stopAgent, err := g.startForwarding(ctx, s, opts.forwardAgent)
	if err != nil {
		return fanoutResult{target: target, code: exitCode(err), err: err}
	}
	defer stopAgent()
	var res *exec.Result
	var collected *cappedBuffer
	if opts.group {
		collected = &cappedBuffer{max: maxGroupedOutput}
		res, err = runStreaming(ctx, cx, exec.Cmd{Argv: argv}, opts.ship, opts.commandInput(), collected, collected)
	} else {
		stdout := &lineWriter{mu: outMu, out: g.stdout, prefix: target + ": ", raw: opts.raw}
		stderr := &lineWriter{mu: errMu, out: g.stderr, prefix: target + ": ", raw: opts.raw}
		res, err = runStreaming(ctx, cx, exec.Cmd{Argv: argv}, opts.ship, opts.commandInput(), stdout, stderr)
		stdout.Close()
		stderr.Close()
	}
	out := fanoutResult{target: target}
	if collected != nil {
		out.output, out.lost = collected.b.Bytes(), collected.lost
	}
	if err != nil {
		out.code, out.err = exitCode(err), err
		if errors.Is(err, spindle.ErrDisconnected) {
			out.code = exitConnect
		}
		return out
	}
	out.code = resultExitCode(res)
	return out
}

// printGroups prints, for --group, each distinct output (with its exit
// status) once, under the targets that gave it, in the order of their
// first target, as dshbak -c does for pdsh. Targets that failed before
// their command ended are left to the error lines. Unless raw, control
// characters are escaped, as lineWriter does.
func (g *globals) printGroups(results []fanoutResult, raw bool) {
	type group struct {
		targets []string
		res     fanoutResult
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, res := range results {
		if res.err != nil {
			continue
		}
		key := fmt.Sprintf("%d\x00%d\x00%s", res.code, res.lost, res.output)
		gr := byKey[key]
		if gr == nil {
			gr = &group{res: res}
			byKey[key] = gr
			groups = append(groups, gr)
		}
		gr.targets = append(gr.targets, res.target)
	}
	for _, gr := range groups {
		var b bytes.Buffer
		fmt.Fprintf(&b, "==== %s", strings.Join(gr.targets, " ")) // a TARGET may hold commas
		if len(gr.targets) > 1 {
			fmt.Fprintf(&b, " (%d targets)", len(gr.targets))
		}
		if gr.res.code != exitOK {
			fmt.Fprintf(&b, " (exit %d)", gr.res.code)
		}
		b.WriteString(" ====\n")
		if raw {
			b.Write(gr.res.output)
		} else {
			b.Write(printable.AppendEscaped(b.AvailableBuffer(), gr.res.output))
		}
		if n := len(gr.res.output); n > 0 && gr.res.output[n-1] != '\n' {
			b.WriteByte('\n')
		}
		if gr.res.lost > 0 {
			fmt.Fprintf(&b, "[%d more bytes of output not kept]\n", gr.res.lost)
		}
		g.stdout.Write(b.Bytes()) //nolint:errcheck // as for a single target's output
	}
}
