package router_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spindle-rpc/spindle/router"
)

func TestChainRouting(t *testing.T) {
	ctl, _, r2, _, _, _, _ := chain(t, router.Options{})

	calls := make(chan *router.Message, 1)
	r2.Register(router.HandleCall, router.Receiver{Accept: router.AcceptParent, Deliver: func(m *router.Message) {
		into(calls)(m)
		r2.Send(&router.Message{Dst: m.Src, Handle: m.ReplyTo, Flags: router.FlagLast, Data: []byte("pong")})
	}})
	replies := make(chan *router.Message, 1)
	h := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 2, Deliver: into(replies)})
	if err := ctl.Send(&router.Message{Dst: 2, Handle: router.HandleCall, ReplyTo: h, Data: []byte("call")}); err != nil {
		t.Fatal(err)
	}
	m := recv(t, calls, "call on 2")
	if m.Src != 0 || m.Dst != 2 || m.ReplyTo != h || string(m.Data) != "call" {
		t.Fatalf("call arrived as %v %q", m, m.Data)
	}
	m = recv(t, replies, "reply on 0")
	if m.Src != 2 || m.Handle != h || m.Flags != router.FlagLast || string(m.Data) != "pong" {
		t.Fatalf("reply arrived as %v %q", m, m.Data)
	}
}

func TestChainCircuit(t *testing.T) {
	ctl, _, r2, _, _, _, _ := chain(t, router.Options{})
	const h = 77
	got := make(chan *router.Message, 1)
	r2.Register(h, router.Receiver{Accept: router.AcceptParent, Deliver: into(got)})

	c, err := ctl.OpenCircuit(&router.Message{Dst: 2, Handle: h, Data: []byte("hdr")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := recv(t, got, "circuit header on 2")
	if m.Circuit == nil || m.Src != 0 || string(m.Data) != "hdr" {
		t.Fatalf("circuit header arrived as %v (circuit %v)", m, m.Circuit)
	}
	far := m.Circuit
	defer far.Close()

	// 8 MiB down, then half-close; the far end reads EOF, then answers
	// with a digest and its own half-close.
	payload := make([]byte, 8<<20)
	rand.New(rand.NewSource(1)).Read(payload)
	want := sha256.Sum256(payload)
	farDone := make(chan error, 1)
	go func() {
		hash := sha256.New()
		n, err := io.Copy(hash, far)
		if err == nil && n != int64(len(payload)) {
			err = errors.New("short read at the far end")
		}
		if err == nil {
			_, err = far.Write(hash.Sum(nil))
		}
		far.Close()
		farDone <- err
	}()
	writeDone := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.Close() // half-close
		}
		writeDone <- err
	}()
	if err := recv(t, writeDone, "write 8 MiB"); err != nil {
		t.Fatal(err)
	}
	back := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c) // ends at the far end's half-close
		back <- b
	}()
	if err := recv(t, farDone, "far end"); err != nil {
		t.Fatal(err)
	}
	if b := recv(t, back, "digest back"); !bytes.Equal(b, want[:]) {
		t.Fatalf("digest mismatch: got %x want %x", b, want)
	}
}

func TestRouteLossFailsWaiters(t *testing.T) {
	ctl, r1, r2, _, _, _, _ := chain(t, router.Options{})
	losses := make(chan router.RouteLoss, 4)
	ctl.OnRouteLoss(into(losses))

	const n = 100
	dead := make(chan *router.Message, n)
	handles := map[uint32]bool{}
	for range n {
		h := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 2, Deliver: into(dead)})
		handles[h] = true
	}
	// A waiter on 1 must not be failed by the loss of 2.
	h1 := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 1, Deliver: into(dead)})

	r2.Close() // kills link 1 → 2
	for range n {
		m := recv(t, dead, "FlagDead for a waiter on 2")
		if m.Flags&router.FlagDead == 0 || m.Src != 2 || !handles[m.Handle] {
			t.Fatalf("unexpected message %v", m)
		}
		delete(handles, m.Handle)
		if !strings.Contains(string(m.Data), "c2") {
			t.Fatalf("dead message %q does not name the lost link c2", m.Data)
		}
	}
	loss := recv(t, losses, "route loss hook")
	if !slices.Equal(loss.IDs, []uint32{2}) || !strings.Contains(loss.Reason, "c2") {
		t.Fatalf("loss = %+v", loss)
	}
	if err := ctl.Send(&router.Message{Dst: 2, Handle: router.HandleCall}); !errors.Is(err, router.ErrNoRoute) {
		t.Fatalf("send to lost 2: %v, want ErrNoRoute", err)
	}
	// 1 is still reachable, and its waiter was left alone.
	ping(t, ctl, 1)
	select {
	case m := <-dead:
		t.Fatalf("extra message %v (h1=%d)", m, h1)
	default:
	}
	_ = r1
}

func TestRouteLossSubtree(t *testing.T) {
	ctl, _, _, _, c10, _, _ := chain(t, router.Options{})
	losses := make(chan router.RouteLoss, 4)
	ctl.OnRouteLoss(into(losses))
	dead := make(chan *router.Message, 2)
	for _, id := range []uint32{1, 2} {
		ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: id, Deliver: into(dead)})
	}
	c10.Close() // the conn under router 1: link 0 → 1 dies
	loss := recv(t, losses, "route loss hook")
	ids := slices.Clone(loss.IDs)
	slices.Sort(ids)
	if !slices.Equal(ids, []uint32{1, 2}) || !strings.Contains(loss.Reason, "c1") {
		t.Fatalf("loss = %+v, want ids [1 2] naming c1", loss)
	}
	srcs := []uint32{recv(t, dead, "dead 1").Src, recv(t, dead, "dead 2").Src}
	slices.Sort(srcs)
	if !slices.Equal(srcs, []uint32{1, 2}) {
		t.Fatalf("dead srcs %v", srcs)
	}
	for _, id := range []uint32{1, 2} {
		if err := ctl.Send(&router.Message{Dst: id, Handle: router.HandleCall}); !errors.Is(err, router.ErrNoRoute) {
			t.Fatalf("send to %d: %v, want ErrNoRoute", id, err)
		}
	}
}

func TestReceiverForUnroutedSourceFailsAtOnce(t *testing.T) {
	ctl := newRouter(t, 0, router.Options{})
	dead := make(chan *router.Message, 1)
	ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 42, Deliver: into(dead)})
	if m := recv(t, dead, "dead"); m.Flags&router.FlagDead == 0 {
		t.Fatalf("got %v", m)
	}
}

func TestBounce(t *testing.T) {
	ctl, r1, _, _, _, _, _ := chain(t, router.Options{})

	// From 1 to an id nobody knows: 1 sends it up, the controller bounces.
	dead := make(chan *router.Message, 1)
	h := r1.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 99, Deliver: into(dead)})
	if err := r1.Send(&router.Message{Dst: 99, Handle: router.HandleCall, ReplyTo: h}); err != nil {
		t.Fatal(err)
	}
	m := recv(t, dead, "bounce from the controller")
	if m.Flags&router.FlagDead == 0 || m.Src != 99 || m.Handle != h || !strings.Contains(string(m.Data), "no route") {
		t.Fatalf("bounce = %v %q", m, m.Data)
	}

	// From 0 to an id granted below 1 but not connected: 1 bounces.
	if err := ctl.Grant(5, 1, "c5"); err != nil {
		t.Fatal(err)
	}
	dead5 := make(chan *router.Message, 1)
	h5 := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 5, Deliver: into(dead5)})
	if err := ctl.Send(&router.Message{Dst: 5, Handle: router.HandleCall, ReplyTo: h5}); err != nil {
		t.Fatal(err)
	}
	m = recv(t, dead5, "bounce from 1")
	if m.Flags&router.FlagDead == 0 || m.Src != 5 || m.Handle != h5 {
		t.Fatalf("bounce = %v %q", m, m.Data)
	}

	// No receiver at the handle: bounced too.
	deadH := make(chan *router.Message, 1)
	hh := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 2, Deliver: into(deadH)})
	if err := ctl.Send(&router.Message{Dst: 2, Handle: 555, ReplyTo: hh}); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, deadH, "bounce from 2"); m.Flags&router.FlagDead == 0 || !strings.Contains(string(m.Data), "no receiver") {
		t.Fatalf("bounce = %v %q", m, m.Data)
	}
}

func TestSendTooLarge(t *testing.T) {
	ctl, _, _, _, _, _, _ := chain(t, router.Options{MaxFrameSize: 1 << 16})
	err := ctl.Send(&router.Message{Dst: 2, Handle: router.HandleCall, Data: make([]byte, 1<<16)})
	if !errors.Is(err, router.ErrFrameTooLarge) {
		t.Fatalf("err = %v", err)
	}
	ping(t, ctl, 2) // the link survives
}

func TestConcurrentSends(t *testing.T) {
	ctl, _, r2, _, _, _, _ := chain(t, router.Options{})
	const n = 2000
	got := make(chan *router.Message, n)
	r2.Register(router.HandleCall, router.Receiver{Accept: router.AcceptParent, Deliver: into(got)})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / 8 {
				ctl.Send(&router.Message{Dst: 2, Handle: router.HandleCall, Data: []byte{byte(w), byte(i)}})
			}
		}()
	}
	wg.Wait()
	for range n {
		recv(t, got, "message")
	}
}
