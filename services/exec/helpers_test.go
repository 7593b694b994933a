package exec

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/testconn"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/rpc"
)

// localCaller runs handlers in-process, through the wire encoding, with a
// unix socketpair standing in for the circuit.
type localCaller struct{ reg *rpc.Registry }

func newLocalCaller() *localCaller {
	reg := rpc.NewRegistry()
	Register(reg)
	return &localCaller{reg: reg}
}

func (l *localCaller) Call(ctx context.Context, method string, args, result any) error {
	h, ok := l.reg.Lookup(method)
	if !ok {
		return errkind.Errorf(errkind.ErrUnknownMethod, "unknown method %q", method)
	}
	call, _, err := rpc.NewCall(method, args, nil)
	if err != nil {
		return err
	}
	res, err := h(ctx, call)
	return encodeReply(res, err, result)
}

func encodeReply(res any, err error, result any) error {
	if err != nil {
		return rpc.ToRemote(err)
	}
	data, err := wire.Marshal(res)
	if err != nil {
		return err
	}
	if result == nil {
		return nil
	}
	return wire.Unmarshal(data, result)
}

func (l *localCaller) Stream(ctx context.Context, method string, args any) (rpc.Stream, error) {
	h, ok := l.reg.Lookup(method)
	if !ok {
		return nil, errkind.Errorf(errkind.ErrUnknownMethod, "unknown method %q", method)
	}
	client, server := socketpair()
	call, controls, err := rpc.NewCall(method, args, halfCloser{server})
	if err != nil {
		client.Close()
		server.Close()
		return nil, err
	}
	hctx, cancel := context.WithCancel(ctx)
	s := &localStream{halfCloser: halfCloser{client}, controls: controls, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.res, s.err = h(hctx, call)
		server.Close() // as rpc.Server closes the circuit
		cancel()
	}()
	return s, nil
}

func socketpair() (*net.UnixConn, *net.UnixConn) {
	a, b, err := testconn.Pair()
	if err != nil {
		panic(err)
	}
	return a, b
}

// halfCloser makes Close a half-close, like a yamux stream's.
type halfCloser struct{ *net.UnixConn }

func (h halfCloser) Close() error { return h.CloseWrite() }

type localStream struct {
	halfCloser
	controls chan<- rpc.Control
	done     chan struct{}
	res      any
	err      error
	once     sync.Once
}

func (s *localStream) Wait(result any) error {
	<-s.done
	s.once.Do(func() { s.UnixConn.Close() })
	return encodeReply(s.res, s.err, result)
}

func (s *localStream) Control(c rpc.Control) error {
	select {
	case <-s.done:
		return errkind.Errorf(errkind.ErrNotFound, "call ended")
	case s.controls <- c:
		return nil
	}
}

// gone reports whether pid no longer runs (a zombie counts as gone: in a
// container nobody may reap an orphan).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// waitGone polls until every pid is gone, failing after a generous bound.
func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for !gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still running", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
