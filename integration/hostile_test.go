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

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/services/sys"
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
