// Package upcall lets an agent's module store (package store) be
// completed from its parent's.
//
// An agent whose store lacks a hash that a call names asks its parent,
// when its parent is an agent, with the one upcall there is (the
// "modules.fetch" request at router.HandleUpcall): the parent answers
// from its own store or, lacking the entry too, asks its own parent the
// same way, keeps what it got and answers. A payload that the controller
// stored in the first agent of a chain thus crosses each link below once
// per connection, however many contexts down the chain run it. The
// controller is never asked: nothing on a target may make it do work.
// PROTOCOL.md section 6.5 has the policy, section 11 the messages.
package upcall

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/printable"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/modules/store"
	"go.uber.org/zap"
)

const (
	// UpcallFetch is the op of the one upcall an agent serves: the bytes
	// its store holds under one sha256.
	UpcallFetch = "modules.fetch"
	// FetchTimeout bounds how long an agent waits for its parent's
	// answer, and how long a parent spends on one child's request
	// (asking upward, then waiting for room to answer).
	FetchTimeout = 30 * time.Second
	// MaxUpcallsServed bounds the upcalls one agent serves at a time,
	// over all its children: a request past it is answered at once as
	// not found (the caller then has the controller send the bytes), and
	// never queued.
	MaxUpcallsServed = 8
	// MaxUpcallRequest bounds an upcall's payload: an op and a hash take
	// 56 bytes. A larger one is refused.
	MaxUpcallRequest = 128
)

// fetchRequest is an upcall's payload (msgpack map). The answer is a
// reply (FlagLast) whose data is the bytes themselves, or an error reply
// (FlagLast|FlagError) holding an rpc.RemoteError of kind "not_found".
type fetchRequest struct {
	Op     string `msgpack:"op"`
	SHA256 []byte `msgpack:"h"`
}

// Service serves modules.fetch to an agent's children from its store,
// and asks the agent's parent for what the store lacks.
type Service struct {
	rt     *router.Router
	parent uint32 // ControllerID: no agent above, nothing is asked
	store  *store.Store
	log    *zap.Logger
	served bool // the receiver is registered

	slots chan struct{} // one per upcall being served

	ctx    context.Context // ends with Close
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	flights map[[sha256.Size]byte]*flight // hashes being asked of the parent
	wg      sync.WaitGroup
}

// flight is one question to the parent, which every caller wanting the
// same hash waits on: the bytes cross the link once.
type flight struct {
	done chan struct{}
	data []byte
	err  error
}

// active is the agent's Service, whose store Fetch completes.
var active atomic.Pointer[Service]

// Serve registers the modules.fetch receiver on rt, an agent's
// router, serving store (the agent's: store.Default), and makes Fetch ask
// parent (bootstrap.AgentArgs.Parent) for what store lacks, unless
// parent is the controller. On the controller's router nothing is
// registered, so that an upcall there is refused. Close undoes it.
func Serve(rt *router.Router, parent uint32, st *store.Store, log *zap.Logger) *Service {
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	u := &Service{rt: rt, parent: parent, store: st, log: log,
		slots: make(chan struct{}, MaxUpcallsServed), ctx: ctx, cancel: cancel,
		flights: map[[sha256.Size]byte]*flight{}}
	if rt.ID() != router.ControllerID {
		u.served = true
		rt.Register(router.HandleUpcall, router.Receiver{Accept: router.AcceptChild, Admit: admitUpcall, Deliver: u.serve})
	}
	active.Store(u)
	return u
}

// Close unregisters the receiver, ends the questions and answers in
// flight and waits for them.
func (u *Service) Close() {
	active.CompareAndSwap(u, nil)
	if u.served {
		u.rt.Unregister(router.HandleUpcall)
	}
	u.mu.Lock()
	u.closed = true
	u.mu.Unlock()
	u.cancel()
	u.wg.Wait()
}

// Fetch returns the bytes st holds under sum, as st.Get does; when st
// lacks them and is the store of an agent whose parent is
// an agent (Serve), it asks the parent first, and keeps what it
// gets. A hash nobody up the chain holds fails as store.Get does: with
// errkind.ErrNotFound and store.NotStored in the text, so that the caller
// sends the bytes again.
func Fetch(ctx context.Context, st *store.Store, sum []byte) ([]byte, error) {
	data, err := st.Get(sum)
	if err == nil || !errors.Is(err, errkind.ErrNotFound) {
		return data, err
	}
	if u := active.Load(); u != nil && u.store == st {
		return u.Fetch(ctx, sum)
	}
	return nil, err
}

// Fetch is the package's Fetch for u's store.
func (u *Service) Fetch(ctx context.Context, sum []byte) ([]byte, error) {
	return u.fetch(ctx, sum, u.store.Get)
}

// fetch is Fetch with get the store's lookup: Get for the agent's own
// calls, GetShared for a child's upcall, which is never served what the
// controller did not mark as shared (store.PutShared).
func (u *Service) fetch(ctx context.Context, sum []byte, get func([]byte) ([]byte, error)) ([]byte, error) {
	data, err := get(sum)
	if err == nil || !errors.Is(err, errkind.ErrNotFound) || u.parent == router.ControllerID {
		return data, err
	}
	var k [sha256.Size]byte
	copy(k[:], sum) // Get checked its length
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil, err
	}
	f := u.flights[k]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		u.flights[k] = f
		u.wg.Add(1)
		go u.ask(k, f)
	}
	u.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("modules: waiting for the parent agent to serve sha256 %x: %w", sum, ctx.Err())
	}
	if f.err != nil {
		return nil, errkind.Errorf(errkind.ErrNotFound, "modules: sha256 %x is %s, nor could the parent agent serve it (%v): send it again", sum, store.NotStored, f.err)
	}
	return f.data, nil
}

// ask puts one question to the parent, for f's waiters, and keeps the
// answer in the store.
func (u *Service) ask(k [sha256.Size]byte, f *flight) {
	defer u.wg.Done()
	ctx, cancel := context.WithTimeout(u.ctx, FetchTimeout)
	defer cancel()
	f.data, f.err = u.askParent(ctx, k)
	if f.err == nil {
		// Shared, since the parent served it. Too large for the store:
		// used this once, asked again next time.
		u.store.PutShared(f.data) //nolint:errcheck
	} else {
		u.log.Debug("module not served by the parent", zap.String("sha256", fmt.Sprintf("%x", k)), zap.Error(f.err))
	}
	u.mu.Lock()
	delete(u.flights, k)
	u.mu.Unlock()
	close(f.done)
}

func (u *Service) askParent(ctx context.Context, k [sha256.Size]byte) ([]byte, error) {
	answer := make(chan *router.Message, 1)
	h := u.rt.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: u.parent, Deliver: func(m *router.Message) {
		select {
		case answer <- m:
		default: // one answer per question; anything more is dropped
		}
	}})
	defer u.rt.Unregister(h)
	req, err := wire.Marshal(&fetchRequest{Op: UpcallFetch, SHA256: k[:]})
	if err != nil {
		return nil, err
	}
	if err := u.rt.SendContext(ctx, &router.Message{Dst: u.parent, Handle: router.HandleUpcall, ReplyTo: h, Data: req}); err != nil {
		return nil, err
	}
	var m *router.Message
	select {
	case m = <-answer:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	switch {
	case m.Flags&router.FlagDead != 0:
		return nil, errors.New("disconnected: " + printable.String(string(m.Data)))
	case m.Flags&router.FlagError != 0:
		var re rpc.RemoteError
		if err := wire.Unmarshal(m.Data, &re); err != nil {
			return nil, fmt.Errorf("undecodable answer: %w", err)
		}
		re.Message = printable.String(re.Message)
		return nil, &re
	}
	if got := sha256.Sum256(m.Data); !bytes.Equal(got[:], k[:]) {
		return nil, fmt.Errorf("the parent answered bytes that hash to %x", got)
	}
	return m.Data, nil
}

// admitUpcall refuses, before anything is done with it, an upcall that
// is not a well-formed modules.fetch: the router drops and logs it.
func admitUpcall(m *router.Message) error {
	if len(m.Data) > MaxUpcallRequest {
		return fmt.Errorf("an upcall of %d bytes (at most %d)", len(m.Data), MaxUpcallRequest)
	}
	if m.ReplyTo == 0 {
		return errors.New("an upcall with no reply_to")
	}
	var req fetchRequest
	if err := wire.Unmarshal(m.Data, &req); err != nil {
		return fmt.Errorf("an undecodable upcall: %v", err)
	}
	if req.Op != UpcallFetch {
		return fmt.Errorf("an upcall of op %q: agents serve %q only", printable.String(req.Op), UpcallFetch)
	}
	if len(req.SHA256) != sha256.Size {
		return fmt.Errorf("a %s of a %d-byte hash (a sha256 has %d)", UpcallFetch, len(req.SHA256), sha256.Size)
	}
	return nil
}

// done is a context already done: an answer sent with it is dropped,
// not waited for, when the link's queue is full (router.Answer).
var done = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// serve runs on the reading goroutine of the link from the child m
// came from, once admitUpcall has passed it: it must not block.
func (u *Service) serve(m *router.Message) {
	var req fetchRequest
	wire.Unmarshal(m.Data, &req) //nolint:errcheck // admitUpcall decoded it
	select {
	case u.slots <- struct{}{}:
	default:
		u.answerError(done, m, fmt.Sprintf("modules: %s is serving %d upcalls already (the limit): sha256 %x not served",
			u.rt.Name(u.rt.ID()), MaxUpcallsServed, req.SHA256))
		return
	}
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		<-u.slots
		return
	}
	u.wg.Add(1)
	u.mu.Unlock()
	go func() {
		defer u.wg.Done()
		defer func() { <-u.slots }()
		ctx, cancel := context.WithTimeout(u.ctx, FetchTimeout)
		defer cancel()
		data, err := u.fetch(ctx, req.SHA256, u.store.GetShared)
		if err != nil {
			u.answerError(ctx, m, err.Error())
			return
		}
		err = u.rt.Answer(ctx, &router.Message{Dst: m.Src, Handle: m.ReplyTo, Flags: router.FlagLast, Data: data})
		if errors.Is(err, router.ErrFrameTooLarge) {
			// Only what fits in one frame is served; the caller has the
			// controller send the bytes with the call instead.
			u.answerError(ctx, m, fmt.Sprintf("modules: sha256 %x (%d bytes) does not fit in one frame to %s: %v",
				req.SHA256, len(data), u.rt.Name(m.Src), err))
			return
		}
		if err != nil {
			u.log.Debug("upcall not answered", zap.Uint32("child", m.Src), zap.Error(err))
		}
	}()
}

// answerError answers m as not found, saying why.
func (u *Service) answerError(ctx context.Context, m *router.Message, why string) {
	data, err := wire.Marshal(&rpc.RemoteError{Kind: "not_found", Message: why})
	if err == nil {
		err = u.rt.Answer(ctx, &router.Message{Dst: m.Src, Handle: m.ReplyTo, Flags: router.FlagLast | router.FlagError, Data: data})
	}
	if err != nil {
		u.log.Debug("upcall not answered", zap.Uint32("child", m.Src), zap.Error(err))
	}
}
