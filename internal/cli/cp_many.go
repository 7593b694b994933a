package cli

import (
	stdctx "context"
	"errors"
	"fmt"
	"path"
	"sync"
	"syscall"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/services/fs"
	"github.com/spindle-rpc/spindle/target"
	"go.uber.org/zap"
)

// copyToMany copies SRC to the path dstPath on every target (cp --to), as
// pdcp or parallel-scp would: at most fanout targets at once, on
// connections made in parallel that share the hops their chains begin
// with, or through the daemon (--persist). SRC is checked once before
// anything connects, and a local file hashed once (fs.TreeOptions.SHA256);
// one progress bar counts every copy. Each failure is
// named by its target, and the exit status is the largest.
func (g *globals) copyToMany(ctx stdctx.Context, o *cpOptions, srcArg, dstPath string, to []string, fanout int) error {
	usage := func(err error) error { return &usageError{cmd: "spindle cp", err: err} }
	if fanout < 1 {
		return usage(fmt.Errorf("--fanout %d: want at least 1", fanout))
	}
	src, err := parseCopyArg(srcArg)
	if err != nil {
		return usage(fmt.Errorf("SRC %v", err))
	}
	if !path.IsAbs(dstPath) {
		return usage(fmt.Errorf("with --to, DST is the absolute path on every target (/PATH), not %q", dstPath))
	}
	targets, err := expandTargets("spindle cp", to, g.stdin)
	if err != nil {
		return err
	}
	chains, err := g.chains(targets)
	if err != nil {
		return err
	}
	var srcChain targetChain
	if src.remote() {
		cs, err := g.chains([]string{src.Target})
		if err != nil {
			return err
		}
		srcChain = cs[0]
	}
	g.conn.prompt = oneAtATime(g.conn.prompt, readSecretTTY)
	g.conn.ask = oneAtATime(g.conn.ask, readLineTTY)
	ctx, sig, stop := SignalContext(ctx)
	defer stop()
	dsts := make([]copyEndpoint, len(targets))
	for i, t := range targets {
		dsts[i] = copyEndpoint{Target: t, Path: dstPath}
	}
	// A local source missing or a directory without -r: said once, and
	// nothing connects.
	every := copyEndpoint{Target: fmt.Sprintf("%d targets", len(targets)), Path: dstPath}
	job, err := newCopyJob(g, o, src, every, sig)
	if err != nil {
		return err
	}

	daemon := g.persist > 0 && g.daemonUp()
	// A local file goes to every target from one hash, taken here: the
	// hash is a copy's largest CPU cost on this side (BENCHMARKS.md), and
	// the targets then check that they all received the same bytes.
	var srcSum []byte
	if st := job.srcInfo; st != nil && st.Mode().IsRegular() && len(targets) > 1 && !daemon {
		if srcSum, err = fs.HashFile(ctx, src.Path); err != nil {
			return job.fail(err)
		}
	}
	log := g.logger()
	var ctl *spindle.Controller
	direct := sync.OnceValue(func() *target.Routes {
		ctl = spindle.NewController(g.controllerOptions(log))
		return target.NewRoutes(ctl)
	})
	defer func() {
		if ctl != nil {
			closeWithin(sig() != 0, log, func() { ctl.Close() })
		}
	}()
	bar := newCopyProgress(g.stderr, path.Base(src.Path))
	if bar != nil && !daemon {
		bar.copies = len(targets)
	} else {
		bar = nil // the daemon draws no bar for one copy of many
	}
	var errMu sync.Mutex
	results := forEachTarget(ctx, targets, fanout, func(i int) fanoutResult {
		if daemon {
			if res, ok := g.copyOneThroughDaemon(o, src, dsts[i], &errMu); ok {
				return res
			}
		}
		return g.copyOne(ctx, direct(), log, o, src, srcChain, srcSum, dsts[i], chains[i], bar, sig)
	})
	var failed error
	for _, res := range results {
		if res.code != exitOK {
			failed = errors.New("a copy failed")
		}
	}
	bar.finish(failed)
	return g.fanoutExit(results, sig())
}

// copyOne is one target's copy of copyToMany, on connections of this
// process's.
func (g *globals) copyOne(ctx stdctx.Context, r *target.Routes, log *zap.Logger, o *cpOptions, src copyEndpoint, srcChain targetChain,
	srcSum []byte, dst copyEndpoint, chain targetChain, bar *copyProgress, sig func() syscall.Signal) fanoutResult {
	notReached := func(err error) fanoutResult {
		return fanoutResult{target: dst.Target, code: exitConnect, err: &connectError{err: err}}
	}
	cctx := ctx
	if g.timeout > 0 {
		var cancel stdctx.CancelFunc
		cctx, cancel = stdctx.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	var from *spindle.Context
	if src.remote() {
		var err error
		if from, err = r.Open(cctx, srcChain.steps); err != nil {
			return notReached(fmt.Errorf("the source %s: %w", src.Target, err))
		}
	}
	to, err := r.Open(cctx, chain.steps)
	if err != nil {
		return notReached(err)
	}
	job, err := newCopyJob(g, o, src, dst, sig)
	if err == nil {
		job.srcSum = srcSum
		err = job.run(ctx, from, to, bar, log)
	}
	if err != nil {
		return fanoutResult{target: dst.Target, code: exitCode(err), err: err}
	}
	return fanoutResult{target: dst.Target}
}

// copyOneThroughDaemon is one target's copy of copyToMany through the
// daemon (--persist); ok is false when the daemon did not take it.
func (g *globals) copyOneThroughDaemon(o *cpOptions, src, dst copyEndpoint, errMu *sync.Mutex) (res fanoutResult, ok bool) {
	req, err := copyRequest(o, src, dst)
	if err != nil {
		return fanoutResult{target: dst.Target, code: exitFailure, err: err}, true
	}
	gt := *g
	gt.stdin = nil
	stderr := &lineWriter{mu: errMu, out: g.stderr, prefix: dst.Target + ": "} // its -v logs
	gt.stdout, gt.stderr = stderr, stderr
	var text string
	handled, err := gt.runPersistent("", nil, persistOpts{copy: req, exitText: &text})
	stderr.Close()
	if !handled {
		return fanoutResult{}, false
	}
	return daemonResult(dst.Target, err, text), true
}
