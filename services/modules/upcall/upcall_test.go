package upcall

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/rawchild"
	"github.com/spindle-rpc/spindle/internal/testkit/testconn"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/modules/store"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait of these tests.
const wait = 10 * time.Second

// node is one router of a test chain, with its store and upcalls.
type node struct {
	rt   *router.Router
	st   *store.Store
	up   *Service
	link *router.Link // its parent's end of the link to it
}

// pair returns a connected unix socket pair, closed at cleanup.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	a, b, err := testconn.Pair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// chainOf builds the controller (nodes[0]) and n agents, each the child
// of the one before, each serving upcalls from a store of its own.
func chainOf(t *testing.T, n int, log *zap.Logger) []*node {
	t.Helper()
	ctl := &node{rt: router.New(0, router.Options{Logger: log}), st: store.New(1 << 20)}
	ctl.up = Serve(ctl.rt, 0, ctl.st, log)
	t.Cleanup(func() { ctl.up.Close(); ctl.rt.Close() })
	nodes := []*node{ctl}
	for i := 1; i <= n; i++ {
		nd := &node{rt: router.New(uint32(i), router.Options{Logger: log}), st: store.New(1 << 20)}
		nd.up = Serve(nd.rt, uint32(i-1), nd.st, log)
		parent := nodes[i-1]
		if i > 1 {
			if err := ctl.rt.Grant(uint32(i), parent.rt.ID(), fmt.Sprint("n", i)); err != nil {
				t.Fatal(err)
			}
			echo(t, ctl.rt, parent.rt.ID()) // after the grant, on the same path
		}
		up, down := pair(t)
		served := make(chan struct{})
		go func() {
			defer close(served)
			nd.rt.Serve(context.Background(), down, "parent")
		}()
		t.Cleanup(func() { nd.up.Close(); nd.rt.Close(); <-served })
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		l, err := parent.rt.AddChild(ctx, up, uint32(i), fmt.Sprint("n", i))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		nd.link = l
		nodes = append(nodes, nd)
		waitServing(t, parent.rt, nd.rt)
	}
	return nodes
}

// handleEcho is a test handle: a receiver there answers its parent.
const handleEcho = 900

// waitServing returns once child answers a message from parent: its
// router has its parent link (Serve), so that it can ask upward.
func waitServing(t *testing.T, parent, child *router.Router) {
	t.Helper()
	child.Register(handleEcho, router.Receiver{Accept: router.AcceptParent, Deliver: func(m *router.Message) {
		child.Send(&router.Message{Dst: m.Src, Handle: m.ReplyTo, Flags: router.FlagLast})
	}})
	echo(t, parent, child.ID())
}

// echo returns once dst, below from, has answered at handleEcho.
func echo(t *testing.T, from *router.Router, dst uint32) {
	t.Helper()
	got := make(chan *router.Message, 1)
	h := from.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: dst, Deliver: func(m *router.Message) {
		select {
		case got <- m:
		default:
		}
	}})
	defer from.Unregister(h)
	if err := from.Send(&router.Message{Dst: dst, Handle: handleEcho, ReplyTo: h}); err != nil {
		t.Fatal(err)
	}
	if m := recvT(t, got, "the child's echo"); m.Flags&router.FlagDead != 0 {
		t.Fatalf("echo: %s", m.Data)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// An entry only the top agent holds is served to the bottom through the
// middle, which keeps it: a sibling of the bottom is then served by the
// middle alone (the top no longer serves anything).
func TestFetchUpTheChain(t *testing.T) {
	log, logs := observedLog()
	nodes := chainOf(t, 3, log)
	top, mid, bottom := nodes[1], nodes[2], nodes[3]
	data := randomBytes(100 << 10)
	sum, err := top.st.PutShared(data)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	got, err := bottom.up.Fetch(ctx, sum[:])
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fetch: %d bytes, %v", len(got), err)
	}
	for name, nd := range map[string]*node{"middle": mid, "bottom": bottom} {
		if _, err := nd.st.Get(sum[:]); err != nil {
			t.Errorf("the %s does not hold what it fetched: %v", name, err)
		}
	}
	if nodes[0].st.Len() != 0 {
		t.Error("the controller's store changed")
	}
	// A second child of the middle: served from the middle's store.
	top.up.Close()
	sib := &node{rt: router.New(4, router.Options{Logger: log}), st: store.New(1 << 20)}
	sib.up = Serve(sib.rt, mid.rt.ID(), sib.st, log)
	if err := nodes[0].rt.Grant(4, mid.rt.ID(), "n4"); err != nil {
		t.Fatal(err)
	}
	echo(t, nodes[0].rt, mid.rt.ID())
	up, down := pair(t)
	served := make(chan struct{})
	go func() { defer close(served); sib.rt.Serve(context.Background(), down, "parent") }()
	t.Cleanup(func() { sib.up.Close(); sib.rt.Close(); <-served })
	if _, err := mid.rt.AddChild(ctx, up, 4, "n4"); err != nil {
		t.Fatal(err)
	}
	waitServing(t, mid.rt, sib.rt)
	if got, err := sib.up.Fetch(ctx, sum[:]); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the sibling's fetch: %d bytes, %v", len(got), err)
	}
	if n := logs.FilterMessage("refused message").Len(); n != 0 {
		t.Errorf("%d refusals: %v", n, logs.All())
	}
}

func observedLog() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.DebugLevel)
	return zap.New(core), logs
}

// A hash nobody holds fails as the store's own miss does, and the first
// agent (whose parent is the controller) asks nothing of the controller.
func TestFetchNotFound(t *testing.T) {
	log, logs := observedLog()
	nodes := chainOf(t, 3, log)
	sum := sha256.Sum256([]byte("nobody has it"))
	_, err := nodes[3].up.Fetch(testCtx(t), sum[:])
	if !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), store.NotStored) {
		t.Fatalf("fetch of a hash nobody holds: %v, want not found with %q", err, store.NotStored)
	}
	// The top agent answered from its store alone: the controller got no
	// upcall to refuse.
	if n := logs.FilterMessage("refused message").Len(); n != 0 {
		t.Errorf("%d refusals: %v", n, logs.All())
	}
	// And through the package's Fetch, for a store no Service serves.
	if _, err := Fetch(testCtx(t), store.New(1<<10), sum[:]); !errors.Is(err, errkind.ErrNotFound) {
		t.Fatalf("Fetch from a lone store: %v", err)
	}
}

// What the parent stored without marking it shared (a wrapper, which
// holds a task's arguments) is never served to a child, though the
// parent uses it itself; once stored shared, it is.
func TestUnsharedNotServed(t *testing.T) {
	nodes := chainOf(t, 2, nil)
	parent, child := nodes[1], nodes[2]
	data := []byte("a task's arguments")
	sum, err := parent.st.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if got, err := parent.up.Fetch(ctx, sum[:]); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the parent's own fetch: %q, %v", got, err)
	}
	if got, err := child.up.Fetch(ctx, sum[:]); !errors.Is(err, errkind.ErrNotFound) || got != nil {
		t.Fatalf("a child was served an unshared entry: %q, %v", got, err)
	}
	if _, err := child.st.Get(sum[:]); err == nil {
		t.Fatal("the child stored an unshared entry")
	}
	parent.st.PutShared(data)
	if got, err := child.up.Fetch(ctx, sum[:]); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("once shared: %q, %v", got, err)
	}
}

// An entry larger than a frame to the child is answered as not found.
func TestFetchLargerThanAFrame(t *testing.T) {
	nodes := chainOf(t, 2, nil)
	data := randomBytes(64 << 10)
	sum, _ := nodes[1].st.PutShared(data)
	nodes[2].link.SetPeerMaxFrame(32 << 10)
	_, err := nodes[2].up.Fetch(testCtx(t), sum[:])
	if !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), "does not fit in one frame") {
		t.Fatalf("fetch over the frame limit: %v", err)
	}
	nodes[2].link.SetPeerMaxFrame(1 << 20)
	if got, err := nodes[2].up.Fetch(testCtx(t), sum[:]); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fetch within the frame limit: %d bytes, %v", len(got), err)
	}
}

// Two callers wanting the same hash at once share one question upward;
// a caller whose context ends stops waiting.
func TestFetchSharedAndCancelled(t *testing.T) {
	nodes := chainOf(t, 2, nil)
	// The top's receiver is replaced by one that holds the questions.
	asked := make(chan *router.Message, 16)
	nodes[1].rt.Register(router.HandleUpcall, router.Receiver{Accept: router.AcceptChild, Deliver: func(m *router.Message) { asked <- m }})
	data := []byte("shared")
	sum := sha256.Sum256(data)
	ctx := testCtx(t)
	type result struct {
		data []byte
		err  error
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			d, err := nodes[2].up.Fetch(ctx, sum[:])
			results <- result{d, err}
		}()
	}
	m := recvT(t, asked, "the question")
	cctx, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() {
		_, err := nodes[2].up.Fetch(cctx, sum[:])
		cancelled <- err
	}()
	cancel()
	if err := recvT(t, cancelled, "the cancelled caller"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
	if err := nodes[1].rt.Answer(ctx, &router.Message{Dst: 2, Handle: m.ReplyTo, Flags: router.FlagLast, Data: data}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r := recvT(t, results, "a caller"); r.err != nil || string(r.data) != "shared" {
			t.Fatalf("caller: %q, %v", r.data, r.err)
		}
	}
	select {
	case m := <-asked:
		t.Fatalf("a second question: %v", m)
	default:
	}
	// Bytes that are not the hash's are refused, not stored.
	other := sha256.Sum256([]byte("other"))
	go func() {
		_, err := nodes[2].up.Fetch(ctx, other[:])
		cancelled <- err
	}()
	m = recvT(t, asked, "the second question")
	nodes[1].rt.Answer(ctx, &router.Message{Dst: 2, Handle: m.ReplyTo, Flags: router.FlagLast, Data: []byte("forged")})
	if err := recvT(t, cancelled, "the forged answer"); !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), "hash to") {
		t.Fatalf("forged answer: %v", err)
	}
	if _, err := nodes[2].st.Get(other[:]); err == nil {
		t.Fatal("forged bytes stored")
	}
}

func recvT[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// A parent serves at most MaxUpcallsServed upcalls at a time: past it, a
// request is answered at once as not found, never queued.
func TestUpcallsServedBounded(t *testing.T) {
	nodes := chainOf(t, 3, nil)
	// The top holds every question the middle asks: the middle's slots
	// stay taken.
	asked := make(chan *router.Message, 2*MaxUpcallsServed)
	nodes[1].rt.Register(router.HandleUpcall, router.Receiver{Accept: router.AcceptChild, Deliver: func(m *router.Message) { asked <- m }})
	ctx, cancel := context.WithCancel(testCtx(t))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range MaxUpcallsServed {
		sum := sha256.Sum256([]byte{byte(i)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[3].up.Fetch(ctx, sum[:])
		}()
	}
	for range MaxUpcallsServed {
		recvT(t, asked, "the middle's questions")
	}
	sum := sha256.Sum256([]byte("one more"))
	_, err := nodes[3].up.Fetch(ctx, sum[:])
	if !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), "upcalls already") {
		t.Fatalf("an upcall past the bound: %v", err)
	}
	select {
	case m := <-asked:
		t.Fatalf("the middle asked past its bound: %v", m)
	default:
	}
}

func request(t *testing.T, op string, sum []byte) []byte {
	b, err := wire.Marshal(&fetchRequest{Op: op, SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A hostile child's malformed upcalls are refused and logged, answered
// with nothing; its well-formed one is answered. Each attack is followed
// by a well-formed upcall, whose answer, on the ordered bus, comes after
// whatever the attack would have made the parent send.
func TestHostileUpcalls(t *testing.T) {
	log, logs := observedLog()
	nodes := chainOf(t, 1, log)
	parent := nodes[1]
	ev := rawchild.Attach(t, parent.rt, 9, "evil")
	data := []byte("served")
	sum, _ := parent.st.PutShared(data)
	legit := func(what string) {
		t.Helper()
		ev.Send(&router.Message{Dst: 1, Src: 9, Handle: router.HandleUpcall, ReplyTo: 4000, Data: request(t, UpcallFetch, sum[:])})
		m := ev.Next()
		if m.Handle != 4000 || m.Flags != router.FlagLast || string(m.Data) != "served" {
			t.Fatalf("%s: evil read %v %q, want the answer to its well-formed upcall", what, m, m.Data)
		}
	}
	legit("first")
	big := append(request(t, UpcallFetch, sum[:]), make([]byte, MaxUpcallRequest)...)
	for _, a := range []struct {
		name string
		m    *router.Message
		why  string
	}{
		{"another op", &router.Message{Dst: 1, Src: 9, Handle: router.HandleUpcall, ReplyTo: 4000, Data: request(t, "modules.Put", sum[:])}, "agents serve"},
		{"an rpc request", &router.Message{Dst: 1, Src: 9, Handle: router.HandleUpcall, ReplyTo: 4000, Data: rpcRequest(t)}, "agents serve"},
		{"a short hash", &router.Message{Dst: 1, Src: 9, Handle: router.HandleUpcall, ReplyTo: 4000, Data: request(t, UpcallFetch, sum[:31])}, "a sha256 has 32"},
		{"a long hash", &router.Message{Dst: 1, Src: 9, Handle: router.HandleUpcall, ReplyTo: 4000, Data: request(t, UpcallFetch, make([]byte, 64))}, "a sha256 has 32"},
		{"too large", &router.Message{Dst: 1, Src: 9, Handle: router.HandleUpcall, ReplyTo: 4000, Data: big}, "at most 128"},
		{"garbage", &router.Message{Dst: 1, Src: 9, Handle: router.HandleUpcall, ReplyTo: 4000, Data: []byte{0xdd, 0xff, 0xff, 0xff, 0xff}}, "undecodable"},
		{"no reply_to", &router.Message{Dst: 1, Src: 9, Handle: router.HandleUpcall, Data: request(t, UpcallFetch, sum[:])}, "no reply_to"},
		{"a service call", &router.Message{Dst: 1, Src: 9, Handle: router.HandleCall, ReplyTo: 4000, Data: rpcRequest(t)}, "ancestors only"},
		{"an upcall to the controller", &router.Message{Dst: 0, Src: 9, Handle: router.HandleUpcall, ReplyTo: 4000, Data: request(t, UpcallFetch, sum[:])}, "to the parent only"},
	} {
		before := refusals(logs, a.why)
		ev.Send(a.m)
		legit(a.name)
		if refusals(logs, a.why) <= before {
			t.Fatalf("%s: no refusal saying %q: %v", a.name, a.why, logs.All())
		}
	}
}

func rpcRequest(t *testing.T) []byte {
	b, err := wire.Marshal(&rpc.Request{Method: "exec.Run"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func refusals(logs *observer.ObservedLogs, why string) int {
	n := 0
	for _, e := range logs.FilterMessage("refused message").All() {
		if w, _ := e.ContextMap()["why"].(string); strings.Contains(w, why) {
			n++
		}
	}
	return n
}
