package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
)

// Name implements connectors.Connector: "ssh:HOST" unless ContextName.
func (o Options) Name() string {
	if o.ContextName != "" {
		return o.ContextName
	}
	return "ssh:" + o.Host
}

// exitGrace is how long a closed agent gets to exit before its session is
// closed under it.
const exitGrace = 3 * time.Second

// Start implements connectors.Connector: it connects and authenticates
// (through ProxyJump hops or a ProxyCommand if configured), runs the first stage in ONE
// session and returns the agent's stream. Closing the Conn closes the
// session, the connection and its keepalive.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	log := req.Logger
	if log == nil {
		log = zap.NewNop()
	}
	src := o.Agent
	if src == nil {
		src = req.Agent
	}
	name := req.Name
	if name == "" {
		name = o.Name()
	}
	l, err := connect(ctx, o, log, 0)
	if err != nil {
		return nil, err
	}
	return l.startOwnAgent(ctx, &req, src, name, log)
}

// startOwnAgent starts the agent on a connection of its own: the agent's
// Conn closes l, and a failed start closes it at once.
func (l *link) startOwnAgent(ctx context.Context, req *connectors.StartRequest, src bootstrap.Source, name string, log *zap.Logger) (*bootstrap.Conn, error) {
	conn, err := l.startAgentFresh(ctx, req, src, name, l.env, log, l.Close)
	if err != nil {
		l.Close()
		return nil, err
	}
	l.agentUp()
	return conn, nil
}

// startAgentFresh is startAgent, run again with a fresh agent if the
// cached one failed its self-check.
func (l *link) startAgentFresh(ctx context.Context, req *connectors.StartRequest, src bootstrap.Source, name string, env []string, log *zap.Logger, release func() error) (*bootstrap.Conn, error) {
	conn, err := l.startAgent(ctx, req.Args(), src, name, env, log, release)
	if err != nil && errors.Is(err, bootstrap.ErrStaleAgent) {
		log.Debug("cached agent failed its self-check: starting a fresh one", zap.String("context", name), zap.Error(err))
		req.Fresh = true
		conn, err = l.startAgent(ctx, req.Args(), src, name, env, log, release)
	}
	return conn, err
}

// ackAgain asks for quick ACKs on l's connection while one more hop
// starts on it, until the returned function is called.
func (l *link) ackAgain() func() {
	if l.qa == nil {
		return func() {}
	}
	return l.qa.again()
}

// agentUp ends the quick ACKs of l's connection and of its jump hosts'.
func (l *link) agentUp() {
	for ; l != nil; l = l.jump {
		if l.started != nil {
			l.started()
		}
	}
}

// startAgent opens one session, sends env (NAME=VALUE) as ssh's SendEnv
// and SetEnv do, runs the first stage in it and hands its stdio to
// bootstrap.RemoteStart. On success the returned Conn holds the
// link, and calls release when it is closed (l.Close for a connection of
// its own); on failure only the session is closed.
func (l *link) startAgent(ctx context.Context, args bootstrap.AgentArgs, src bootstrap.Source, name string, env []string, log *zap.Logger, release func() error) (*bootstrap.Conn, error) {
	cmd, err := bootstrap.RemoteCommand(args, src)
	if err != nil {
		return nil, err
	}
	sess, err := l.client.NewSession()
	if err != nil {
		if sessionRefused(err) {
			return nil, fmt.Errorf("open an ssh session on %s: %w (the server allows no more sessions on this connection: see MaxSessions in its sshd_config)", l.name, err)
		}
		return nil, fmt.Errorf("open an ssh session on %s: %w", l.name, err)
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	stderr, err := sess.StderrPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	// Without waiting for replies, as ssh does: no round trip, and a
	// server that refuses a variable (AcceptEnv) leaves it out quietly.
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, err := sess.SendRequest("env", false, gossh.Marshal(struct{ Name, Value string }{k, v})); err != nil {
			sess.Close()
			return nil, fmt.Errorf("open an ssh session on %s: %w", l.name, err)
		}
	}
	if err := sess.Start(cmd); err != nil {
		sess.Close()
		return nil, fmt.Errorf("start the first stage on %s: %w", l.name, err)
	}
	said := &stderrTail{log: log.With(zap.String("context", name)), level: zap.DebugLevel, msg: "remote stderr"}
	stderrDone := make(chan struct{})
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(stderrDone)
		io.Copy(said, stderr)
	}()
	var owned atomic.Bool
	var exitErr error           // the session's end, once done is closed
	done := make(chan struct{}) // closed when the session has ended
	closeFn := func() error {
		// stdin is closed already: give the agent a moment to exit. The
		// waiter ends once the session or the connection is closed.
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			exitErr = sess.Wait()
			close(done)
		}()
		grace := exitGrace
		if !owned.Load() && ctx.Err() != nil {
			// A start cut short: nothing to wait for (a login shell
			// stuck in its rc files would keep the connect past its
			// timeout for the whole grace).
			grace = 0
		}
		t := time.NewTimer(grace)
		select {
		case <-done:
		case <-t.C:
			log.Debug("agent did not exit in time: closing its session", zap.String("context", name))
		}
		t.Stop()
		sess.Close()
		if owned.Load() {
			return release()
		}
		return nil
	}
	conn, err := bootstrap.RemoteStart(ctx, stdin, stdout, args, src, name, log, closeFn)
	if err != nil {
		sess.Close()
		if errors.Is(err, bootstrap.ErrNoHello) {
			// RemoteStart ran closeFn: the session has ended, or was
			// closed after exitGrace.
			select {
			case <-done:
				<-stderrDone
				err = explainEnd(err, exitStatus(exitErr), said.String())
			default:
			}
		}
		return nil, err
	}
	owned.Store(true)
	return conn, nil
}

// explainEnd adds to a start that ended before the hello how the session
// ended: its exit status (-1: unknown) and what it said on stderr, and,
// when it said nothing at all, the usual cause.
func explainEnd(err error, status int, stderr string) error {
	var how []string
	if status >= 0 {
		how = append(how, fmt.Sprintf("the session exited with status %d", status))
	}
	switch {
	case stderr != "":
		how = append(how, "stderr: "+stderr)
	case status > 0 && !strings.Contains(err.Error(), "it printed"):
		how[0] += " and printed nothing: the account's login shell must run the commands ssh gives it (/bin/false and nologin do not)"
	}
	if len(how) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(how, "; "))
}

// exitStatus is a session's exit status, or -1 when it has none (killed
// by a signal, or the connection ended).
func exitStatus(err error) int {
	var ee *gossh.ExitError
	if err == nil {
		return 0
	}
	if errors.As(err, &ee) && ee.Signal() == "" {
		return ee.ExitStatus()
	}
	return -1
}

var _ connectors.Connector = Options{}
