// Package container is the machinery shared by the container connectors
// (docker, podman, kubectl, lxc, lxd, machinectl, setns): it runs the
// tool's exec command with the first stage as `sh -c SCRIPT`, delivers the
// agent over the child's stdin from the parent's RAM
// (bootstrap.RemoteStart), logs the child's stderr at debug level, kills
// and reaps the child on Close, and turns the tool's complaints into clear
// errors with the rpc error kinds.
//
// Unlike the become connectors, a container exec needs no terminal: the
// child's stdin, stdout and stderr are three pipes, the link on the first
// two. The tool's own messages ("No such container: app1") arrive on
// stderr and are matched by the connector's Rules once the start failed.
package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/lazyre"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"go.uber.org/zap"
)

// DefaultTimeout bounds a start (the tool's exec, the first stage and the
// agent upload) when Hop.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// Error kinds. Each wraps the rpc kind that callers test with errors.Is;
// the rpc kind (and the text) is what survives the trip to the controller.
var (
	// ErrNotInstalled: the tool is not on the host (or the path given for
	// it does not exist).
	ErrNotInstalled = fmt.Errorf("tool not installed (%w)", errkind.ErrNotFound)
	// ErrNoContainer: the tool knows no container (pod, machine) by that
	// name.
	ErrNoContainer = fmt.Errorf("no such container (%w)", errkind.ErrNotFound)
	// ErrNotRunning: the container exists but is not running (stopped,
	// paused, a completed pod): there is no running container to enter.
	ErrNotRunning = fmt.Errorf("container not running (%w)", errkind.ErrNotFound)
	// ErrNoShell: the container has no sh to run the first stage.
	ErrNoShell = fmt.Errorf("no sh in the container (%w)", errkind.ErrNotFound)
	// ErrNoSuchUser: the user does not exist in the container.
	ErrNoSuchUser = fmt.Errorf("no such user in the container (%w)", errkind.ErrNotFound)
	// ErrPermission: the tool (or its daemon) refused the caller.
	ErrPermission = fmt.Errorf("not allowed to use the container tool (%w)", errkind.ErrPermission)
	// ErrNoDaemon: the tool could not reach its daemon or API server.
	ErrNoDaemon = errors.New("the container engine is not reachable")
	// ErrTimeout: no agent within the timeout; the child was killed.
	ErrTimeout = fmt.Errorf("timed out (%w)", errkind.ErrTimeout)
)

// Rule maps a tool message to an error kind and says what to do.
type Rule struct {
	Match *lazyre.Regexp
	Err   error
	Hint  string
}

// Classify returns the error of the first rule that matches out, with its
// hint, or nil.
func Classify(out string, rules []Rule) error {
	for _, r := range rules {
		if r.Match.MatchString(out) {
			if r.Hint == "" {
				return r.Err
			}
			return fmt.Errorf("%w: %s", r.Err, r.Hint)
		}
	}
	return nil
}

// ShellRules recognise, in any tool's output, a container without sh or
// without the requested user (the messages of runc, crun, docker, podman
// and lxc-attach). Connectors put them before their own rules: a missing
// sh is reported as `container process: exec: "sh": executable file not
// found`, which a tool's looser "container … not found" would also match.
func ShellRules(user string) []Rule {
	hint := "the first stage needs a POSIX sh on the container's PATH (busybox is enough)"
	userHint := fmt.Sprintf("user %q is not in the container's /etc/passwd: give an existing user, or a numeric uid", user)
	return []Rule{
		{lazyre.New(`(?i)unable to find user|no matching entries in passwd|unknown user|user .* does not exist|failed to get passwd entry`), ErrNoSuchUser, userHint},
		{lazyre.New(`(?i)exec: "sh": executable file not found|executable file .?sh.? not found|failed to exec "?sh"?|sh: (command )?not found|no such file or directory: .*\bsh\b`), ErrNoShell, hint},
	}
}

// Tool is a container command-line tool on the agent's host.
type Tool struct {
	// Name is the program's usual name, for messages and the default
	// path ("docker").
	Name string
	// Path is the user's override (Options.DockerPath, …); empty means
	// Name looked up in $PATH.
	Path string
	// Option names the override in messages ("DockerPath").
	Option string
	// Install says what provides the tool ("the docker.io package").
	Install string
	// OverNetwork says the tool carries the child's stdio over a network
	// (kubectl, through the API server and the kubelet): the agent is
	// sent compressed. Other tools' children are on this host, and get it
	// raw (bootstrap.OverLocalPipe).
	OverNetwork bool
}

// Resolve finds the tool's executable. A missing tool is an error
// wrapping ErrNotInstalled (errkind.ErrNotFound) that says what to install or
// set.
func (t Tool) Resolve() (string, error) {
	p := t.Path
	if p == "" {
		p = t.Name
	}
	path, err := exec.LookPath(p)
	if err == nil {
		return path, nil
	}
	host, _ := os.Hostname()
	where := "this host"
	if host != "" {
		where = host
	}
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		what := p + " is not on the PATH"
		if strings.Contains(p, "/") {
			what = p + " does not exist"
		}
		return "", fmt.Errorf("%s: %w on %s: %s: install %s, or set %s to the program's path",
			t.Name, ErrNotInstalled, where, what, t.Install, t.Option)
	case errors.Is(err, fs.ErrPermission):
		return "", fmt.Errorf("%s: %w: %s on %s is not executable (%v)", t.Name, ErrPermission, p, where, err)
	}
	return "", fmt.Errorf("%s: %w", t.Name, err)
}

// Command returns an exec.Cmd for the tool with args (argv[0] is the
// tool's name as given), its messages in the C locale so that Rules
// match.
func (t Tool) Command(args ...string) (*exec.Cmd, error) {
	path, err := t.Resolve()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = cEnv(os.Environ())
	return cmd, nil
}

// Output runs the tool with args and returns its trimmed stdout; on
// failure the error quotes its stderr and is classified by rules. For
// look-ups like `docker inspect`.
func (t Tool) Output(ctx context.Context, rules []Rule, args ...string) (string, error) {
	cmd, err := t.Command(args...)
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &limitedWriter{buf: &stderr, max: maxOutput}
	cmd.WaitDelay = time.Second
	if err := runContext(ctx, cmd); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		said := strings.TrimSpace(stderr.String())
		if cerr := Classify(said, rules); cerr != nil {
			return "", fmt.Errorf("%s: %w (%s said: %q)", t.Name, cerr, t.Name, tail(said, 512))
		}
		if said != "" {
			return "", fmt.Errorf("%s %s: %w: %s", t.Name, strings.Join(args, " "), err, tail(said, 512))
		}
		return "", fmt.Errorf("%s %s: %w", t.Name, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// runContext runs cmd, killing it when ctx ends.
func runContext(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	defer stop()
	return cmd.Wait()
}

// Hop describes one kind of container start to Start.
type Hop struct {
	// Tool names the program in messages ("docker", "setns").
	Tool string
	// Command returns the process of one attempt. script is the first
	// stage's script, to be run as `sh -c SCRIPT` inside the container.
	// Stdin, Stdout and Stderr must be left nil; SysProcAttr may be set
	// (Start adds Setpgid).
	Command func(script string) (*exec.Cmd, error)
	// Launch starts cmd; nil means cmd.Start. (setns starts it from a
	// thread inside the container's namespaces.)
	Launch func(cmd *exec.Cmd) error
	// Rules classify the child's stderr (and RemoteStart's error) after
	// a failed start; the first match wins.
	Rules []Rule
	// Timeout bounds the start; default DefaultTimeout.
	Timeout time.Duration
	// OverNetwork: see Tool.OverNetwork.
	OverNetwork bool
}

// maxOutput bounds the stderr kept for error messages.
const maxOutput = 8 << 10

// exitGrace is how long a closed agent gets to exit before it is killed.
const exitGrace = 5 * time.Second

// drainGrace bounds the wait for the child's stderr to end once the child
// has exited (a descendant outside its process group may hold it open).
const drainGrace = 2 * time.Second

// Start starts req's agent through hop and returns its stream, positioned
// after the hello. A cached agent that fails its self-check is replaced
// by one retry with fresh args.
//
// Errors name the tool, not the context (the controller names the
// context), wrap one of the Err* kinds above when the tool's complaint is
// recognised, and quote what the tool printed. Cancelling ctx kills the
// child and returns ctx.Err().
func Start(ctx context.Context, req connectors.StartRequest, hop Hop) (*bootstrap.Conn, error) {
	log := req.Logger
	if log == nil {
		log = zap.NewNop()
	}
	conn, err := start(ctx, req, hop, log)
	if err != nil && errors.Is(err, bootstrap.ErrStaleAgent) {
		log.Debug("cached agent failed its self-check: starting a fresh one", zap.String("context", req.Name))
		req.Fresh = true
		conn, err = start(ctx, req, hop, log)
	}
	return conn, err
}

// start is one attempt: one child, one handshake.
func start(ctx context.Context, req connectors.StartRequest, hop Hop, log *zap.Logger) (*bootstrap.Conn, error) {
	name := req.Name
	args := req.Args()
	script, err := bootstrap.RemoteScript(args, req.Agent)
	if err != nil {
		return nil, err
	}
	cmd, err := hop.Command(script)
	if err != nil {
		return nil, err
	}
	var files []*os.File // every pipe end, closed on failure
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	stdinR, stdinW, err := pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	stderrR, stderrW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// A process group of its own: Close kills the tool and what it
	// started, and a Ctrl-C on the controller's terminal does not reach it.
	cmd.SysProcAttr.Setpgid = true
	log.Debug("starting container hop", zap.String("context", name), zap.String("tool", hop.Tool),
		zap.Strings("argv", argvForLog(cmd.Args, script)))
	launch := hop.Launch
	if launch == nil {
		launch = (*exec.Cmd).Start
	}
	if err := launch(cmd); err != nil {
		closeAll()
		if cerr := Classify(err.Error(), hop.Rules); cerr != nil {
			return nil, fmt.Errorf("%s: %w (%v)", hop.Tool, cerr, err)
		}
		return nil, fmt.Errorf("start %s: %w", hop.Tool, err)
	}
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()

	errlog := &stderrLog{log: log.With(zap.String("context", name)), done: make(chan struct{})}
	go errlog.run(stderrR)
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	pid := cmd.Process.Pid
	kill := func() {
		// The group (Setpgid); the process itself too, should it have
		// left the group.
		syscall.Kill(-pid, syscall.SIGKILL)
		cmd.Process.Kill()
	}

	timeout := hop.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var started atomic.Bool // RemoteStart succeeded: Close, not a failure
	closeFn := func() error {
		// stdin is closed: the agent exits when its link ends, and the
		// tool with it.
		if started.Load() {
			t := time.NewTimer(exitGrace)
			select {
			case <-exited:
			case <-t.C:
				log.Debug("container hop did not exit in time: killing it", zap.String("context", name))
			}
			t.Stop()
		}
		kill()
		select {
		case <-exited:
		case <-time.After(exitGrace):
			log.Warn("container hop survived SIGKILL: giving up on it", zap.String("context", name), zap.Int("pid", pid))
		}
		select {
		case <-errlog.done:
		case <-time.After(drainGrace):
			stderrR.Close() // ends the reader
			<-errlog.done
		}
		stderrR.Close()
		stdoutR.Close()
		return nil
	}
	var opts []bootstrap.StartOption
	if !hop.OverNetwork {
		opts = append(opts, bootstrap.OverLocalPipe)
	}
	conn, err := bootstrap.RemoteStart(tctx, stdinW, stdoutR, args, req.Agent, name, log, closeFn, opts...)
	if err == nil {
		started.Store(true)
		errlog.live.Store(true)
		return conn, nil
	}
	// RemoteStart closed stdin and ran closeFn: the child is gone and its
	// stderr read to the end.
	out := strings.ReplaceAll(errlog.output(), script, "<first stage>")
	said := ""
	if o := strings.TrimSpace(out); o != "" {
		said = fmt.Sprintf(" (%s said: %q)", hop.Tool, tail(o, 512))
	}
	if cerr := Classify(out, hop.Rules); cerr != nil {
		return nil, fmt.Errorf("%s: %w%s", hop.Tool, cerr, said)
	}
	// Some tools print the exec's failure on stdout (docker: "unable to
	// find user …"): RemoteStart's error quotes it.
	if cerr := Classify(err.Error(), hop.Rules); cerr != nil {
		msg, _, _ := strings.Cut(err.Error(), " (if the stage ran a cached agent")
		return nil, fmt.Errorf("%s: %w%s: %s", hop.Tool, cerr, said, msg)
	}
	if ctx.Err() == nil && tctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w: no agent after %s; the child was killed%s", hop.Tool, ErrTimeout, timeout, said)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("%s: %w%s", hop.Tool, err, said)
}

// stderrLog logs the child's stderr at debug level, one record per line,
// and keeps its tail for error messages until the agent is up.
type stderrLog struct {
	log  *zap.Logger
	done chan struct{}
	live atomic.Bool // the hello arrived: lines are the agent's stderr

	mu  sync.Mutex
	out []byte
}

func (s *stderrLog) run(r io.Reader) {
	defer close(s.done)
	buf := make([]byte, 4096)
	var line []byte
	flush := func() {
		if len(line) == 0 {
			return
		}
		msg := "container stderr"
		if s.live.Load() {
			msg = "agent stderr"
		}
		s.log.Debug(msg, zap.String("line", string(line)))
		line = line[:0]
	}
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		if n > 0 && !s.live.Load() {
			s.mu.Lock()
			s.out = appendTail(s.out, chunk, maxOutput)
			s.mu.Unlock()
		}
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				line = appendTail(line, chunk, maxOutput)
				break
			}
			line = appendTail(line, chunk[:i], maxOutput)
			flush()
			chunk = chunk[i+1:]
		}
		if err != nil {
			flush()
			return
		}
	}
}

func (s *stderrLog) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.out)
}

// limitedWriter keeps the last max bytes written.
type limitedWriter struct {
	buf *bytes.Buffer
	max int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	b := appendTail(w.buf.Bytes(), p, w.max)
	w.buf.Reset()
	w.buf.Write(b)
	return len(p), nil
}

func appendTail(b, chunk []byte, max int) []byte {
	b = append(b, chunk...)
	if len(b) > max {
		b = append(b[:0], b[len(b)-max:]...)
	}
	return b
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// cEnv is env with the locale forced to C, so that the tools' messages
// are the English ones the rules match.
func cEnv(env []string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "LANG" || k == "LANGUAGE" || strings.HasPrefix(k, "LC_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "LC_ALL=C", "LANG=C")
}

// argvForLog shortens the first stage in a logged argv (machinectl's
// escaped copy too).
func argvForLog(av []string, script string) []string {
	escaped := strings.ReplaceAll(script, "$", "$$")
	out := make([]string, len(av))
	for i, a := range av {
		a = strings.ReplaceAll(a, escaped, "<first stage>")
		out[i] = strings.ReplaceAll(a, script, "<first stage>")
	}
	return out
}

// CheckName refuses a container (pod, machine) name that is empty or
// that the tool would read as a flag. what names the option
// ("Container").
func CheckName(tool, what, name string) error {
	if name == "" {
		return errkind.Errorf(errkind.ErrBadArgs, "%s: %s is required", tool, what)
	}
	if strings.HasPrefix(name, "-") || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return errkind.Errorf(errkind.ErrBadArgs, "%s: %s %q is not a valid name", tool, what, name)
	}
	return nil
}

// HopName is a container hop's default context name: "KIND:NAME", or
// "KIND:USER@NAME" with a user; a non-empty override wins.
func HopName(override, kind, user, name string) string {
	switch {
	case override != "":
		return override
	case user != "":
		return kind + ":" + user + "@" + name
	}
	return kind + ":" + name
}

// StartExec is the Start of a connector that runs one tool's exec
// command: the option checks (nil or an error each) must pass and the tool
// must be found, then the first stage runs as argv(script) without its
// argv[0], which is the tool.
func StartExec(ctx context.Context, req connectors.StartRequest, name string, tool Tool, argv func(script string) []string,
	rules []Rule, timeout time.Duration, checks ...error) (*bootstrap.Conn, error) {
	if req.Name == "" {
		req.Name = name
	}
	for _, err := range checks {
		if err != nil {
			return nil, err
		}
	}
	if _, err := tool.Resolve(); err != nil {
		return nil, err
	}
	return Start(ctx, req, Hop{
		Tool:        tool.Name,
		Command:     func(script string) (*exec.Cmd, error) { return tool.Command(argv(script)[1:]...) },
		Rules:       rules,
		Timeout:     timeout,
		OverNetwork: tool.OverNetwork,
	})
}

// NumericIDs splits a hop's User "UID[:GID]" for tools that take only
// numbers (lxc-attach, lxc exec); "" gives "", "". kind and tool name the
// hop and the program in the error.
func NumericIDs(kind, tool, user string) (uid, gid string, err error) {
	if user == "" {
		return "", "", nil
	}
	uid, gid, _ = strings.Cut(user, ":")
	for _, n := range []string{uid, gid} {
		if n == "" {
			continue
		}
		if _, err := strconv.ParseUint(n, 10, 32); err != nil {
			return "", "", errkind.Errorf(errkind.ErrBadArgs, "%s: User %q: %s takes a numeric uid or uid:gid, not a name", kind, user, tool)
		}
	}
	return uid, gid, nil
}
