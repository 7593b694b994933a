package bench

import (
	"bytes"
	stdctx "context"
	"fmt"
	osexec "os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
)

// The "via" group of `spindle-bench`: two SSH hops, the second made by the
// first hop's agent (with this controller's key), against OpenSSH's
// `ssh -J` with a warm ControlMaster, at 0 ms and 10 ms per hop. Both hops
// go to the ssh group's target (through the latency proxy for the 10 ms
// rows, so each hop pays 10 ms): what is measured is the cost of the
// chain, not of two machines.
//
// via_connect_parallel_20 connects 20 hops through one intermediary at
// once; its baseline is connecting one: the ratio says how much of the
// setup runs in parallel (1 = all of it, 20 = none). Both start cold: the
// intermediary has no connection to the target that they could share
// (the long-lived hop of via_true_seq has one of its own), so one hop
// dials and authenticates, and twenty dial as many connections as sshd's
// MaxSessions (10 by default) makes them need.

func viaCases() []benchCase {
	var cs []benchCase
	for _, ms := range []int{0, 10} {
		sfx := latencySuffix(ms)
		n := map[int]int{0: 100, 10: 20}[ms]
		cs = append(cs, benchCase{
			Name: "via_true_seq" + sfx, Group: "via", Latency: ms, Baseline: "openssh_jump_controlmaster" + sfx, N: n,
			Spindle: func(e *benchEnv, n int) (float64, error) {
				hop, err := e.viaHop(ms)
				if err != nil {
					return 0, err
				}
				return timeTrue(e.ctx, hop, n)
			},
			Base: func(e *benchEnv, n int) (float64, error) {
				p := e.sshPath(ms)
				if p.err != nil {
					return 0, p.err
				}
				if err := p.jumpTrue(e.ctx); err != nil { // starts the master, untimed
					return 0, err
				}
				return timePerOp(n, func() error { return p.jumpTrue(e.ctx) })
			},
		}, floorCase("via_true_floor"+sfx, "via", "via_true_seq"+sfx, ms, n, 2, func(e *benchEnv, n int) (float64, error) {
			hop, err := e.viaHop(ms)
			if err != nil {
				return 0, err
			}
			return timeTrue(e.ctx, hop, n)
		}))
	}
	// At 10 ms, both the controller's link to the intermediary and the
	// intermediary's SSH connections pay the delay, as across a WAN: then
	// the round trips of one hop's start, not the shared CPU, dominate.
	for _, ms := range []int{0, 10} {
		sfx := latencySuffix(ms)
		cs = append(cs, benchCase{
			Name: "via_connect_parallel_20" + sfx, Group: "via", Latency: ms, Baseline: "via_connect_one" + sfx, N: 1,
			Spindle: func(e *benchEnv, n int) (float64, error) { return e.viaConnect(ms, n, viaParallel) },
			Base:    func(e *benchEnv, n int) (float64, error) { return e.viaConnect(ms, n, 1) },
		})
	}
	// A cold hop through an agent: the intermediary has to deliver its own
	// binary, which it holds only uncompressed, so it compresses it first.
	// The baseline is the controller's own cold connect to the same
	// target, which sends a compressed form it embeds.
	for _, ms := range []int{0, 10} {
		sfx := latencySuffix(ms)
		cs = append(cs, benchCase{
			Name: "via_connect_cold" + sfx, Group: "via", Latency: ms, Baseline: "ssh_connect_cold" + sfx, N: map[int]int{0: 5, 10: 3}[ms],
			Spindle: func(e *benchEnv, n int) (float64, error) { return e.viaConnectCold(ms, n) },
			Base:    func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).spindleConnect(e.ctx, n, true) },
		})
	}
	return cs
}

func init() { benchCases = append(benchCases, viaCases()...) }

// viaConnectCold times n cold hops through path ms, each through a new
// intermediary (a new controller and first hop, untimed), so that no
// compressed copy of the agent survives from an earlier round, and with
// the target's agent cache emptied after the first hop has started.
func (e *benchEnv) viaConnectCold(ms, n int) (float64, error) {
	p := e.sshPath(ms)
	c, err := p.connector()
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for i := 0; i < n; i++ {
		ctl := spindle.NewController(spindle.Options{})
		d, err := func() (time.Duration, error) {
			defer ctl.Close()
			first, err := ctl.Connect(e.ctx, c)
			if err != nil {
				return 0, err
			}
			if err := p.b.paths[0].run(e.ctx, true, p.b.rmCmd); err != nil {
				return 0, fmt.Errorf("empty the agent cache: %w", err)
			}
			o := p.opts
			o.OwnConnection = true
			t0 := time.Now()
			hop, err := first.Connect(e.ctx, o)
			if err == nil {
				err = sys.Ping(e.ctx, hop)
			}
			return time.Since(t0), err
		}()
		if err != nil {
			return 0, err
		}
		total += d
	}
	return float64(total.Nanoseconds()) / float64(n), nil
}

// viaParallel is how many hops via_connect_parallel_20 starts at once.
const viaParallel = 20

// viaHop is the long-lived second hop of path ms, made by its first
// hop's agent.
func (e *benchEnv) viaHop(ms int) (*spindle.Context, error) {
	p := e.sshPath(ms)
	if p.via != nil {
		return p.via, nil
	}
	first, err := p.context(e.ctx)
	if err != nil {
		return nil, err
	}
	// A connection of its own: the hops of via_connect_parallel_20 must
	// not find one to share.
	o := p.opts
	o.OwnConnection = true
	p.via, err = first.Connect(e.ctx, o)
	return p.via, err
}

// viaConnect times connecting k hops at once through path ms's agent
// (each a new session and an agent; they share the connections the
// intermediary dials), n times. Closing a hop returns once the agent has
// released its connection, so every round starts cold.
func (e *benchEnv) viaConnect(ms, n, k int) (float64, error) {
	p := e.sshPath(ms)
	if p.err != nil {
		return 0, p.err
	}
	first, err := p.context(e.ctx)
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for i := 0; i < n; i++ {
		hops := make([]*spindle.Context, k)
		errs := make([]error, k)
		var wg sync.WaitGroup
		t0 := time.Now()
		for j := range hops {
			o := p.opts
			o.ContextName = fmt.Sprintf("via-%d-%d", i, j) // a new hop, not the running one
			wg.Add(1)
			go func() {
				defer wg.Done()
				hops[j], errs[j] = first.Connect(e.ctx, o)
			}()
		}
		wg.Wait()
		total += time.Since(t0)
		for j, h := range hops {
			if h != nil {
				h.Close()
			}
			if errs[j] != nil {
				return 0, errs[j]
			}
		}
	}
	return float64(total.Nanoseconds()) / float64(n), nil
}

func timeTrue(ctx stdctx.Context, cx *spindle.Context, n int) (float64, error) {
	return timeCmd(ctx, cx, exec.Cmd{Argv: []string{"true"}}, n)
}

// timeCmd times n runs of cmd, which must exit 0, on cx.
func timeCmd(ctx stdctx.Context, cx *spindle.Context, cmd exec.Cmd, n int) (float64, error) {
	return timePerOp(n, func() error {
		res, err := exec.Run(ctx, cx, cmd)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("%q exited with %d", append(cmd.Argv, cmd.Shell), res.ExitCode)
		}
		return err
	})
}

// jumpTrue runs true on the path's target through itself as the jump
// host (ssh -J), multiplexed over a ControlMaster of its own.
func (p *sshPath) jumpTrue(ctx stdctx.Context) error {
	cm := filepath.Join(p.b.dir, fmt.Sprintf("cmj%d", p.ms))
	args := []string{"-T", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
		"-o", "ControlMaster=auto", "-o", "ControlPath=" + cm, "-o", "ControlPersist=60"}
	args = append(append(args, p.sshArgs...), "-J", p.dest, p.dest, "true")
	cmd := osexec.CommandContext(ctx, "ssh", args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ssh -J %s %s true: %v: %s", p.dest, p.dest, err, bytes.TrimSpace(errb.Bytes()))
	}
	p.jumpCM = cm
	return nil
}
