package router

import (
	"context"
	"errors"

	"github.com/hashicorp/yamux"
)

// The two methods below let a test build of the agent misbehave the way a
// compromised target could: they bypass this router's own bookkeeping and
// put a message, or a circuit, on the parent link as given. They grant
// nothing: the policy is enforced by the router that receives, never by
// the sender, which is exactly what the hostile-agent tests prove.

var errNoParent = errors.New("no parent link")

// UnsafeSendUpward writes m on the parent link with m.Src left as it is
// (forgeable). For hostile-agent tests only.
func (r *Router) UnsafeSendUpward(m *Message) error {
	r.mu.RLock()
	p := r.parent
	r.mu.RUnlock()
	if p == nil {
		return errNoParent
	}
	return p.send(context.Background(), m, nil)
}

// UnsafeOpenUpward opens a circuit toward the parent, which only a parent
// may do. For hostile-agent tests only.
func (r *Router) UnsafeOpenUpward(m *Message) (Circuit, error) {
	r.mu.RLock()
	p := r.parent
	r.mu.RUnlock()
	if p == nil {
		return nil, errNoParent
	}
	st, err := p.sess.OpenStream()
	if err != nil {
		return nil, err
	}
	p.streams.add(st)
	// The parent resets the stream as soon as it sees it open, which may
	// be before the header goes out: the open was on the wire all the
	// same, and the stream reads the reset.
	if _, err := st.Write(AppendFrame(nil, m)); err != nil && !errors.Is(err, yamux.ErrConnectionReset) {
		st.Close()
		return nil, err
	}
	return st, nil
}
