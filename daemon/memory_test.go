package daemon

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/daemon/proto"
	"github.com/spindle-rpc/spindle/services/sys"
	"github.com/spindle-rpc/spindle/target"
	"go.uber.org/zap"
)

// TestCallsLeaveNoMemory: a thousand daemon calls, each a client's whole
// session and a call to a kept local target, leave the daemon's heap,
// once the calls are over, within 2 MiB of where it was. Nothing of a
// call may outlive it by more than moments (yamux's close timers held
// each one's session for five minutes).
func TestCallsLeaveNoMemory(t *testing.T) {
	reg := NewRegistry()
	defer reg.Close()
	dialer := Dialer{
		NewGroup: func() (*spindle.Controller, *zap.Logger) { return spindle.NewController(spindle.Options{}), nil },
		Open: func(ctx context.Context, g *Group) (*spindle.Context, []target.Step, error) {
			tg, err := target.Parse("local")
			if err != nil {
				return nil, nil, err
			}
			steps, err := tg.Steps(target.Options{})
			if err != nil {
				return nil, nil, err
			}
			cx, err := g.Routes.Open(ctx, steps)
			return cx, steps, err
		},
	}
	ep := &CLIEndpoint{Handle: func(ctx context.Context, req *CLIRequest) (int, string) {
		c, _, err := reg.Get(ctx, Key{Settings: "s", Target: "local"}, dialer)
		if err != nil {
			return 1, err.Error()
		}
		if err := req.Started("", ""); err != nil {
			return 1, err.Error()
		}
		if err := sys.Ping(ctx, c.Context); err != nil {
			return 1, err.Error()
		}
		io.WriteString(req.Stdout, "pong")
		return 0, ""
	}}
	s, served := serve(t, Options{}, ep)
	defer stop(t, s, served)

	call := func() error {
		conn, err := Dial(s.o.Socket, nil)
		if err != nil {
			return err
		}
		defer conn.Close()
		c, err := NewClient(conn)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.Send(&proto.Msg{Kind: proto.KindRun, Run: &proto.Run{Target: "local"}}); err != nil {
			return err
		}
		out := make(chan string, 1)
		go func() { b, _ := io.ReadAll(c.Stdout); out <- string(b) }()
		go io.Copy(io.Discard, c.Stderr)
		for {
			m, err := c.Recv()
			if err != nil {
				return err
			}
			switch m.Kind {
			case proto.KindStarted:
				c.Stdin.Close()
			case proto.KindExit:
				if got := <-out; m.Code != 0 || got != "pong" {
					return fmt.Errorf("exit %d %q, stdout %q", m.Code, m.Text, got)
				}
				return nil
			}
		}
	}
	// The kept connection, and pools that fill once, before the baseline.
	for range 20 {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	const calls = 1000
	for i := range calls {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	const bound = 2 << 20
	// What ends with a call may finish moments after the client saw its
	// exit (the daemon's side of the session closes then): wait for the
	// heap to come back, up to a bound that is no measurement.
	deadline := time.Now().Add(30 * time.Second)
	after := heap()
	for after > before+bound && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		after = heap()
	}
	if after > before+bound {
		t.Fatalf("after %d calls the heap is %.1f MiB, %.1f MiB more than before them (bound 2 MiB)",
			calls, float64(after)/(1<<20), float64(after-before)/(1<<20))
	}
	t.Logf("heap %.2f MiB before %d calls, %.2f MiB after", float64(before)/(1<<20), calls, float64(after)/(1<<20))
}
