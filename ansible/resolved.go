package ansible

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/spindle-rpc/spindle/ansible/wire"
	"github.com/spindle-rpc/spindle/daemon"
	"github.com/spindle-rpc/spindle/hostvars"
)

// maxResolved bounds the resolutions kept: more hosts than a play
// usually reaches at once, few enough that a daemon serving many
// inventories in turn stays small.
const maxResolved = 1024

// resolvedHost is what a host object of a request comes to: the host,
// its resolution and the key of its kept connection. Shared by the
// requests that send the same bytes, and never changed.
type resolvedHost struct {
	host *hostvars.Host
	res  *hostvars.Resolved
	key  daemon.Key
}

// resolvedHosts remembers resolvedHost by the SHA-256 of the host
// object's JSON: a worker sends the same bytes for every task on a
// host, and decoding, resolving and naming the connection again each
// time is most of what a request costs besides its command. The
// resolution depends on those bytes alone (hostvars.Host.Resolve reads
// nothing else), so a remembered one is the one a new resolution would
// give.
type resolvedHosts struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*resolvedHost
}

// get returns raw's resolution, or nil when it is not remembered.
func (c *resolvedHosts) get(raw json.RawMessage) (*resolvedHost, [sha256.Size]byte) {
	sum := sha256.Sum256(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[sum], sum
}

// put remembers rh under sum; when the bound is reached the others are
// forgotten first (a host sent again is resolved again, once).
func (c *resolvedHosts) put(sum [sha256.Size]byte, rh *resolvedHost) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxResolved {
		c.m = make(map[[sha256.Size]byte]*resolvedHost)
	}
	c.m[sum] = rh
}

// resolve returns h's resolution, remembered by raw (the bytes h was
// decoded from) when raw is not empty. Only successes are remembered:
// an error costs a resolution each time, as before.
func (e *Endpoint) resolve(h *hostvars.Host, raw json.RawMessage) (*resolvedHost, error) {
	var sum [sha256.Size]byte
	if len(raw) > 0 {
		var rh *resolvedHost
		if rh, sum = e.resolved.get(raw); rh != nil {
			return rh, nil
		}
	}
	res, err := h.Resolve()
	if err != nil {
		return nil, err
	}
	rh := &resolvedHost{host: h, res: res, key: hostKey(res)}
	if len(raw) > 0 {
		e.resolved.put(sum, rh)
	}
	return rh, nil
}

// decodeHost decodes r's host object, unless one with the same bytes
// was resolved already: then r gets that host and its resolution.
func (e *Endpoint) decodeHost(r *request) error {
	raw := r.HostJSON
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		r.HostJSON = nil
		return nil
	}
	if rh, _ := e.resolved.get(raw); rh != nil {
		r.Host, r.resolved = rh.host, rh
		return nil
	}
	var h hostvars.Host
	if err := json.Unmarshal(raw, &h); err != nil {
		return fmt.Errorf("%w: host: %v", wire.ErrBadRequest, err)
	}
	r.Host = &h
	return nil
}

// resolveHost returns the resolution of r's host (which must be set).
func (e *Endpoint) resolveHost(r *request) (*resolvedHost, error) {
	if r.resolved != nil {
		return r.resolved, nil
	}
	rh, err := e.resolve(r.Host, r.HostJSON)
	if err == nil {
		r.resolved = rh
	}
	return rh, err
}
