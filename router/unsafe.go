package router

import "errors"

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
	return p.send(m)
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
	return p.openStream(m)
}
