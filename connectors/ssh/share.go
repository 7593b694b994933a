package ssh

import (
	"context"
	"errors"
	"slices"
	"sync"

	gossh "golang.org/x/crypto/ssh"
)

// Hops started by one agent to the same user@host:port share SSH
// connections, as OpenSSH's ControlMaster does with a ControlPath of
// %r@%h:%p: each hop is a session (and an agent) of its own on a
// connection that is dialled, key-exchanged and authenticated once. On two
// vCPUs, twenty hops through one intermediary took 5.1–5.6x the time of
// one, most of it sshd accepting twenty connections; with sharing,
// 2.2–2.4x (BENCHMARKS.md, "SSH connections"). A connection takes at most
// ten hops (sshd's default MaxSessions), and a server that refuses a
// session sooner has that connection marked full:
// the hop uses, or dials, another. When a shared connection dies, every
// hop on it is disconnected, as each would have been with a connection
// of its own to that host.

// sharePool hands out shared connections of type C by key. Users that
// start together wait for one dial instead of each dialling their own
// (maxUsers of them per connection).
type sharePool[K comparable, C any] struct {
	mu    sync.Mutex
	conns map[K][]*shared[C]
	// close closes a connection once its last user released it; wait
	// returns once a connection has died (or was closed).
	close func(C)
	wait  func(C)
	// maxUsers, if positive, caps the users of one connection: beyond it
	// the next user dials another at once instead of being refused later.
	maxUsers int
	// deadHook, if set, runs after a connection was found dead (tests).
	deadHook func()
}

// shared is one pooled connection and its users.
type shared[C any] struct {
	conn  C
	ready chan struct{} // closed when the dial ended
	err   error         // the dial's error
	refs  int           // users, including one still dialling or waiting
	full  bool          // the server refused a session on it
	dead  bool          // closed under its users, or never dialled
}

func newSharePool[K comparable, C any](closeFn, wait func(C)) *sharePool[K, C] {
	return &sharePool[K, C]{conns: map[K][]*shared[C]{}, close: closeFn, wait: wait}
}

// acquire returns a usable connection for key, dialling one with dial if
// none is. Its caller must release it. A dial error is returned to the
// caller that dialled; the callers that waited for it dial again
// themselves, so that each gets its own verdict (a cancelled context, a
// prompt) rather than another's.
func (p *sharePool[K, C]) acquire(ctx context.Context, key K, dial func() (C, error)) (*shared[C], error) {
	for {
		p.mu.Lock()
		var s *shared[C]
		for _, c := range p.conns[key] {
			if !c.full && !c.dead && (p.maxUsers <= 0 || c.refs < p.maxUsers) {
				s = c
				break
			}
		}
		if s == nil {
			s = &shared[C]{ready: make(chan struct{}), refs: 1}
			p.conns[key] = append(p.conns[key], s)
			p.mu.Unlock()
			conn, err := dial()
			p.mu.Lock()
			s.conn, s.err = conn, err
			if err != nil {
				s.dead = true
				s.refs--
				p.removeLocked(key, s)
			}
			close(s.ready)
			p.mu.Unlock()
			if err != nil {
				return nil, err
			}
			go func() {
				// Ends at the latest when the last user's release closes it.
				p.wait(conn)
				p.markDead(key, s)
				if p.deadHook != nil {
					p.deadHook()
				}
			}()
			return s, nil
		}
		s.refs++
		p.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			p.release(key, s, false)
			return nil, ctx.Err()
		}
		if s.err != nil {
			p.release(key, s, false)
			continue
		}
		return s, nil
	}
}

// release drops one user of s, closing it after the last. hadSession
// says the user had a session on it: then there is room for one again.
func (p *sharePool[K, C]) release(key K, s *shared[C], hadSession bool) {
	p.mu.Lock()
	s.refs--
	if hadSession {
		s.full = false
	}
	last := s.refs == 0
	if last {
		p.removeLocked(key, s)
	}
	p.mu.Unlock()
	if last && s.err == nil {
		p.close(s.conn)
	}
}

// markFull keeps s for its current users only, until one of them leaves:
// the server refused one more session on it.
func (p *sharePool[K, C]) markFull(s *shared[C]) {
	p.mu.Lock()
	s.full = true
	p.mu.Unlock()
}

// markDead takes s out of the pool once it died under its users; they
// still release it.
func (p *sharePool[K, C]) markDead(key K, s *shared[C]) {
	p.mu.Lock()
	s.dead = true
	p.removeLocked(key, s)
	p.mu.Unlock()
}

func (p *sharePool[K, C]) removeLocked(key K, s *shared[C]) {
	list := slices.DeleteFunc(p.conns[key], func(c *shared[C]) bool { return c == s })
	if len(list) == 0 {
		delete(p.conns, key)
	} else {
		p.conns[key] = list
	}
}

// users is how many hops hold s, including those still starting on it.
func (p *sharePool[K, C]) users(s *shared[C]) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return s.refs
}

// size is how many connections the pool holds for key (tests).
func (p *sharePool[K, C]) size(key K) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns[key])
}

// sessionRefused reports whether err is a server's refusal to open a
// session channel. OpenSSH's sshd answers one beyond MaxSessions with
// "connect failed: open failed"; other servers say "administratively
// prohibited". On a connection that carries other sessions, another
// connection may then succeed.
func sessionRefused(err error) bool {
	var oce *gossh.OpenChannelError
	return errors.As(err, &oce) && (oce.Reason == gossh.Prohibited || oce.Reason == gossh.ConnectionFailed)
}
