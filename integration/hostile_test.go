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
