package ssh

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// While a connection starts, its client acknowledges every TCP segment at
// once (TCP_QUICKACK, renewed after each read: Linux drops back to
// delayed ACKs on its own). OpenSSH's sshd leaves Nagle's algorithm on
// for sessions without a terminal, and right after authentication it
// sends several small packets in a row (the success, host keys, the
// session's confirmation) while the client, waiting for the
// confirmation, has nothing to send: the later packets waited for the
// client's delayed ACK, 40 ms on Linux, in every connect (seen with
// strace on both sides). Once the agent is up, the bus's requests carry
// the ACKs and the option only costs a system call per read, so it is
// switched off. A connection shared by several hops (share.go) switches
// it on again while each later hop starts.

// quickAckConn is a TCP connection that asks for quick ACKs while on.
type quickAckConn struct {
	net.Conn
	rc syscall.RawConn
	// on counts the hops starting on this connection: quick ACKs while
	// any is.
	on atomic.Int32
	// sets counts the successful setsockopt calls. Reading the option
	// back says nothing reliable: Linux reports whether the connection is
	// in its interactive ("pingpong") mode, which traffic changes.
	sets atomic.Int32
}

// withQuickAck wraps c (if it is TCP) to acknowledge at once until the
// returned function is called.
func withQuickAck(c net.Conn) (net.Conn, func()) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, func() {}
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c, func() {}
	}
	q := &quickAckConn{Conn: c, rc: rc}
	q.on.Store(1)
	q.quickAck()
	return q, sync.OnceFunc(func() { q.on.Add(-1) })
}

// again asks for quick ACKs while one more hop starts, until the
// returned function is called.
func (q *quickAckConn) again() func() {
	q.on.Add(1)
	q.quickAck()
	return sync.OnceFunc(func() { q.on.Add(-1) })
}

func (q *quickAckConn) quickAck() {
	q.rc.Control(func(fd uintptr) { //nolint:errcheck // best effort: without it, ACKs are only delayed
		if unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1) == nil {
			q.sets.Add(1)
		}
	})
}

func (q *quickAckConn) Read(p []byte) (int, error) {
	n, err := q.Conn.Read(p)
	if q.on.Load() > 0 {
		q.quickAck()
	}
	return n, err
}
