package log

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/spindle-rpc/spindle/internal/testkit/fakeclock"
	"github.com/spindle-rpc/spindle/internal/testkit/testconn"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func names(id uint32) string { return map[uint32]string{5: "web1", 6: "web2"}[id] }

func record(t *testing.T, lvl zapcore.Level, msg, fields string) []byte {
	t.Helper()
	b, err := wire.Marshal(&Record{Level: int8(lvl), Time: time.Now().UnixNano(), Msg: msg, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newTestReceiver(opts ReceiveOptions, level zapcore.Level) (*receiver, *observer.ObservedLogs) {
	core, logs := observer.New(level)
	return newReceiver(zap.New(core), opts, names), logs
}

func summaries(logs *observer.ObservedLogs) []observer.LoggedEntry {
	return logs.FilterMessageSnippet("log records dropped").All()
}

// A flood shows the burst plus the rate × the time it took, then one
// summary per interval with the count of the rest; another context is
// not affected.
func TestFloodIsRateLimitedPerContext(t *testing.T) {
	clock := fakeclock.New()
	rc, logs := newTestReceiver(ReceiveOptions{Clock: clock}, zapcore.DebugLevel)
	const n = 3000
	for range n {
		rc.deliver(5, record(t, zapcore.WarnLevel, "flood", ""))
	}
	shown := logs.FilterMessage("flood").Len()
	if shown != RecordBurst {
		t.Fatalf("%d of %d records shown on a still clock, want the burst (%d)", shown, n, RecordBurst)
	}
	if s := summaries(logs); len(s) != 0 {
		t.Fatalf("summary before the interval ended: %v", s)
	}
	rc.deliver(6, record(t, zapcore.WarnLevel, "web2 is fine", ""))
	if logs.FilterMessage("web2 is fine").Len() != 1 {
		t.Fatal("a flood from web1 silenced web2")
	}
	clock.Advance(ReportInterval)
	s := summaries(logs)
	if len(s) != 1 || s[0].Message != "web1: 2,000 log records dropped (more than 100/s)" || s[0].ContextMap()["dropped"] != uint64(n-RecordBurst) {
		t.Fatalf("summaries %v", s)
	}
	// A second's worth of the rate, after the interval.
	for range n {
		rc.deliver(5, record(t, zapcore.WarnLevel, "flood", ""))
	}
	elapsed := ReportInterval
	if shown := logs.FilterMessage("flood").Len(); shown > RecordBurst+int(RecordRate*elapsed.Seconds()) {
		t.Fatalf("%d records shown in %v, more than the burst plus the rate", shown, elapsed)
	}
	rc.forget([]uint32{5, 6})
	if s := summaries(logs); len(s) != 2 {
		t.Fatalf("forget did not report the last drops at once: %v", s)
	}
	if clock.Pending() != 0 {
		t.Fatal("a report is still scheduled for a context that is gone")
	}
}

// Records the logger would not show spend nothing.
func TestHiddenRecordsAreFree(t *testing.T) {
	rc, logs := newTestReceiver(ReceiveOptions{Clock: fakeclock.New()}, zapcore.WarnLevel)
	for range 5 * RecordBurst {
		rc.deliver(5, record(t, zapcore.DebugLevel, "chatty", ""))
	}
	rc.deliver(5, record(t, zapcore.ErrorLevel, "the one that matters", ""))
	if logs.FilterMessage("the one that matters").Len() != 1 {
		t.Fatalf("debug records hidden by the level used up the budget: %v", logs.All())
	}
}

const hostile = "\x1b]0;pwned\x07\r\x1b[2Kall 50 targets OK\nweb9: \u009b31mforged \u202eKO\xff"

func TestRecordsShownEscaped(t *testing.T) {
	rc, logs := newTestReceiver(ReceiveOptions{Clock: fakeclock.New()}, zapcore.DebugLevel)
	rc.deliver(5, record(t, zapcore.ErrorLevel, hostile, `{"k":"`+hostile+`"}`))
	all := logs.All()
	if len(all) != 1 {
		t.Fatalf("logs %v", all)
	}
	e := all[0]
	want := `\x1b]0;pwned\x07\r\x1b[2Kall 50 targets OK\nweb9: \u009b31mforged \u202eKO\xff`
	if e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
	fields := e.ContextMap()["fields"].(string)
	if fields != `{"k":"`+want+`"}` {
		t.Errorf("fields %q", fields)
	}
	for _, s := range []string{e.Message, fields} {
		if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == '\u202e' || r == unicode.ReplacementChar }) >= 0 {
			t.Errorf("control characters reach the log: %q", s)
		}
	}
}

func TestRawRecords(t *testing.T) {
	rc, logs := newTestReceiver(ReceiveOptions{Raw: true, Clock: fakeclock.New()}, zapcore.DebugLevel)
	rc.deliver(5, record(t, zapcore.ErrorLevel, hostile, `{"k":1}`))
	if all := logs.All(); len(all) != 1 || all[0].Message != hostile {
		t.Fatalf("raw: %v", all)
	}
}

// Malformed records are logged within the same budget.
func TestMalformedRecordsAreLimited(t *testing.T) {
	rc, logs := newTestReceiver(ReceiveOptions{Clock: fakeclock.New()}, zapcore.DebugLevel)
	for range 2 * RecordBurst {
		rc.deliver(5, []byte{0xc1})
	}
	if n := logs.FilterMessage("malformed log record").Len(); n != RecordBurst {
		t.Fatalf("%d malformed-record warnings, want %d", n, RecordBurst)
	}
}

// Through real routers: an agent's core forwards a hostile record, the
// controller shows it escaped; the controller's close reports the drops
// of a flood at once and leaves nothing scheduled.
func TestReceiveOverTheBus(t *testing.T) {
	clock := fakeclock.New()
	written := make(chan zapcore.Entry, 4*RecordBurst)
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error { written <- e; return nil }))
	ctl := router.New(router.ControllerID, router.Options{})
	Receive(ctl, log, ReceiveOptions{Clock: clock})
	agent := router.New(5, router.Options{})
	a, b, err := testconn.Pair()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		agent.Serve(context.Background(), b, "controller")
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ctl.AddChild(ctx, a, 5, "web1"); err != nil {
		t.Fatal(err)
	}
	alog := zap.New(NewCore(agent, zapcore.DebugLevel))
	// The agent logs when its parent calls, so its link is up by then;
	// after a flood it answers on another handle, and the bus is ordered:
	// by the answer, every record has been delivered.
	const handleGo, handleDone = router.FirstDynamicHandle + 100, router.FirstDynamicHandle + 101
	done := make(chan struct{})
	ctl.Register(handleDone, router.Receiver{Accept: router.AcceptChildren, Deliver: func(*router.Message) { close(done) }})
	agent.Register(handleGo, router.Receiver{Accept: router.AcceptParent, Deliver: func(*router.Message) {
		alog.Warn(hostile, zap.String("k", hostile))
		for range 2 * RecordBurst {
			alog.Warn("flood")
		}
		agent.Send(&router.Message{Dst: router.ControllerID, Handle: handleDone})
	}})
	if err := ctl.Send(&router.Message{Dst: 5, Handle: handleGo}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-written:
		if strings.IndexFunc(e.Message, unicode.IsControl) >= 0 || !strings.Contains(e.Message, `\x1b]0;pwned\x07`) {
			t.Fatalf("shown as %q", e.Message)
		}
	case <-ctx.Done():
		t.Fatal("the record never arrived")
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the flood never ended")
	}
	if s := summaries(logs); len(s) != 0 {
		t.Fatalf("summary before the interval or the close: %v", s)
	}
	ctl.Close()
	<-served
	shown := logs.FilterMessage("flood").Len()
	if s := summaries(logs); len(s) != 1 || s[0].ContextMap()["dropped"] != uint64(2*RecordBurst-shown) {
		t.Fatalf("summaries after close: %v (%d of %d floods shown)", s, shown, 2*RecordBurst)
	}
	if shown != RecordBurst-1 { // the hostile record took one
		t.Fatalf("%d floods shown on a still clock, want %d", shown, RecordBurst-1)
	}
	if clock.Pending() != 0 {
		t.Fatal("a report is still scheduled after the controller closed")
	}
}
