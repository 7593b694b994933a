package modules

import (
	"context"

	"github.com/spindle-rpc/spindle/internal/pyrunner"
	"github.com/spindle-rpc/spindle/rpc"
)

// MethodRunners lists the agent's warm Python runners (RunnerStat).
const MethodRunners = "modules.Runners"

// RunnerStat describes one warm Python runner of an agent: the process
// that forks once per pipelined module run (exec.Cmd.Python).
type RunnerStat struct {
	Interpreter string `msgpack:"interp"`
	Pid         int    `msgpack:"pid"`
	// RSS is the runner's resident memory in bytes, its forks not
	// included; a runner past the agent's bound is replaced after its
	// run. SpareRSS is that of its next run, forked ahead and waiting
	// (a private copy of the runner's writable memory; 0: none now).
	RSS      int64 `msgpack:"rss"`
	SpareRSS int64 `msgpack:"sparerss,omitempty"`
	// Runs is the number of module runs it forked.
	Runs int64 `msgpack:"runs"`
	// Preloaded are the modules it imported once for every run.
	Preloaded []string `msgpack:"pre"`
}

// Register registers modules.Put, modules.Has and modules.Runners on
// reg.
func Register(reg *rpc.Registry) {
	reg.Handle(MethodPut, handlePut)
	reg.Handle(MethodHas, handleHas)
	reg.Handle(MethodRunners, func(ctx context.Context, call *rpc.Call) (any, error) {
		var out []RunnerStat
		for _, s := range pyrunner.Default.Stats() {
			out = append(out, RunnerStat{Interpreter: s.Interpreter, Pid: s.Pid, RSS: s.RSS, SpareRSS: s.SpareRSS, Runs: s.Runs, Preloaded: s.Preloaded})
		}
		return out, nil
	})
}

// Runners lists c's warm Python runners and their memory.
func Runners(ctx context.Context, c rpc.Caller) ([]RunnerStat, error) {
	var out []RunnerStat
	if err := c.Call(ctx, MethodRunners, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}
