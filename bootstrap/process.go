package bootstrap

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle/internal/spin"
	"go.uber.org/zap"
)

// Conn is the byte stream to a started agent, positioned just after its
// hello. Closing it closes the agent's stdin (the agent exits when its
// parent link ends) and reaps the process.
type Conn struct {
	Hello *Hello
	r     io.Reader
	w     io.WriteCloser
	close func() error
	once  sync.Once
	err   error
}

// NewConn wraps a stream whose hello has been read. closeFn runs once on
// Close, after w is closed.
func NewConn(h *Hello, r io.Reader, w io.WriteCloser, closeFn func() error) *Conn {
	return &Conn{Hello: h, r: r, w: w, close: closeFn}
}

func (c *Conn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *Conn) Write(p []byte) (int, error) { return c.w.Write(p) }

// afterHello returns a reader of what br, the reader the hello was read
// through, still holds, then of r, the stream under it, directly. Reading
// on through br would copy every byte of the connection once more: yamux
// reads in pieces smaller than br's 64 KiB buffer, which a bufio.Reader
// fills and copies from instead of reading into them.
func afterHello(br *bufio.Reader, r io.Reader) io.Reader {
	if br.Buffered() == 0 {
		return r
	}
	return &drainFirst{br: br, r: r}
}

type drainFirst struct {
	br *bufio.Reader // nil once drained
	r  io.Reader
}

func (d *drainFirst) Read(p []byte) (int, error) {
	if d.br != nil {
		if d.br.Buffered() > 0 {
			return d.br.Read(p)
		}
		d.br = nil
	}
	return d.r.Read(p)
}

// Close ends the stream and waits for the far end to go away.
func (c *Conn) Close() error {
	c.once.Do(func() {
		c.w.Close()
		if c.close != nil {
			c.err = c.close()
		}
	})
	return c.err
}

// exitGrace is how long a closed agent gets to exit before it is killed.
const exitGrace = 5 * time.Second

// StartCommand starts cmd (whose stdin/stdout become the link), logs its
// stderr, and waits for the hello marked nonce. Cancelling ctx before the
// hello kills the process.
func StartCommand(ctx context.Context, cmd *exec.Cmd, nonce, name string, log *zap.Logger) (*Conn, error) {
	if log == nil {
		log = zap.NewNop()
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the agent: %w", err)
	}
	var logged sync.WaitGroup
	logged.Add(1)
	go func() {
		defer logged.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 4096), 64<<10)
		for sc.Scan() {
			log.Info("agent stderr", zap.String("context", name), zap.String("line", sc.Text()))
		}
		io.Copy(io.Discard, stderr)
	}()
	exited := make(chan struct{})
	var waitErr error
	go func() {
		logged.Wait() // Wait closes the pipes; drain stderr first
		waitErr = cmd.Wait()
		close(exited)
	}()
	kill := func() { cmd.Process.Kill() }
	stop := context.AfterFunc(ctx, kill)
	in := spin.Reader(stdout, spin.Budget())
	br := bufio.NewReaderSize(in, 64<<10)
	hello, err := ReadHello(ctx, br, nonce, log)
	stop()
	if err != nil {
		stdin.Close()
		kill()
		<-exited
		return nil, err // the controller names the context
	}
	closeFn := func() error {
		select {
		case <-exited:
		case <-time.After(exitGrace):
			kill()
			<-exited
		}
		_ = waitErr
		return nil
	}
	return NewConn(hello, afterHello(br, in), stdin, closeFn), nil
}
