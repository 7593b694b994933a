package agentfwd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindle-rpc/spindle/rpc"
)

// ssh-agent message numbers (draft-miller-ssh-agent).
const (
	agentFailure           = 5
	agentRequestIdentities = 11
	agentSignRequest       = 13
	agentExtension         = 27
)

// passedExtensions are the extension requests passed on: binding a key's
// use to the session it signs for, and asking which extensions exist.
var passedExtensions = map[string]bool{"session-bind@openssh.com": true, "query": true}

// readyTimeout bounds how long Start waits for the agent's socket when its
// context has no deadline.
const readyTimeout = 30 * time.Second

// requestTimeout bounds one request to the controller's ssh-agent, which
// may wait for the user (a hardware key's touch, a confirmation dialogue).
const requestTimeout = 2 * time.Minute

// Forwarding is the controller's side of one forwarded ssh-agent.
type Forwarding struct {
	// Path is the socket on the target, which commands started on the
	// context from now on get as SSH_AUTH_SOCK.
	Path string

	st      rpc.Stream
	local   string
	refused atomic.Int64
	done    chan struct{}
	once    sync.Once
}

// Start forwards the ssh-agent listening on socket (here, on the
// controller's machine: usually $SSH_AUTH_SOCK) to c's host, until Close
// or until c disconnects. It returns once commands started on c see the
// forwarded SSH_AUTH_SOCK. ctx bounds only the setting up.
func Start(ctx context.Context, c rpc.Caller, socket string) (*Forwarding, error) {
	if socket == "" {
		return nil, errors.New("agent forwarding: no ssh-agent to forward (SSH_AUTH_SOCK is not set)")
	}
	// The call lives as long as the forwarding, not as long as ctx.
	st, err := c.Stream(context.WithoutCancel(ctx), MethodServe, nil)
	if err != nil {
		return nil, fmt.Errorf("agent forwarding: %w", err)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(readyTimeout)
	}
	st.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { st.SetReadDeadline(time.Now()) })
	path, err := readFrame(st)
	stop()
	st.SetReadDeadline(time.Time{})
	if err != nil {
		st.Close()
		if werr := st.Wait(nil); werr != nil {
			err = werr // the agent's reason (say, already forwarding)
		}
		return nil, fmt.Errorf("agent forwarding: %w", err)
	}
	f := &Forwarding{Path: string(path), st: st, local: socket, done: make(chan struct{})}
	go f.serve()
	return f, nil
}

// Refused counts the requests refused so far (adding, removing or locking
// keys, unknown extensions).
func (f *Forwarding) Refused() int64 { return f.refused.Load() }

// Close ends the forwarding: the target's socket is removed, and commands
// still running there lose their agent.
func (f *Forwarding) Close() error {
	f.once.Do(func() { f.st.Close() })
	<-f.done
	f.st.Wait(nil) // the handler's end; its error says nothing new
	return nil
}

// serve answers the target's requests until the circuit ends.
func (f *Forwarding) serve() {
	defer close(f.done)
	var agent net.Conn
	defer func() {
		if agent != nil {
			agent.Close()
		}
	}()
	for {
		req, err := readFrame(f.st)
		if err != nil {
			return
		}
		reply := []byte{agentFailure}
		if f.allowed(req) {
			if agent == nil {
				agent, _ = net.Dial("unix", f.local)
			}
			if agent != nil {
				if r, err := roundTrip(agent, req); err == nil {
					reply = r
				} else {
					agent.Close() // perhaps restarted: dial again next time
					agent = nil
				}
			}
		} else {
			f.refused.Add(1)
		}
		if writeFrame(f.st, reply) != nil {
			return
		}
	}
}

// allowed says whether req may reach the controller's ssh-agent.
func (f *Forwarding) allowed(req []byte) bool {
	if len(req) == 0 {
		return false
	}
	switch req[0] {
	case agentRequestIdentities, agentSignRequest:
		return true
	case agentExtension:
		if len(req) < 5 {
			return false
		}
		n := binary.BigEndian.Uint32(req[1:5])
		return uint64(n) <= uint64(len(req)-5) && passedExtensions[string(req[5:5+n])]
	}
	return false
}

func roundTrip(agent net.Conn, req []byte) ([]byte, error) {
	agent.SetDeadline(time.Now().Add(requestTimeout))
	if err := writeFrame(agent, req); err != nil {
		return nil, err
	}
	return readFrame(agent)
}
