package bench

import (
	stdctx "context"
	"fmt"
	"io"
	osexec "os/exec"

	xssh "golang.org/x/crypto/ssh"
)

// The floor rows of `spindle-bench`: the least that running `true` over
// SSH can cost on this machine, whatever carries the command. Each round
// of the baseline starts `true` here (fork, exec, wait: on the loopback
// target, the same kernel and program the target runs) and sends one
// byte through an x/crypto/ssh session to `cat` on the target and back,
// through one SSH connection, or for via two, the second tunnelled
// through the first as `ssh -J` does: the SSH round trips any design
// pays, with no agent, framing or RPC of Spindle's. The Spindle side is
// the same command as ssh_true_seq's (via_true_seq's), so the ratio is
// Spindle's cost over the floor, and floor_ratio is the floor over the
// OpenSSH baseline of that row: the best ratio that any implementation
// could show against OpenSSH here. Against --ssh-target the spawn is
// still this machine's, so the floor is only an estimate there.

// sshEcho is a session running cat at the far end of hops SSH
// connections.
type sshEcho struct {
	clients []*xssh.Client // the first hop's first
	sess    *xssh.Session
	w       io.WriteCloser
	r       io.Reader
	buf     [1]byte
}

// startEcho opens an sshEcho through hops (1 or 2) connections to the
// path's target.
func (p *sshPath) startEcho(ctx stdctx.Context, hops int) (_ *sshEcho, err error) {
	addr, cfg, err := p.xcryptoConfig(ctx)
	if err != nil {
		return nil, err
	}
	e := &sshEcho{}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	c, err := p.dialXCrypto(ctx)
	if err != nil {
		return nil, err
	}
	e.clients = append(e.clients, c)
	for i := 1; i < hops; i++ {
		conn, err := c.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("tunnel to %s through hop %d: %w", addr, i, err)
		}
		if c, err = xcryptoClient(conn, addr, cfg); err != nil {
			return nil, err
		}
		e.clients = append(e.clients, c)
	}
	if e.sess, err = c.NewSession(); err != nil {
		return nil, err
	}
	if e.w, err = e.sess.StdinPipe(); err != nil {
		return nil, err
	}
	if e.r, err = e.sess.StdoutPipe(); err != nil {
		return nil, err
	}
	if err := e.sess.Start("cat"); err != nil {
		return nil, err
	}
	return e, e.roundTrip()
}

func (e *sshEcho) roundTrip() error { return echoByte(e.w, e.r, e.buf[:]) }

func (e *sshEcho) close() {
	if e.w != nil {
		e.w.Close()
	}
	if e.sess != nil {
		e.sess.Close()
	}
	for i := len(e.clients) - 1; i >= 0; i-- {
		e.clients[i].Close()
	}
}

// trueFloor times n rounds of: start `true` here, then one round trip
// through the path's echo of hops connections.
func (p *sshPath) trueFloor(ctx stdctx.Context, n, hops int) (float64, error) {
	if p.err != nil {
		return 0, p.err
	}
	if p.echo[hops] == nil {
		e, err := p.startEcho(ctx, hops)
		if err != nil {
			return 0, fmt.Errorf("x/crypto/ssh echo through %d hop(s): %w", hops, err)
		}
		p.echo[hops] = e
	}
	e := p.echo[hops]
	return timePerOp(n, func() error {
		if err := osexec.Command("true").Run(); err != nil {
			return err
		}
		return e.roundTrip()
	})
}

// floorCase is the floor row for the row named of (ssh_true_seq or
// via_true_seq, with its latency suffix): spindle runs the same command
// as that row's Spindle side.
func floorCase(name, group, of string, ms, n, hops int, spindle func(e *benchEnv, n int) (float64, error)) benchCase {
	baseline := "spawn_plus_ssh_echo"
	if hops > 1 {
		baseline = fmt.Sprintf("spawn_plus_%dhop_ssh_echo", hops)
	}
	return benchCase{
		Name: name, Group: group, Latency: ms, Baseline: baseline + latencySuffix(ms), N: n,
		Spindle: spindle,
		Base:    func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).trueFloor(e.ctx, n, hops) },
		Finish:  floorRatio(of),
	}
}

// floorRatio sets a floor row's floor_ratio: its baseline over the
// baseline of the row named of, when that row ran first.
func floorRatio(of string) func(e *benchEnv, r *benchResult) {
	return func(e *benchEnv, r *benchResult) {
		if o, ok := e.results[of]; ok && o.BaselineNS > 0 {
			r.FloorRatio = round3(r.BaselineNS / o.BaselineNS)
		}
	}
}
