package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/spindle-rpc/spindle/daemon/proto"
	"go.uber.org/zap"
)

// yamuxConfig is the yamux configuration of a CLI client's session: a
// local socket, so no keepalive (a client that dies closes it).
//
// No StreamCloseTimeout: yamux arms a timer of that length on every
// stream closed before its peer closed it, and does not stop it when the
// session ends, so the default five minutes kept each request's session
// and buffers (about 13 KB) alive that long: a busy daemon's heap grew
// from 13 to 64 MB over a few hundred runs. The timeout guards a long-
// lived session against a peer that never closes its side; a session
// here lasts one request and drops all its streams when it closes.
func yamuxConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.EnableKeepAlive = false
	cfg.LogOutput = io.Discard
	cfg.StreamOpenTimeout = 0
	cfg.StreamCloseTimeout = 0
	return cfg
}

// CLIEndpoint serves the spindle CLI's protocol (package proto): a yamux
// session per client, four streams, one request.
type CLIEndpoint struct {
	// Handle runs one request and returns the CLI's exit status and
	// what the CLI would have printed on stderr about its failure.
	// Handle writes the command's output on req.Stdout and req.Stderr,
	// and sends req.Started once the command runs.
	Handle func(ctx context.Context, req *CLIRequest) (code int, text string)
	// Log hears of clients refused; nil: nothing is said.
	Log *zap.Logger
}

// HelloTimeout bounds the time from a client's connection to its
// request: one that connects and says nothing would otherwise hold a
// goroutine, and the daemon's exit, for ever.
var HelloTimeout = 10 * time.Second

// ServeConn implements Endpoint.
func (e *CLIEndpoint) ServeConn(ctx context.Context, conn net.Conn, s *Server) {
	log := e.Log
	if log == nil {
		log = zap.NewNop()
	}
	ys, err := yamux.Server(conn, yamuxConfig())
	if err != nil {
		return
	}
	defer ys.Close()
	hello := time.AfterFunc(HelloTimeout, func() { ys.Close() })
	req, err := acceptStreams(ys)
	if err != nil {
		log.Warn("daemon client refused", zap.Error(err))
		return
	}
	m, err := proto.ReadMsg(req.control)
	if !hello.Stop() || err != nil || m.Kind != proto.KindRun {
		log.Warn("daemon client refused: no run request", zap.Error(err))
		return
	}
	req.Run = m.Run
	end := s.Begin(time.Duration(m.Run.PersistNS))
	defer end()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req.cancel = cancel
	go req.readControl()
	code, text := e.Handle(ctx, req)
	req.Stdout.Close()
	req.Stderr.Close()
	req.write(&proto.Msg{Kind: proto.KindExit, Code: code, Text: text}) //nolint:errcheck // the client may be gone
	// The client closes the session once it has the exit: closing it here
	// first could drop the frame.
	select {
	case <-req.gone:
	case <-time.After(5 * time.Second):
	}
}

// CLIRequest is the daemon's side of one CLI client's request.
type CLIRequest struct {
	Run *proto.Run // what the client asks for
	// The command's streams: closing Stdin's reader side is not needed;
	// the client closes it at its end of file.
	Stdin          io.Reader
	Stdout, Stderr io.WriteCloser

	control net.Conn
	wmu     sync.Mutex
	answers chan *proto.Msg
	cancel  context.CancelFunc
	gone    chan struct{} // closed when the client's control stream ends

	mu     sync.Mutex
	signal syscall.Signal // the client's Ctrl-C or kill, once
	closed bool           // the client's user typed <escape>.
	resize func(rows, cols uint16)
}

// acceptStreams accepts the client's four streams and sorts them by
// their role byte.
func acceptStreams(ys *yamux.Session) (*CLIRequest, error) {
	var control, stdin, stdout, stderr net.Conn
	slots := map[proto.Role]*net.Conn{proto.RoleControl: &control, proto.RoleStdin: &stdin,
		proto.RoleStdout: &stdout, proto.RoleStderr: &stderr}
	for range slots {
		st, err := ys.Accept()
		if err != nil {
			return nil, err
		}
		var role [1]byte
		if _, err := io.ReadFull(st, role[:]); err != nil {
			return nil, err
		}
		slot, ok := slots[proto.Role(role[0])]
		if !ok || *slot != nil {
			return nil, fmt.Errorf("unexpected stream role %q", role[0])
		}
		*slot = st
	}
	return &CLIRequest{control: control, Stdin: stdin, Stdout: stdout, Stderr: stderr,
		answers: make(chan *proto.Msg, 1), gone: make(chan struct{})}, nil
}

func (r *CLIRequest) write(m *proto.Msg) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return proto.WriteMsg(r.control, m)
}

// readControl handles the client's frames: answers go to whoever asked,
// a signal or the escape's close cancels the request. The client's going
// away cancels it too.
func (r *CLIRequest) readControl() {
	defer close(r.gone)
	defer r.cancel()
	for {
		m, err := proto.ReadMsg(r.control)
		if err != nil {
			close(r.answers)
			return
		}
		switch m.Kind {
		case proto.KindAnswer:
			select {
			case r.answers <- m:
			default: // nobody asked
			}
		case proto.KindSignal:
			r.mu.Lock()
			if r.signal == 0 {
				r.signal = syscall.Signal(m.Signal)
			}
			r.mu.Unlock()
			r.cancel()
		case proto.KindClose:
			r.mu.Lock()
			r.closed = true
			r.mu.Unlock()
			r.cancel()
		case proto.KindResize:
			r.mu.Lock()
			resize := r.resize
			r.mu.Unlock()
			if resize != nil && m.Rows > 0 && m.Cols > 0 {
				resize(m.Rows, m.Cols)
			}
		}
	}
}

// Started tells the client that the command runs: it may send stdin now.
// name and escape matter for a terminal command (KindStarted's Text and
// Escape).
func (r *CLIRequest) Started(name, escape string) error {
	return r.write(&proto.Msg{Kind: proto.KindStarted, Text: name, Escape: escape})
}

// OnResize sets what the client's terminal size changes do.
func (r *CLIRequest) OnResize(f func(rows, cols uint16)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resize = f
}

// Signal is the signal the client's user sent (0: none yet).
func (r *CLIRequest) Signal() syscall.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.signal
}

// Closed says the client's user typed the escape sequence that closes
// the connection.
func (r *CLIRequest) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Ask puts a question to the client's user: a password (echo false) or a
// confirmation (echo true).
func (r *CLIRequest) Ask(ctx context.Context, text string, echo bool) (string, error) {
	if err := r.write(&proto.Msg{Kind: proto.KindPrompt, Text: text, Echo: echo}); err != nil {
		return "", err
	}
	select {
	case m, ok := <-r.answers:
		if !ok {
			return "", errors.New("the client went away")
		}
		if m.Err != "" {
			return "", errors.New(m.Err)
		}
		return m.Text, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
