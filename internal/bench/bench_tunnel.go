package bench

import (
	"bytes"
	stdctx "context"
	"fmt"
	"io"
	"net"
	osexec "os/exec"
	"sync"

	"github.com/spindle-rpc/spindle/services/tunnel"
)

// The tunnel group: TCP forwarding through the ssh group's target, as
// `spindle forward -L` does it (tunnel.DialEarly through the agent) against
// OpenSSH's `-L` added to the warm ControlMaster (`ssh -O forward`), to
// servers on the target's side: a new connection with one round trip of
// data on it, and a bulk transfer.
func tunnelCases() []benchCase {
	var cs []benchCase
	for _, ms := range []int{0, 10} {
		sfx := latencySuffix(ms)
		n := map[int]int{0: 100, 10: 20}[ms]
		cs = append(cs,
			benchCase{
				Name: "tunnel_connect" + sfx, Group: "tunnel", Latency: ms, Baseline: "openssh_forward_connect" + sfx, N: n,
				Spindle: func(e *benchEnv, n int) (float64, error) {
					p := e.sshPath(ms)
					cx, err := p.context(e.ctx)
					if err != nil {
						return 0, err
					}
					echo := p.b.echo.Addr()
					return timeConns(n, func() (net.Conn, error) { return tunnel.DialEarly(e.ctx, cx, "tcp", echo) }, echoOnce)
				},
				Base: func(e *benchEnv, n int) (float64, error) {
					p := e.sshPath(ms)
					local, err := p.forward(e.ctx, p.b.echo.Addr())
					if err != nil {
						return 0, err
					}
					return timeConns(n, func() (net.Conn, error) { return net.Dial("tcp", local) }, echoOnce)
				},
			},
			benchCase{
				Name: "tunnel_100m" + sfx, Group: "tunnel", Latency: ms, Baseline: "openssh_forward_100m" + sfx, N: 1,
				Spindle: func(e *benchEnv, n int) (float64, error) {
					p := e.sshPath(ms)
					cx, err := p.context(e.ctx)
					if err != nil {
						return 0, err
					}
					sink, err := p.b.startSink()
					if err != nil {
						return 0, err
					}
					return timeConns(n, func() (net.Conn, error) { return tunnel.Dial(e.ctx, cx, "tcp", sink) }, pour)
				},
				Base: func(e *benchEnv, n int) (float64, error) {
					p := e.sshPath(ms)
					sink, err := p.b.startSink()
					if err != nil {
						return 0, err
					}
					local, err := p.forward(e.ctx, sink)
					if err != nil {
						return 0, err
					}
					return timeConns(n, func() (net.Conn, error) { return net.Dial("tcp", local) }, pour)
				},
				Finish: func(_ *benchEnv, r *benchResult) {
					if r.SpindleNS > 0 && r.BaselineNS > 0 {
						r.SpindleMBps = round1(float64(tunnelBulk) / (1 << 20) / (r.SpindleNS / 1e9))
						r.BaselineMBps = round1(float64(tunnelBulk) / (1 << 20) / (r.BaselineNS / 1e9))
					}
				},
			},
		)
	}
	return cs
}

func init() { benchCases = append(benchCases, tunnelCases()...) }

// tunnelBulk is what tunnel_100m sends through one connection.
const tunnelBulk = 100 << 20

// echoOnce sends a byte on c and reads it back.
func echoOnce(c net.Conn) error {
	b := []byte{'x'}
	if _, err := c.Write(b); err != nil {
		return err
	}
	_, err := io.ReadFull(c, b)
	return err
}

// halfCloser is a connection whose sending side closes alone.
type halfCloser interface{ CloseWrite() error }

// timeConns times n connections, each made by dial, used by use and
// closed.
func timeConns(n int, dial func() (net.Conn, error), use func(net.Conn) error) (float64, error) {
	return timePerOp(n, func() error {
		c, err := dial()
		if err != nil {
			return err
		}
		defer c.Close()
		return use(c)
	})
}

// pour sends tunnelBulk bytes on c, half-closes, and waits for the sink's
// one byte: the sink has read everything.
func pour(c net.Conn) error {
	buf := make([]byte, 256<<10)
	for sent := 0; sent < tunnelBulk; sent += len(buf) {
		if _, err := c.Write(buf[:min(len(buf), tunnelBulk-sent)]); err != nil {
			return err
		}
	}
	if err := c.(halfCloser).CloseWrite(); err != nil {
		return err
	}
	_, err := io.ReadFull(c, buf[:1])
	return err
}

// startSink starts (once) a server that reads each connection to its end,
// then answers one byte: the end of a transfer as the receiver saw it.
func (b *sshBench) startSink() (string, error) {
	b.sinkOnce.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.sinkErr = err
			return
		}
		b.sink = ln
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					if _, err := io.Copy(io.Discard, c); err == nil {
						c.Write([]byte{1})
					}
				}()
			}
		}()
	})
	if b.sinkErr != nil {
		return "", b.sinkErr
	}
	return b.sink.Addr().String(), nil
}

// sinkState is sshBench's sink server.
type sinkState struct {
	sinkOnce sync.Once
	sink     net.Listener
	sinkErr  error
}

// forward adds `-L 127.0.0.1:PORT:TO` to the path's warm ControlMaster
// (once per destination) and returns the local address.
func (p *sshPath) forward(ctx stdctx.Context, to string) (string, error) {
	if local, ok := p.forwards[to]; ok {
		return local, nil
	}
	if err := p.warmMaster(ctx); err != nil {
		return "", err
	}
	// A free port, closed again for ssh to take: the race with other
	// programs is a bench's to lose, not a user's.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	local := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(local)
	args := append([]string{"-o", "ControlPath=" + p.cm, "-O", "forward", "-L", "127.0.0.1:" + port + ":" + to}, p.sshArgs...)
	cmd := osexec.CommandContext(ctx, "ssh", append(args, p.dest)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ssh -O forward -L %s:%s: %v: %s", port, to, err, bytes.TrimSpace(out.Bytes()))
	}
	if p.forwards == nil {
		p.forwards = map[string]string{}
	}
	p.forwards[to] = local
	return local, nil
}
