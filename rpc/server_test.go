package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/testconn"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/rpc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// served is a controller router (id 0) and an agent router (id 1) below
// it, linked over a socketpair, with an rpc.Server on the agent.
type served struct {
	ctl *router.Router
}

func serve(t *testing.T, register func(*rpc.Registry)) *served {
	t.Helper()
	ctl := router.New(0, router.Options{})
	agent := router.New(1, router.Options{})
	reg := rpc.NewRegistry()
	register(reg)
	srv := rpc.NewServer(agent, reg, nil)
	a, b, err := testconn.Pair()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		agent.Serve(context.Background(), b, "controller")
	}()
	t.Cleanup(func() {
		srv.Close()
		agent.Close()
		ctl.Close()
		<-done
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ctl.AddChild(ctx, a, 1, "agent"); err != nil {
		t.Fatal(err)
	}
	return &served{ctl: ctl}
}

// call sends data as a call to the agent and returns the reply.
func (s *served) call(t *testing.T, data []byte) *router.Message {
	t.Helper()
	ch := make(chan *router.Message, 1)
	h := s.ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 1, Deliver: func(m *router.Message) {
		select {
		case ch <- m:
		default:
		}
	}})
	defer s.ctl.Unregister(h)
	if err := s.ctl.Send(&router.Message{Dst: 1, Handle: router.HandleCall, ReplyTo: h, Data: data}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no reply")
		return nil
	}
}

func request(t *testing.T, method string, args any) []byte {
	t.Helper()
	raw, err := wire.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	data, err := wire.Marshal(&rpc.Request{Method: method, Args: raw})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// remoteError decodes m as an error reply, failing t if it is none.
func remoteError(t *testing.T, m *router.Message) *rpc.RemoteError {
	t.Helper()
	if m.Flags&router.FlagError == 0 {
		t.Fatalf("reply %q is not an error", m.Data)
	}
	var re rpc.RemoteError
	if err := wire.Unmarshal(m.Data, &re); err != nil {
		t.Fatal(err)
	}
	return &re
}

func registerTest(reg *rpc.Registry) {
	reg.Handle("t.echo", func(_ context.Context, call *rpc.Call) (any, error) {
		var s string
		err := call.Args(&s)
		return s, err
	})
	reg.Handle("t.panic", func(context.Context, *rpc.Call) (any, error) {
		var m map[string]int
		m["boom"]++ // a nil map: the handler panics
		return nil, nil
	})
	reg.Handle("t.big", func(context.Context, *rpc.Call) (any, error) {
		return bytes.Repeat([]byte("x"), router.DefaultMaxFrameSize), nil
	})
}

// A handler that panics costs its call, not the agent: the caller gets an
// error naming the method, and the next call is served.
func TestHandlerPanicIsAnErrorAndTheAgentLivesOn(t *testing.T) {
	s := serve(t, registerTest)
	re := remoteError(t, s.call(t, request(t, "t.panic", nil)))
	if !strings.Contains(re.Message, "t.panic: internal error") {
		t.Fatalf("panic reported as %+v", re)
	}
	m := s.call(t, request(t, "t.echo", "still here"))
	var got string
	if m.Flags&router.FlagError != 0 || wire.Unmarshal(m.Data, &got) != nil || got != "still here" {
		t.Fatalf("after the panic: %q (flags %x)", m.Data, m.Flags)
	}
}

// A result too large for one message is refused with its kind and a hint,
// instead of a frame the link would reject.
func TestResultTooLargeForAMessage(t *testing.T) {
	s := serve(t, registerTest)
	re := remoteError(t, s.call(t, request(t, "t.big", nil)))
	if !errors.Is(re, errkind.ErrTooLarge) || !strings.Contains(re.Message, "circuit") {
		t.Fatalf("oversized result reported as %+v", re)
	}
}

// Calls the agent cannot decode or route get an error of the right kind.
func TestUnknownAndMalformedCalls(t *testing.T) {
	s := serve(t, registerTest)
	re := remoteError(t, s.call(t, request(t, "no.such", nil)))
	if !errors.Is(re, errkind.ErrUnknownMethod) || !strings.Contains(re.Message, `"no.such"`) {
		t.Fatalf("unknown method reported as %+v", re)
	}
	re = remoteError(t, s.call(t, []byte{0xc1, 0xff, 0x00}))
	if !errors.Is(re, errkind.ErrBadArgs) {
		t.Fatalf("malformed call reported as %+v", re)
	}
	re = remoteError(t, s.call(t, request(t, "t.echo", 42)))
	if !errors.Is(re, errkind.ErrBadArgs) {
		t.Fatalf("wrong-typed args reported as %+v", re)
	}
}
