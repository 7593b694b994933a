package integration_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/internal/ratelimit"
	"github.com/spindle-rpc/spindle/internal/testkit/fakeclock"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	slog "github.com/spindle-rpc/spindle/services/log"
	"github.com/spindle-rpc/spindle/services/sys"
	"go.uber.org/zap/zaptest/observer"
)

// TestHostileAgent: an agent that behaves like a compromised target
// (internal/testkit/hostileagent) tries to call its sibling, forge the
// controller's and the sibling's src, call its parent's and the
// controller's services, hijack the sibling's route and open a circuit
// upward. Nothing runs, the sibling keeps its route, and every attempt is
// logged on the controller.
func TestHostileAgent(t *testing.T) {
	t.Parallel()
	bin, err := testagent.BuildPackage("./internal/testkit/hostileagent", "hostile-agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	tg := &target{}
	// Every agent in this tree runs the hostile build (children start from
	// their parent's binary), but only "evil" is told to attack.
	_, parent := mustConnect(t, tg, local.Options{Agent: bootstrap.FromFile(bin, runtime.GOOS, runtime.GOARCH)})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	evil, err := parent.Connect(ctx, local.Options{ContextName: "evil"})
	if err != nil {
		t.Fatal(err)
	}
	sibling, err := parent.Connect(ctx, local.Options{ContextName: "sibling"})
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "pwned")
	var res struct {
		Sent []string `msgpack:"sent"`
	}
	err = evil.Call(ctx, "hostile.Attack", map[string]any{"parent": parent.ID(), "sibling": sibling.ID(), "marker": marker}, &res)
	if err != nil {
		t.Fatalf("hostile.Attack: %v", err)
	}
	if len(res.Sent) != 7 {
		t.Fatalf("the hostile agent could put only %v on the wire; the test proves nothing about the others", res.Sent)
	}

	// The sibling still answers as itself: its route was not hijacked.
	info, err := sys.Info(ctx, sibling)
	if err != nil || info.PID != sibling.Hello().PID {
		t.Fatalf("sibling after the attack: %+v, %v (its pid is %d)", info, err, sibling.Hello().PID)
	}
	// Nothing ran anywhere.
	if m, _ := filepath.Glob(marker + "*"); len(m) > 0 {
		t.Errorf("an attack ran a command: %v", m)
	}
	// Every attempt was refused and logged, on the controller.
	// The parent's refusals arrive as forwarded records naming the link
	// to evil; the controller's own name evil's id as src.
	var refused []string
	for _, e := range tg.logs.All() {
		text := fmt.Sprint(e.ContextMap())
		if e.Message == "refused message" && (strings.Contains(text, "local → evil") || fmt.Sprint(e.ContextMap()["src"]) == fmt.Sprint(evil.ID())) {
			refused = append(refused, text)
		}
	}
	t.Logf("refusals logged on the controller:\n%s", strings.Join(refused, "\n"))
	if len(refused) == 0 {
		t.Logf("all logs:\n%s", logText(tg.logs))
	}
	for _, why := range []string{
		"a target may not address another branch", // 1
		"src is not routed through this link",     // 2, 5
		"takes messages from the parent only",     // 3
		"service calls come from ancestors only",  // 4
		"not granted to this link",                // 6
		"circuits are opened by the parent only",  // 7
	} {
		found := false
		for _, r := range refused {
			found = found || strings.Contains(r, why)
		}
		if !found {
			t.Errorf("no refusal %q logged on the controller", why)
		}
	}
	if len(refused) < 7 {
		t.Errorf("%d refusals logged, want at least 7", len(refused))
	}
}

// What a flooding child may leave its parent agent holding once the
// parent has dropped it (router/flood_test.go measures a link during a
// flood). The slack is for the dropped child's link and process reaper,
// still exiting.
const (
	floodGoroutines = 16
	floodBytes      = 8 << 20
	// floodFrames is the ping flood (2.4 MB) that once left a parent with
	// 200,000 goroutines and 650 MiB.
	floodFrames = 200_000
)

// agentUsage is hostile.Usage's reply.
type agentUsage struct {
	Goroutines int    `msgpack:"goroutines"`
	Bytes      uint64 `msgpack:"bytes"`
}

// TestHostileAgentFloods: a child agent that stops reading and floods its
// parent agent (a bastion) with yamux pings or stream opens is dropped,
// named in one warning that reaches the controller, and leaves the parent
// serving and holding no more than before.
func TestHostileAgentFloods(t *testing.T) {
	t.Parallel()
	bin, err := testagent.BuildPackage("./internal/testkit/hostileagent", "hostile-agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	tg := &target{}
	_, parent := mustConnect(t, tg, local.Options{Agent: bootstrap.FromFile(bin, runtime.GOOS, runtime.GOARCH)})
	for _, tc := range []struct{ kind, why string }{
		{"ping", "ping flood"},
		{"open", "stream opens refused"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
			defer cancel()
			name := "flood-" + tc.kind
			evil, err := parent.Connect(ctx, local.Options{ContextName: name})
			if err != nil {
				t.Fatal(err)
			}
			var before, after agentUsage
			if err := parent.Call(ctx, "hostile.Usage", nil, &before); err != nil {
				t.Fatal(err)
			}
			var res struct {
				Written int `msgpack:"written"`
			}
			err = evil.Call(ctx, "hostile.Flood", map[string]any{"kind": tc.kind, "frames": floodFrames}, &res)
			if err == nil {
				t.Fatalf("the flood's reply came back: the parent did not drop the child (%d frames)", res.Written)
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("the flood call failed with %v, want the link dropped for %q", err, tc.why)
			}
			// The parent still serves, and holds what it held.
			if err := parent.Call(ctx, "hostile.Usage", nil, &after); err != nil {
				t.Fatalf("the parent after the flood: %v", err)
			}
			t.Logf("parent before: %+v, after: %+v", before, after)
			if d := after.Goroutines - before.Goroutines; d > floodGoroutines {
				t.Errorf("the parent has %d more goroutines (bound %d)", d, floodGoroutines)
			}
			if after.Bytes > before.Bytes && after.Bytes-before.Bytes > floodBytes {
				t.Errorf("the parent holds %d more bytes (bound %d)", after.Bytes-before.Bytes, floodBytes)
			}
			// One warning names the child and why, on the controller.
			var named []string
			for _, e := range tg.logs.FilterMessage("disconnected").All() {
				// Forwarded from the parent: its fields in one field.
				if text := fmt.Sprint(e.ContextMap()); strings.Contains(text, "→ "+name) {
					named = append(named, text)
				}
			}
			if len(named) != 1 || !strings.Contains(named[0], tc.why) {
				t.Fatalf("warnings \"disconnected\" naming %s: %q, want one saying %q\nall logs:\n%s", name, named, tc.why, logText(tg.logs))
			}
		})
	}
}

// TestHostileAgentLogs: an agent that sends log records straight to the
// controller, past its own logger (internal/testkit/hostileagent,
// hostile.Log). A flood shows at most the burst plus the rate × the time
// it took on the controller's clock (a fake one, standing still unless
// the test moves it), then one summary line per interval counting every
// record not shown; a record with escape sequences and a forged line is
// shown escaped, unless the controller asked for raw records.
func TestHostileAgentLogs(t *testing.T) {
	t.Parallel()
	bin, err := testagent.BuildPackage("./internal/testkit/hostileagent", "hostile-agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	src := bootstrap.FromFile(bin, runtime.GOOS, runtime.GOARCH)
	// start connects a controller to a hostile agent named evil.
	start := func(t *testing.T, opts slog.ReceiveOptions) (*observer.ObservedLogs, *spindle.Context, *fakeclock.Clock) {
		t.Helper()
		clock := fakeclock.New()
		opts.Clock = clock
		tg := &target{}
		_, cx, err := connectWith(t, tg, local.Options{Agent: src, ContextName: "evil"}, spindle.Options{AgentLogs: opts})
		if err != nil {
			t.Fatal(err)
		}
		return tg.logs, cx, clock
	}
	call := func(t *testing.T, cx *spindle.Context, mode string, n int) {
		t.Helper()
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
		defer cancel()
		// The records travel before the reply on the same ordered bus:
		// when the call returns, the controller has seen every one.
		var sent int
		if err := cx.Call(ctx, "hostile.Log", map[string]any{"mode": mode, "n": n}, &sent); err != nil || sent != max(n, 1) {
			t.Fatalf("hostile.Log %s: sent %d, %v", mode, sent, err)
		}
	}
	fromEvil := func(logs *observer.ObservedLogs, snippet string) []observer.LoggedEntry {
		var out []observer.LoggedEntry
		for _, e := range logs.FilterMessageSnippet(snippet).All() {
			if e.ContextMap()["context"] == "evil" {
				out = append(out, e)
			}
		}
		return out
	}

	t.Run("log-flood", func(t *testing.T) {
		t.Parallel()
		logs, cx, clock := start(t, slog.ReceiveOptions{})
		began := clock.Now()
		const n = 5000
		call(t, cx, "log-flood", n)
		shown := len(fromEvil(logs, "flood "))
		elapsed := clock.Now().Sub(began)
		if bound := slog.RecordBurst + int(slog.RecordRate*elapsed.Seconds()); shown > bound || shown == 0 {
			t.Fatalf("%d of %d flood records shown in %v on the controller's clock; want 1 to %d (burst + rate × elapsed)", shown, n, elapsed, bound)
		}
		if s := fromEvil(logs, "log records dropped"); len(s) != 0 {
			t.Fatalf("summary before the interval ended: %v", s)
		}
		clock.Advance(slog.ReportInterval)
		s := fromEvil(logs, "log records dropped")
		if len(s) != 1 {
			t.Fatalf("%d summary lines after one interval, want 1: %v", len(s), s)
		}
		dropped, _ := s[0].ContextMap()["dropped"].(uint64)
		if dropped < uint64(n-shown) {
			t.Errorf("summary counts %d dropped, but %d flood records were not shown", dropped, n-shown)
		}
		if want := fmt.Sprintf("evil: %s log records dropped (more than %d/s)", ratelimit.Thousands(dropped), slog.RecordRate); s[0].Message != want {
			t.Errorf("summary %q, want %q", s[0].Message, want)
		}
		t.Logf("%d of %d flood records shown, then: %s", shown, n, s[0].Message)
	})

	t.Run("log-escape", func(t *testing.T) {
		t.Parallel()
		logs, cx, _ := start(t, slog.ReceiveOptions{})
		call(t, cx, "log-escape", 0)
		got := fromEvil(logs, "all 50 targets OK")
		if len(got) != 1 {
			t.Fatalf("the hostile record was shown %d times, want once", len(got))
		}
		msg, fields := got[0].Message, fmt.Sprint(got[0].ContextMap()["fields"])
		for _, s := range []string{msg, fields} {
			if strings.IndexFunc(s, unicode.IsControl) >= 0 {
				t.Errorf("control characters reach the controller's log: %q", s)
			}
			if !strings.Contains(s, `\x1b]0;pwned\x07\r\x1b[2Kall 50 targets OK\nweb9: \u009b31m`) {
				t.Errorf("not shown escaped: %q", s)
			}
		}
	})

	t.Run("log-raw", func(t *testing.T) {
		t.Parallel()
		logs, cx, _ := start(t, slog.ReceiveOptions{Raw: true})
		call(t, cx, "log-escape", 0)
		got := fromEvil(logs, "all 50 targets OK")
		if len(got) != 1 || !strings.HasPrefix(got[0].Message, "\x1b]0;pwned\x07\r\x1b[2K") {
			t.Fatalf("raw records asked for, got %v", got)
		}
	})
}
