package daemon

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/target"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A kept connection whose agent died without the daemon knowing yet is
// the race of a request that comes just after the agent was killed: the
// agent's end is still on its way through the transport. A stopped agent
// is that moment held still: its link stays up, it answers nothing, and
// killing it then delivers its end.
//
// Started on such a connection, a command's start succeeds (the circuit
// opens locally) and only its result fails, when nothing tells whether
// it ran: it cannot be retried. GetLive's ping finds the connection
// dead before anything is started, and connects anew.
func TestRegistryGetLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := NewRegistry()
	defer reg.Close()
	key := Key{Settings: "flags", Target: "local"}
	var killed int // the agent the log hook kills, once
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(zapcore.RegisterHooks(core, func(e zapcore.Entry) error {
		if e.Message == "daemon: reusing the connection" && killed != 0 {
			syscall.Kill(killed, syscall.SIGKILL)
			killed = 0
		}
		return nil
	}))
	d := localDialer("local", log)

	first, reused, err := reg.GetLive(ctx, key, d)
	if err != nil || reused {
		t.Fatalf("first GetLive: %v, reused %v", err, reused)
	}
	if c, reused, err := reg.GetLive(ctx, key, d); err != nil || !reused || c != first {
		t.Fatalf("a live connection: %v, reused %v, the same %v", err, reused, c == first)
	}

	// What the ping guards against: a command started on a connection
	// whose agent is gone, which the registry still hands out.
	stopped := first.Context.Hello().PID
	if err := syscall.Kill(stopped, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	c, reused, err := reg.Get(ctx, key, d)
	if err != nil || !reused || c != first {
		t.Fatalf("Get of the stopped agent's connection: %v, reused %v", err, reused)
	}
	p, err := exec.Start(ctx, c.Context, exec.Cmd{Argv: []string{"true"}})
	if err != nil {
		t.Fatalf("exec.Start on the stopped agent: %v; want it to succeed, as on a dying agent", err)
	}
	syscall.Kill(stopped, syscall.SIGKILL)
	if _, err := p.Wait(); !errors.Is(err, spindle.ErrDisconnected) {
		t.Fatalf("the command on the killed agent: %v; want disconnected", err)
	}
	p.Close()
	<-first.Context.Done()

	// The same moment for GetLive: the agent, stopped, is killed once the
	// registry has decided to reuse its connection.
	second, _, err := reg.Get(ctx, key, d) // the dead one replaced
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(second.Context.Hello().PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	killed = second.Context.Hello().PID
	logs.TakeAll()
	c, reused, err = reg.GetLive(ctx, key, d)
	if err != nil {
		t.Fatalf("GetLive after the kept agent was killed: %v", err)
	}
	if c == second || reused || c.Context.Err() != nil {
		t.Fatalf("GetLive after the kept agent was killed: the same connection %v, reused %v, %v", c == second, reused, c.Context.Err())
	}
	if killed != 0 {
		t.Fatal("GetLive did not reuse the kept connection first: the test tested nothing")
	}
	if res, err := exec.Run(ctx, c.Context, exec.Cmd{Argv: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Errorf("a command on the new connection: %v, %+v", err, res)
	}
	if n := logs.FilterMessage("daemon: kept connection lost").Len(); n != 1 {
		t.Errorf("%d losses logged, want 1", n)
	}
}

// localDialer opens chain with default options, on a controller of its
// own per group.
func localDialer(chain string, log *zap.Logger) Dialer {
	return Dialer{
		NewGroup: func() (*spindle.Controller, *zap.Logger) {
			return spindle.NewController(spindle.Options{}), nil
		},
		Open: func(ctx context.Context, g *Group) (*spindle.Context, []target.Step, error) {
			t, err := target.Parse(chain)
			if err != nil {
				return nil, nil, err
			}
			steps, err := t.Steps(target.Options{})
			if err != nil {
				return nil, nil, err
			}
			cx, err := g.Routes.Open(ctx, steps)
			return cx, steps, err
		},
		Log: log,
	}
}
