package router_test

import (
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/router"
)

// A child whose transport delivers nothing (its process is stopped, its
// host or connection died without a word) is declared dead once
// KeepaliveCountMax keepalives went unanswered: the calls waiting on it fail as
// disconnected, saying why, its route goes, and one warning names it.
// The stall bound is off, so that only the keepalive can find it.
func TestKeepaliveDeclaresSilentLinkDead(t *testing.T) {
	log, logs := observed()
	ctl := newRouter(t, 0, router.Options{})
	r1 := newRouter(t, 1, router.Options{Logger: log, StallTimeout: -1})
	r2 := newRouter(t, 2, router.Options{})
	link(t, ctl, ctl, r1, "c1")
	silent, l := linkGated(t, ctl, r1, r2, "c2")
	defer silent.resume()
	lost := make(chan router.RouteLoss, 1)
	ctl.OnRouteLoss(into(lost))
	replies := make(chan *router.Message, 1)
	h := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 2, Deliver: into(replies)})

	// The paused transport takes neither the call nor the pings, so the
	// child has nothing to answer.
	silent.pause()
	l.SetKeepalive(10*time.Millisecond, 3)
	if err := ctl.Send(&router.Message{Dst: 2, Handle: handlePing, ReplyTo: h, Data: []byte("ping")}); err != nil {
		t.Fatal(err)
	}
	m := recv(t, replies, "the call's failure")
	if m.Flags&router.FlagDead == 0 || !strings.Contains(string(m.Data), "link to c2 lost: no answer to keepalives") ||
		!strings.Contains(string(m.Data), "40ms (3 keepalives 10ms apart") {
		t.Fatalf("the call toward the silent child ended as %v %q, want a dead reply naming the keepalive bound", m, m.Data)
	}
	if loss := recv(t, lost, "route loss"); len(loss.IDs) != 1 || loss.IDs[0] != 2 {
		t.Fatalf("route loss %+v, want id 2", loss)
	}
	recv(t, l.Done(), "the link's end")
	if w := warnings(logs, "disconnected", "c2"); len(w) != 1 || !strings.HasPrefix(w[0].ContextMap()["why"].(string), "no answer to keepalives") {
		t.Fatalf("warnings about the silent link: %v, want one \"disconnected\" naming the keepalive; all: %v", w, logs.All())
	}
	if m := ping(t, ctl, 1); m.Flags&router.FlagDead != 0 {
		t.Fatalf("ping the silent child's parent: dead: %s", m.Data)
	}
}

// An idle healthy child answers the keepalive's pings and stays up, for
// as many intervals as it takes to ping it several times.
func TestKeepaliveKeepsIdleLinkUp(t *testing.T) {
	ctl := newRouter(t, 0, router.Options{})
	r1 := newRouter(t, 1, router.Options{})
	a, b := connPair(t)
	l := linkThrough(t, ctl, ctl, r1, "idle", a, b)
	l.SetKeepalive(5*time.Millisecond, 40)
	deadline := time.After(wait)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for router.KeepalivePings(l) < 5 {
		select {
		case <-tick.C:
		case <-l.Done():
			t.Fatalf("the idle link was declared dead: %v", l.Err())
		case <-deadline:
			t.Fatalf("%d keepalive pings after %v, want 5", router.KeepalivePings(l), wait)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the idle link died: %v", err)
	}
	if m := ping(t, ctl, 1); m.Flags&router.FlagDead != 0 {
		t.Fatalf("ping: dead: %s", m.Data)
	}
}
