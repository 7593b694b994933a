// Package agentfwd forwards the controller's ssh-agent to an agent's host,
// as `ssh -A` does: commands the agent starts afterwards (exec.Run,
// exec.Start) find SSH_AUTH_SOCK naming a socket the agent serves, and the
// requests made there travel to the controller on a circuit and reach the
// controller's ssh-agent. `git pull` from a private repository or an `ssh`
// onward on the target then signs with keys that never leave the
// controller's machine.
//
// Forwarding is read-only, unlike ssh's: the controller passes on listing
// keys, signing, and the session-bind and query extensions, and answers
// every other request (adding, removing or locking keys) with a failure,
// whatever the far end sends. It is off unless the controller starts it
// (Start; the CLI's -A), for one context at a time; a become hop or a
// container behind that context is another context, with no forwarding
// unless started there too. As with ssh -A, whoever is root on the target
// (or is the target user) can use the socket, and so the keys, while it
// lasts.
//
// Method (register it on an agent with Register):
//
//	agentfwd.Serve  a circuit; no args; no result (it returns when the
//	                circuit ends). The agent creates a private directory
//	                (0700, in $TMPDIR) holding agent.sock, sends its path
//	                as the circuit's first frame, then sends each request a
//	                local client makes as a frame and expects its reply as
//	                the next frame from the controller, one at a time.
//
// Frames are the ssh-agent protocol's own: a uint32 big-endian length and
// that many bytes, at most 256 KiB (OpenSSH's limit).
package agentfwd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
)

// MethodServe is the agent's side of a forwarding.
const MethodServe = "agentfwd.Serve"

// maxMessage bounds one ssh-agent message (OpenSSH's AGENT_MAX_LEN).
const maxMessage = 256 << 10

// socket is the path of this agent's forwarded socket while one is served.
var socket atomic.Pointer[string]

// Socket is the forwarded ssh-agent socket that commands started now get
// as SSH_AUTH_SOCK, or "" when there is none.
func Socket() string {
	if p := socket.Load(); p != nil {
		return *p
	}
	return ""
}

// Register registers agentfwd.Serve on reg.
func Register(reg *rpc.Registry) { reg.Handle(MethodServe, handleServe) }

func handleServe(ctx context.Context, call *rpc.Call) (any, error) {
	circ := call.Circuit
	if circ == nil {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s needs a circuit", MethodServe)
	}
	defer circ.Close()
	dir, err := os.MkdirTemp("", "spindle-agent-")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", MethodServe, err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", MethodServe, err)
	}
	defer ln.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("%s: %w", MethodServe, err)
	}
	mine := &path
	if !socket.CompareAndSwap(nil, mine) {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: this agent already forwards an ssh-agent (%s)", MethodServe, Socket())
	}
	defer socket.CompareAndSwap(mine, nil)
	if err := writeFrame(circ, []byte(path)); err != nil {
		return nil, err
	}

	r := &relay{circ: circ, replies: make(chan []byte), done: make(chan struct{})}
	// The circuit's reader: replies go to the one request waiting; its
	// end (the controller stopped, or is gone) ends the forwarding.
	go func() {
		defer close(r.done)
		for {
			msg, err := readFrame(circ)
			if err != nil {
				return
			}
			select {
			case r.replies <- msg:
			case <-ctx.Done():
				return
			}
		}
	}()
	stop := context.AfterFunc(ctx, func() { circ.Close() })
	defer stop()
	go func() {
		<-r.done
		ln.Close()
	}()

	var clients sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		clients.Add(1)
		go func() {
			defer clients.Done()
			r.serveClient(c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		}()
	}
	circ.Close()
	<-r.done
	mu.Lock()
	for c := range conns {
		c.Close()
	}
	mu.Unlock()
	clients.Wait()
	return nil, nil
}

// relay passes one local client's request at a time over the circuit.
type relay struct {
	circ    net.Conn
	mu      sync.Mutex // one request on the circuit at a time
	replies chan []byte
	done    chan struct{} // the circuit's reader ended
}

func (r *relay) serveClient(c net.Conn) {
	for {
		req, err := readFrame(c)
		if err != nil {
			return
		}
		reply, ok := r.roundTrip(req)
		if !ok {
			return
		}
		if writeFrame(c, reply) != nil {
			return
		}
	}
}

func (r *relay) roundTrip(req []byte) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if writeFrame(r.circ, req) != nil {
		return nil, false
	}
	select {
	case reply := <-r.replies:
		return reply, true
	case <-r.done:
		return nil, false
	}
}

// errTooLong is a frame longer than maxMessage.
var errTooLong = errors.New("ssh-agent message longer than 256 KiB")

func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxMessage {
		return nil, errTooLong
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

func writeFrame(w io.Writer, msg []byte) error {
	if len(msg) > maxMessage {
		return errTooLong
	}
	buf := make([]byte, 4+len(msg))
	binary.BigEndian.PutUint32(buf, uint32(len(msg)))
	copy(buf[4:], msg)
	_, err := w.Write(buf)
	return err
}
