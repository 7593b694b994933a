package tunnel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
)

// Remote listening, as ssh -R does: the agent listens where it runs and
// hands each connection it accepts to the controller, which decides what
// to do with it (the CLI connects it to an address on its own side).
//
// Every call still goes from the controller to the agent: the controller
// keeps a few tunnel.Accept calls waiting, and the agent answers one of
// them with each connection it accepts. An agent never opens anything
// towards the controller, so the security policy (agents serve their
// ancestors, and call nobody) is unchanged.

// MethodListen and MethodAccept are the agent's side of a Listener.
const (
	MethodListen = "tunnel.Listen"
	MethodAccept = "tunnel.Accept"
)

// ListenArgs are tunnel.Listen's arguments.
type ListenArgs struct {
	Net  string `msgpack:"net"`  // "tcp", "tcp4" or "tcp6"
	Addr string `msgpack:"addr"` // [host]:port to listen on, as the agent resolves it
}

// AcceptArgs are tunnel.Accept's arguments.
type AcceptArgs struct {
	ID string `msgpack:"id"` // the listener, as tunnel.Listen named it
}

// acceptAhead is how many tunnel.Accept calls a Listener keeps waiting:
// connections that arrive together are handed over at once instead of
// one per round trip.
const acceptAhead = 4

// maxHeader bounds the one header a Listen or Accept circuit starts with.
const maxHeader = 255

// writeHeader writes s as one length byte and its bytes.
func writeHeader(w io.Writer, s string) error {
	if len(s) > maxHeader {
		return fmt.Errorf("header of %d bytes (at most %d)", len(s), maxHeader)
	}
	_, err := w.Write(append([]byte{byte(len(s))}, s...))
	return err
}

// readHeader reads what writeHeader wrote. The agent's bytes are not
// trusted: the length is one byte, so at most 255 bytes are read.
func readHeader(r io.Reader) (string, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	b := make([]byte, n[0])
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// listeners are one agent's open listeners, by ID.
type listeners struct {
	mu sync.Mutex
	m  map[string]*agentListener
}

type agentListener struct {
	ln     net.Listener
	conns  chan net.Conn // accepted, waiting for a tunnel.Accept
	closed chan struct{}
}

func (ls *listeners) get(id string) *agentListener {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.m[id]
}

// handleListen listens, writes "ID ADDR" (the listener's ID and the
// address it is bound to) on the circuit, then keeps the listener open
// until the controller closes the circuit or the call ends.
func (ls *listeners) handleListen(ctx context.Context, call *rpc.Call) (any, error) {
	var a ListenArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	circ := call.Circuit
	if circ == nil {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s needs a circuit", MethodListen)
	}
	var ln net.Listener
	var err error
	switch a.Net {
	case "tcp", "tcp4", "tcp6":
		var lc net.ListenConfig
		ln, err = lc.Listen(ctx, a.Net, a.Addr)
	case "unix":
		ln, err = ListenUnixPrivate(a.Addr)
	default:
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: network %q (want tcp, tcp4, tcp6 or unix)", MethodListen, a.Net)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", MethodListen, a.Addr, err)
	}
	var idb [8]byte
	rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	l := &agentListener{ln: ln, conns: make(chan net.Conn), closed: make(chan struct{})}
	ls.mu.Lock()
	ls.m[id] = l
	ls.mu.Unlock()

	var wg sync.WaitGroup
	defer func() {
		ls.mu.Lock()
		delete(ls.m, id)
		ls.mu.Unlock()
		close(l.closed)
		ln.Close()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.acceptLoop()
	}()
	if err := writeHeader(circ, id+" "+ln.Addr().String()); err != nil {
		return nil, err
	}
	// The controller closes its side to stop listening; the call's end
	// (the controller gone) stops it too.
	stop := context.AfterFunc(ctx, func() { circ.Close() })
	defer stop()
	io.Copy(io.Discard, circ)
	circ.Close()
	return nil, nil
}

// acceptLoop accepts one connection at a time and waits for a
// tunnel.Accept to take it: while none waits, further connections wait in
// the kernel's backlog, not in memory here.
func (l *agentListener) acceptLoop() {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: try again shortly
			// rather than spin or give the listener up.
			select {
			case <-l.closed:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		select {
		case l.conns <- conn:
		case <-l.closed:
			conn.Close()
			return
		}
	}
}

// handleAccept waits for a connection to the listener ID, writes its
// peer's address on the circuit, then copies both ways as tunnel.Dial
// does.
func (ls *listeners) handleAccept(ctx context.Context, call *rpc.Call) (any, error) {
	var a AcceptArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	circ := call.Circuit
	if circ == nil {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s needs a circuit", MethodAccept)
	}
	l := ls.get(a.ID)
	if l == nil {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: no listener %q (it was closed)", MethodAccept, a.ID)
	}
	var conn net.Conn
	select {
	case conn = <-l.conns:
	case <-l.closed:
		return nil, fmt.Errorf("%s: %w", MethodAccept, net.ErrClosed)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer conn.Close()
	if err := writeHeader(circ, conn.RemoteAddr().String()); err != nil {
		return nil, err
	}
	spliceCall(ctx, conn, circ)
	return nil, nil
}

// Listener is a listening TCP socket on a context's side (Listen):
// Accept returns the connections made to it there. Closing it stops the
// listening; connections already accepted go on.
type Listener struct {
	c      rpc.Caller
	st     rpc.Stream
	id     string
	addr   net.Addr
	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	ready  chan *Conn
	wg     sync.WaitGroup

	closing    atomic.Bool
	listenDone chan struct{} // closed when the tunnel.Listen call has ended

	errOnce sync.Once
	err     error
	failed  chan struct{} // closed once err is set
}

// closeWait bounds how long Close waits for the agent to confirm that it
// stopped listening.
const closeWait = 5 * time.Second

// Listen asks c's agent to listen on addr (network tcp, tcp4 or tcp6,
// port 0 picking one: see Addr; or unix, a socket path that only the
// agent's user may use, removed on Close) where it runs. ctx bounds the
// setup only.
func Listen(ctx context.Context, c rpc.Caller, network, addr string) (*Listener, error) {
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	st, err := c.Stream(lctx, MethodListen, &ListenArgs{Net: network, Addr: addr})
	if err != nil {
		cancel()
		return nil, err
	}
	hdr, err := readWithin(ctx, st)
	var id, bound string
	if err == nil {
		var ok bool
		if id, bound, ok = strings.Cut(hdr, " "); !ok || id == "" || bound == "" {
			err = fmt.Errorf("%s %s: malformed reply %q", MethodListen, addr, hdr)
		}
	}
	if err != nil {
		st.Close()
		if werr := st.Wait(nil); werr != nil {
			err = werr // the agent's reason: in use, not permitted, …
		} else if ctx.Err() != nil {
			err = fmt.Errorf("%s %s: %w", MethodListen, addr, ctx.Err())
		}
		cancel()
		return nil, err
	}
	l := &Listener{c: c, st: st, id: id, addr: tunnelAddr(bound), ctx: lctx, cancel: cancel,
		ready: make(chan *Conn), failed: make(chan struct{}), listenDone: make(chan struct{})}
	// The Listen call ends when the agent stops listening (or is lost).
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		err := st.Wait(nil)
		close(l.listenDone)
		if l.closing.Load() {
			return
		}
		if err == nil {
			err = fmt.Errorf("%s %s: the agent stopped listening", MethodListen, bound)
		}
		l.fail(err)
	}()
	for range acceptAhead {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.acceptWorker()
		}()
	}
	return l, nil
}

// readWithin reads a header from st, giving up when ctx ends.
func readWithin(ctx context.Context, st rpc.Stream) (string, error) {
	if d, ok := ctx.Deadline(); ok {
		st.SetReadDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { st.SetReadDeadline(time.Now()) })
	s, err := readHeader(st)
	stop()
	st.SetReadDeadline(time.Time{})
	return s, err
}

func (l *Listener) fail(err error) {
	l.errOnce.Do(func() {
		l.err = err
		close(l.failed)
	})
}

// acceptWorker keeps one tunnel.Accept call waiting, and hands each
// connection it brings to Accept.
func (l *Listener) acceptWorker() {
	for l.ctx.Err() == nil {
		// Each connection's call outlives the Listener; a call still
		// waiting ends with it.
		cctx, cancel := context.WithCancel(context.WithoutCancel(l.ctx))
		unhook := context.AfterFunc(l.ctx, cancel)
		st, err := l.c.Stream(cctx, MethodAccept, &AcceptArgs{ID: l.id})
		if err != nil {
			unhook()
			cancel()
			l.fail(err)
			return
		}
		peer, err := readHeader(st)
		if err != nil || !unhook() {
			st.Close()
			if werr := st.Wait(nil); werr != nil {
				err = werr
			}
			cancel()
			if !l.closing.Load() {
				l.fail(err)
			}
			return
		}
		conn := &Conn{Stream: st, cancel: cancel, local: l.addr, remote: tunnelAddr(peer)}
		select {
		case l.ready <- conn:
		case <-l.ctx.Done():
			conn.Close()
			return
		}
	}
}

// Accept waits for the next connection made to the listener on the
// agent's side. Its RemoteAddr is the peer as the agent saw it.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.ctx.Done():
	case <-l.failed:
	}
	if l.closing.Load() {
		return nil, net.ErrClosed
	}
	// A connection handed over just before the failure still counts.
	select {
	case c := <-l.ready:
		return c, nil
	default:
	}
	return nil, l.err
}

// Close stops the listening on the agent's side. Connections already
// accepted go on until they are closed.
// It returns once the agent has stopped listening (or after closeWait,
// or at once if the agent is lost), so that the port is free again.
func (l *Listener) Close() error {
	if l.closing.Swap(true) {
		return nil
	}
	err := l.st.Close()
	select {
	case <-l.listenDone:
	case <-time.After(closeWait):
	}
	l.cancel()
	l.wg.Wait()
	return err
}

// Addr is the address the agent listens on (with the port it picked).
func (l *Listener) Addr() net.Addr { return l.addr }

// Err returns why the listener stopped by itself (the agent lost), or nil
// while it works.
func (l *Listener) Err() error {
	select {
	case <-l.failed:
		return l.err
	default:
		return nil
	}
}

var _ net.Listener = (*Listener)(nil)
