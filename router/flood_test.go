package router_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/router"
	"go.uber.org/zap/zaptest/observer"
)

// floodFrames bounds every flood: a child that gets this far without
// being disconnected has shown the limit missing.
const floodFrames = 200_000

// flood writes frame until the parent drops the link (the write fails),
// and fails t if it never does.
func (c *rawChild) flood(frame []byte) {
	c.t.Helper()
	for i := 0; i < floodFrames; i++ {
		if _, err := c.conn.Write(frame); err != nil {
			return
		}
	}
	c.t.Fatalf("%d frames % x, and the parent has not dropped the link", floodFrames, frame[:12])
}

// marker sends a log record to the controller on the bus and waits for
// it: frames are handled in order, so everything sent before it has been.
func (c *rawChild) marker(id uint32, got *collector) {
	c.t.Helper()
	c.write(busFrame(&router.Message{Dst: 0, Src: id, Handle: router.HandleLog, Data: []byte("marker")}))
	if m := recv(c.t, got.ch, "the marker"); string(m.Data) != "marker" {
		c.t.Fatalf("got %q before the marker", m.Data)
	}
}

func warnings(logs *observer.ObservedLogs, msg, link string) []observer.LoggedEntry {
	var out []observer.LoggedEntry
	for _, e := range logs.FilterMessage(msg).All() {
		if e.Level.String() == "warn" && e.ContextMap()["link"] == link {
			out = append(out, e)
		}
	}
	return out
}

// disconnected checks that the parent dropped c's link for going past a
// limit, said why in one warning, and removed its route.
func (c *rawChild) disconnected(logs *observer.ObservedLogs, lost <-chan router.RouteLoss, name, why string) observer.LoggedEntry {
	c.t.Helper()
	recv(c.t, c.link.Done(), "the link to drop")
	if err := c.link.Err(); !errors.Is(err, router.ErrPeerLimit) || !strings.Contains(err.Error(), why) {
		c.t.Fatalf("link error %v, want ErrPeerLimit saying %q", err, why)
	}
	if l := recv(c.t, lost, "the route loss"); len(l.IDs) != 1 || !strings.Contains(l.Reason, why) {
		c.t.Fatalf("route loss %+v", l)
	}
	w := warnings(logs, "disconnected", name)
	if len(w) != 1 || !strings.Contains(w[0].ContextMap()["why"].(string), why) {
		c.t.Fatalf("%d warnings \"disconnected\" for %s, want one saying %q: %v", len(w), name, why, logs.All())
	}
	return w[0]
}

// A child that pings and never reads the replies costs its parent no
// goroutine per ping, and is disconnected once the replies fill yamux's
// queues.
func TestPingFloodDisconnectsChild(t *testing.T) {
	log, logs := observed()
	ctl := newRouter(t, 0, router.Options{Logger: log})
	lost := make(chan router.RouteLoss, 1)
	ctl.OnRouteLoss(into(lost))
	got := newCollector()
	ctl.Register(router.HandleLog, router.Receiver{Accept: router.AcceptChildren, Deliver: got.deliver})
	base := measure()
	c := attachRaw(t, ctl, 2, "app1")

	// As many pings as the reply queues hold: the link stays.
	for i := 0; i < router.MaxPendingPongs+yamuxSendQueue; i++ {
		c.write(yheader(yPing, ySYN, 0, uint32(i)))
	}
	c.marker(2, got)
	if err := c.link.Err(); err != nil {
		t.Fatalf("dropped within the limit: %v", err)
	}
	measure().within(t, base, "unanswered pings within the limit")

	c.flood(yheader(yPing, ySYN, 0, 7))
	c.disconnected(logs, lost, "app1", "ping flood")
	measure().within(t, base, "after the ping flood")
}

// A child that opens streams (only a parent opens circuits) gets each
// reset at once, holding nothing, and is disconnected past its budget,
// with its refusals logged at most refusalWarnBurst at a time.
func TestStreamOpenFloodDisconnectsChild(t *testing.T) {
	log, logs := observed()
	ctl := router.New(0, router.Options{Logger: log})
	t.Cleanup(func() { ctl.Close() })
	// A clock that stands still: one interval of warnings, whatever the
	// machine's speed.
	now := time.Now()
	router.SetClock(ctl, func() time.Time { return now })
	lost := make(chan router.RouteLoss, 1)
	ctl.OnRouteLoss(into(lost))
	got := newCollector()
	ctl.Register(router.HandleLog, router.Receiver{Accept: router.AcceptChildren, Deliver: got.deliver})
	base := measure()
	c := attachRaw(t, ctl, 2, "app1")

	// The budget's worth of opens, with data that must not be kept: the
	// link stays, and the parent holds no stream.
	body := make([]byte, 4096)
	for i := 0; i < router.MaxRefusedStreamOpens; i++ {
		c.write(yframe(yData, ySYN, uint32(2+2*i), body))
	}
	c.marker(2, got)
	if err := c.link.Err(); err != nil {
		t.Fatalf("dropped within the budget: %v", err)
	}
	measure().within(t, base, "refused opens within the budget")
	if n := len(warnings(logs, "refused message", "app1")); n != router.RefusalWarnBurst {
		t.Fatalf("%d refusals logged, want the burst of %d", n, router.RefusalWarnBurst)
	}

	c.flood(yframe(yWindowUpdate, ySYN, 1000, nil))
	w := c.disconnected(logs, lost, "app1", "stream opens refused")
	// The warning counts the refusals that were not logged.
	if more := w.ContextMap()["more_refused"]; more != int64(router.MaxRefusedStreamOpens-router.RefusalWarnBurst) {
		t.Fatalf("more_refused %v, want %d", more, router.MaxRefusedStreamOpens-router.RefusalWarnBurst)
	}
	if n := len(warnings(logs, "refused message", "app1")); n != router.RefusalWarnBurst {
		t.Fatalf("%d refusals logged, want %d", n, router.RefusalWarnBurst)
	}
	measure().within(t, base, "after the stream-open flood")
}

// Refusals of bus messages are logged at most refusalWarnBurst per
// interval and link; the next warning, or the link's end, counts the
// others.
func TestRefusalWarningsRateLimited(t *testing.T) {
	log, logs := observed()
	ctl := router.New(0, router.Options{Logger: log})
	t.Cleanup(func() { ctl.Close() })
	now := time.Now()
	clock := make(chan time.Time, 1)
	clock <- now
	router.SetClock(ctl, func() time.Time {
		t := <-clock
		clock <- t
		return t
	})
	setClock := func(t time.Time) {
		<-clock
		clock <- t
	}
	got := newCollector()
	ctl.Register(router.HandleLog, router.Receiver{Accept: router.AcceptChildren, Deliver: got.deliver})
	c := attachRaw(t, ctl, 2, "app1")
	forged := busFrame(&router.Message{Dst: 0, Src: 0, Handle: router.HandleLog, Data: []byte("forged")})
	refused := func() []observer.LoggedEntry { return warnings(logs, "refused message", "app1") }

	const first = 50
	for i := 0; i < first; i++ {
		c.write(forged)
	}
	c.marker(2, got)
	if n := len(refused()); n != router.RefusalWarnBurst {
		t.Fatalf("%d of %d refusals logged, want %d", n, first, router.RefusalWarnBurst)
	}

	// The next interval: the first warning counts those not logged.
	setClock(now.Add(router.RefusalWarnInterval))
	c.write(forged)
	c.marker(2, got)
	w := refused()
	if len(w) != router.RefusalWarnBurst+1 || w[len(w)-1].ContextMap()["more_refused"] != int64(first-router.RefusalWarnBurst) {
		t.Fatalf("after the interval: %d warnings, last %v; want %d, more_refused %d",
			len(w), w[len(w)-1].ContextMap(), router.RefusalWarnBurst+1, first-router.RefusalWarnBurst)
	}

	// Past this interval's burst, then the child goes: one warning counts
	// the rest.
	const extra = 5
	for i := 0; i < router.RefusalWarnBurst-1+extra; i++ {
		c.write(forged)
	}
	c.marker(2, got)
	c.conn.Close()
	recv(t, c.link.Done(), "the link to close")
	rest := warnings(logs, "refusals not logged", "app1")
	if len(rest) != 1 || rest[0].ContextMap()["more_refused"] != int64(extra) {
		t.Fatalf("at the link's end: %v, want one warning with more_refused %d", rest, extra)
	}
	if n := len(warnings(logs, "disconnected", "app1")); n != 0 {
		t.Fatalf("a child that closed its link was %d times \"disconnected\"", n)
	}
}
