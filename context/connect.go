package context

import (
	stdctx "context"
	"errors"
	"fmt"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/services/connect"
)

// DefaultMaxChildren is how many children one context keeps by default.
const DefaultMaxChildren = 20

// Connect starts a child context through this context's agent: the agent
// runs the connector itself (sudo, su, doas, a container, …) and starts
// the child from its own binary, and the controller talks to the child by
// id through the parent. conn must be a connectors.Remote, or a
// connectors.Delegated (an SSH hop) whose keys and known_hosts stay here:
// the controller serves them to the parent agent on a circuit while the
// hop starts.
//
// One child is kept per connector and options: connecting the same hop
// again returns the running child. A context keeps at most
// Options.MaxChildren children (default 20); at the limit the youngest
// idle child is closed to make room, as Mitogen does.
func (c *Context) Connect(ctx stdctx.Context, conn connectors.Connector) (*Context, error) {
	var helper connectors.Helper
	rc, ok := conn.(connectors.Remote)
	if !ok {
		d, ok := conn.(connectors.Delegated)
		if !ok {
			return nil, &errkind.Error{Chain: c.name, Err: fmt.Errorf("%s cannot be started by an agent", conn.Name())}
		}
		var err error
		if rc, helper, err = d.Delegate(ctx, c.ctl.log); err != nil {
			return nil, errkind.In(c.name+" → "+conn.Name(), "", err)
		}
		defer helper.Close()
	}
	var agents []bootstrap.Manifest
	if helper == nil && connectors.IsForeign(rc) {
		// The target may need an agent the parent lacks: lend it ours.
		src := c.ctl.opts.Agents
		if agents = bootstrap.Manifests(src); len(agents) > 0 {
			helper = &connectors.AgentLender{Agents: src, Hop: c.name + " → " + rc.Name(), Log: c.ctl.log}
		}
	}
	opts, err := wire.Marshal(rc)
	if err != nil {
		return nil, &errkind.Error{Chain: c.name, Err: fmt.Errorf("encode %s options: %w", rc.Kind(), err)}
	}
	key := rc.Kind() + "\x00" + string(opts)
	for {
		c.mu.Lock()
		if child := c.children[key]; child != nil && child.Err() == nil {
			c.mu.Unlock()
			return child, nil
		}
		wait, busy := c.starting[key]
		if !busy {
			if c.starting == nil {
				c.starting = map[string]chan struct{}{}
			}
			wait = make(chan struct{})
			c.starting[key] = wait
			c.mu.Unlock()
			break
		}
		c.mu.Unlock()
		select { // someone else is starting the same hop: share it
		case <-wait:
		case <-ctx.Done():
			return nil, &errkind.Error{Chain: c.name, Err: ctx.Err()}
		}
	}
	child, err := c.startChild(ctx, rc, opts, helper, agents)
	c.mu.Lock()
	if err == nil {
		if c.children == nil {
			c.children = map[string]*Context{}
		}
		c.children[key] = child
		child.childKey = key
	}
	close(c.starting[key])
	delete(c.starting, key)
	c.mu.Unlock()
	return child, err
}

func (c *Context) startChild(ctx stdctx.Context, rc connectors.Remote, opts []byte, helper connectors.Helper, agents []bootstrap.Manifest) (*Context, error) {
	if err := c.makeRoom(); err != nil {
		return nil, err
	}
	ctl := c.ctl
	id := ctl.nextID.Add(1)
	name := c.name + " → " + rc.Name()
	if err := ctl.rt.Grant(id, c.id, name); err != nil {
		return nil, errkind.In(name, "", c.sendError(err))
	}
	var hello bootstrap.Hello
	args := &connect.StartArgs{ID: id, Name: name, Kind: rc.Kind(), Options: opts, Agents: agents,
		StallTimeout:      int64(ctl.opts.Router.StallTimeout),
		KeepaliveInterval: int64(ctl.opts.Router.KeepaliveInterval), KeepaliveCountMax: ctl.opts.Router.KeepaliveCountMax}
	var err error
	if helper == nil {
		err = c.Call(ctx, connect.MethodStart, args, &hello)
	} else {
		err = c.startDelegated(ctx, args, helper, &hello)
	}
	if err != nil {
		ctl.rt.Revoke(id)
		return nil, renamed(name, err)
	}
	child := &Context{ctl: ctl, id: id, name: name, hello: &hello, parent: c, created: time.Now(), done: make(chan struct{})}
	ctl.mu.Lock()
	ctl.contexts[id] = child
	ctl.mu.Unlock()
	return child, nil
}

// renamed names the new hop name as where a failed connect.Start failed,
// rather than the call on its parent.
func renamed(name string, err error) error {
	var e *errkind.Error
	if !errors.As(err, &e) {
		return &errkind.Error{Chain: name, Err: err}
	}
	c := *e
	c.Chain, c.Op = name, ""
	return &c
}

// startDelegated runs connect.Start with a circuit on which helper answers
// the hop (signatures, host key checks) until the agent's handler returns
// and the circuit ends.
func (c *Context) startDelegated(ctx stdctx.Context, args *connect.StartArgs, helper connectors.Helper, hello *bootstrap.Hello) error {
	st, err := c.Stream(ctx, connect.MethodStart, args)
	if err != nil {
		return err
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		helper.Serve(st)
	}()
	err = st.Wait(hello)
	st.Close()
	<-served
	return err
}

// makeRoom closes the youngest idle child when c is at its child limit.
func (c *Context) makeRoom() error {
	limit := c.ctl.opts.MaxChildren
	if limit <= 0 {
		limit = DefaultMaxChildren
	}
	c.mu.Lock()
	var youngest *Context
	live := 0
	for _, ch := range c.children {
		if ch.Err() != nil {
			continue
		}
		live++
		if ch.inflight.Load() == 0 && (youngest == nil || ch.created.After(youngest.created)) {
			youngest = ch
		}
	}
	c.mu.Unlock()
	if live < limit {
		return nil
	}
	if youngest == nil {
		return &errkind.Error{Chain: c.name, Err: fmt.Errorf("%w: all %d are busy (Options.MaxChildren)", errkind.ErrTooManyChildren, live)}
	}
	c.ctl.log.Debug("child limit reached: closing the youngest idle child")
	return youngest.Close()
}
