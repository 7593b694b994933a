// Package tunnel carries TCP connections through a context, as ssh -L
// does through one host: the agent dials the address from where it runs
// (its host, or the network namespace of the container it runs in) and
// splices the connection with the call's circuit. Through a chain, the
// database in a container behind a host behind a bastion is one Dial
// away, with no port opened anywhere but on the controller's machine.
//
// Method (register it on an agent with Register):
//
//	tunnel.Dial  args {net: "tcp" (tcp4, tcp6; or unix), addr: "host:port"
//	             (or a socket path)}; a circuit; no result. The agent dials (bounded by the
//	             call's context and DialTimeout), writes one byte (0) on
//	             the circuit once connected, then copies both ways until
//	             both directions have ended; a half-close on either side
//	             is passed on. A failed dial is the call's error, with
//	             nothing written.
//
//	tunnel.Listen args {net, addr}; a circuit; no result. The agent
//	             listens on addr (port 0: one it picks; a unix socket is
//	             made 0600, serves only the agent's user and root, and is
//	             removed at the end), writes a header
//	             (one length byte, then "ID BOUND-ADDRESS") on the circuit,
//	             and listens until the controller closes the circuit or
//	             cancels the call. Its connections wait in the kernel's
//	             backlog until a tunnel.Accept takes them.
//	tunnel.Accept args {id}; a circuit; no result. Waits for the next
//	             connection to listener ID, writes a header (one length
//	             byte, then the peer's address), then copies both ways
//	             as tunnel.Dial does. An unknown or closed listener is
//	             the call's error.
//
// Cancelling a tunnel's call (Conn.Close) ends it as closing a TCP socket
// does: what was sent before is delivered, then the connection closes.
//
// An agent dials and listens only for its ancestors (the controller), as
// for every call: nothing on a target can open a tunnel elsewhere, and a
// remote listener's connections go only where the controller takes them.
package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
)

// MethodDial is the agent's side of a tunnel.
const MethodDial = "tunnel.Dial"

// DialTimeout bounds the agent's dial.
const DialTimeout = 30 * time.Second

// connected is the byte the agent writes once it has connected.
const connected = 0

// DialArgs are tunnel.Dial's arguments.
type DialArgs struct {
	Net  string `msgpack:"net"`  // "tcp", "tcp4" or "tcp6"
	Addr string `msgpack:"addr"` // host:port, as the agent resolves it
}

// Register registers tunnel.Dial, tunnel.Listen and tunnel.Accept on reg.
func Register(reg *rpc.Registry) {
	reg.Handle(MethodDial, handleDial)
	ls := &listeners{m: map[string]*agentListener{}}
	reg.Handle(MethodListen, ls.handleListen)
	reg.Handle(MethodAccept, ls.handleAccept)
}

func handleDial(ctx context.Context, call *rpc.Call) (any, error) {
	var a DialArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	circ := call.Circuit
	if circ == nil {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s needs a circuit", MethodDial)
	}
	switch a.Net {
	case "tcp", "tcp4", "tcp6", "unix":
	default:
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: network %q (want tcp, tcp4, tcp6 or unix)", MethodDial, a.Net)
	}
	d := net.Dialer{Timeout: DialTimeout}
	conn, err := d.DialContext(ctx, a.Net, a.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", MethodDial, a.Addr, err)
	}
	defer conn.Close()
	if _, err := circ.Write([]byte{connected}); err != nil {
		return nil, err
	}
	spliceCall(ctx, conn, circ)
	return nil, nil
}

// closeGrace bounds how long a cancelled tunnel goes on delivering what
// the controller sent before it closed.
const closeGrace = 5 * time.Second

// spliceCall is the agent's Splice of a call's circuit with its
// connection. The call's cancellation (the controller's Conn.Close) ends
// the tunnel as closing a TCP socket does: the connection is no longer
// read, what the controller sent before is still delivered (within
// closeGrace: it has already arrived, in the circuit's buffer), and then
// the connection is closed, so that a peer still sending is reset rather
// than left blocked.
func spliceCall(ctx context.Context, conn net.Conn, circ net.Conn) {
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		copyThenClose(conn, circ)
	}()
	stop := context.AfterFunc(ctx, func() {
		now := time.Now()
		conn.SetReadDeadline(now)
		circ.SetWriteDeadline(now)
		conn.SetWriteDeadline(now.Add(closeGrace))
		circ.SetReadDeadline(now.Add(closeGrace))
	})
	defer stop()
	_, err := io.Copy(circ, conn)
	if ctx.Err() == nil {
		if err != nil && !errors.Is(err, net.ErrClosed) {
			circ.Close()
			conn.Close()
		} else if hc, ok := circ.(halfCloser); !ok || hc.CloseWrite() != nil {
			circ.Close()
		}
	}
	<-delivered
	conn.Close()
}

// halfCloser is a connection whose writing side can be closed alone.
type halfCloser interface {
	CloseWrite() error
}

// Splice copies a to b and b to a until both directions have ended,
// passing each side's end of input on as a half-close (CloseWrite where
// the other side has one, else Close).
func Splice(a, b io.ReadWriteCloser) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyThenClose(b, a)
	}()
	copyThenClose(a, b)
	<-done
}

func copyThenClose(dst io.WriteCloser, src io.Reader) {
	_, err := io.Copy(dst, src)
	if hc, ok := dst.(halfCloser); ok && err == nil {
		if hc.CloseWrite() == nil {
			return
		}
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		// A broken side: end both directions.
		dst.Close()
		if c, ok := src.(io.Closer); ok {
			c.Close()
		}
		return
	}
	dst.Close()
}

// Conn is a TCP connection the agent of a context made (Dial): reads and
// writes travel on the call's circuit.
type Conn struct {
	rpc.Stream
	cancel context.CancelFunc
	local  net.Addr
	remote net.Addr

	// early: made by DialEarly, whose first Read consumes the agent's
	// connected byte (or learns why the connect failed).
	early    bool
	status   sync.Once
	dialErr  error
	dialAddr string
}

// DialEarly is Dial without the wait: it returns as soon as the call is
// sent, and what is written travels at once, waiting on the agent's side
// until the connection is made. A client that speaks first (HTTP, a
// database login) saves the round trip Dial spends on learning that the
// connect succeeded, as `spindle forward -L` does for every connection.
// A failed connect is the error of the first Read (and of Connected);
// writes before that may succeed and go nowhere, as on a TCP connection
// that is reset.
func DialEarly(ctx context.Context, c rpc.Caller, network, addr string) (*Conn, error) {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	st, err := c.Stream(cctx, MethodDial, &DialArgs{Net: network, Addr: addr})
	if err != nil {
		cancel()
		return nil, err
	}
	return &Conn{Stream: st, cancel: cancel, local: tunnelAddr("spindle"), remote: tunnelAddr(addr), early: true, dialAddr: addr}, nil
}

// Connected waits until the agent has connected (at once for Dial's
// connections) and returns why it could not.
func (c *Conn) Connected() error {
	c.status.Do(func() {
		if !c.early {
			return
		}
		var b [1]byte
		_, err := io.ReadFull(c.Stream, b[:])
		if err == nil && b[0] != connected {
			err = fmt.Errorf("%s %s: unexpected first byte %d", MethodDial, c.dialAddr, b[0])
		}
		if err != nil {
			if werr := c.Stream.Wait(nil); werr != nil {
				err = werr // the agent's reason: refused, unreachable, …
			}
			c.dialErr = err
		}
	})
	return c.dialErr
}

// Read reads what the agent's connection sent.
func (c *Conn) Read(p []byte) (int, error) {
	if err := c.Connected(); err != nil {
		return 0, err
	}
	return c.Stream.Read(p)
}

// Dial asks c's agent to connect to addr (network tcp, tcp4 or tcp6, or
// unix for a socket path) from
// where it runs, and returns the connection once it is made. ctx bounds
// the dial only.
func Dial(ctx context.Context, c rpc.Caller, network, addr string) (*Conn, error) {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	st, err := c.Stream(cctx, MethodDial, &DialArgs{Net: network, Addr: addr})
	if err != nil {
		cancel()
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		st.SetReadDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { st.SetReadDeadline(time.Now()) })
	var b [1]byte
	_, err = io.ReadFull(st, b[:])
	stop()
	st.SetReadDeadline(time.Time{})
	if err == nil && b[0] != connected {
		err = fmt.Errorf("%s %s: unexpected first byte %d", MethodDial, addr, b[0])
	}
	if err != nil {
		st.Close()
		if werr := st.Wait(nil); werr != nil {
			err = werr // the agent's reason: refused, unreachable, …
		} else if ctx.Err() != nil {
			err = fmt.Errorf("%s %s: %w", MethodDial, addr, ctx.Err())
		}
		cancel()
		return nil, err
	}
	return &Conn{Stream: st, cancel: cancel, local: tunnelAddr("spindle"), remote: tunnelAddr(addr)}, nil
}

// CloseWrite ends what is sent: the agent half-closes the TCP connection.
func (c *Conn) CloseWrite() error { return c.Stream.Close() }

// Close ends the connection both ways.
func (c *Conn) Close() error {
	err := c.Stream.Close()
	c.cancel()
	return err
}

// LocalAddr and RemoteAddr name the tunnel: "spindle" and the address
// the agent dialled.
func (c *Conn) LocalAddr() net.Addr  { return c.local }
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

type tunnelAddr string

func (tunnelAddr) Network() string  { return "spindle-tunnel" }
func (a tunnelAddr) String() string { return string(a) }
