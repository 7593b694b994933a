package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/spindle-rpc/spindle/rpc"
)

// Run runs cmd on c to completion (exec.Run).
func Run(ctx context.Context, c rpc.Caller, cmd Cmd) (*Result, error) {
	var res Result
	if err := c.Call(ctx, MethodRun, &cmd, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Collect runs cmd on c to completion, as Run does, and writes its
// output to stdout and stderr (nil discards), all of it: cmd.MaxOutput
// must be 0. A command whose output fits in exec.Run's reply
// (DefaultRunMaxOutput a stream) costs one round trip, as Run; one with
// more is spilled (Cmd.Spill) and its rest read from a circuit
// (exec.Attach), where a slow writer slows the process down. stdin is
// cmd.Stdin alone. The Result has no Stdout or Stderr.
func Collect(ctx context.Context, c rpc.Caller, cmd Cmd, stdout, stderr io.Writer) (*Result, error) {
	if cmd.MaxOutput != 0 {
		return nil, fmt.Errorf("exec.Collect: MaxOutput is %d; Collect delivers all output (use Run for a limit)", cmd.MaxOutput)
	}
	cmd.Spill = true
	var res Result
	if err := c.Call(ctx, MethodRun, &cmd, &res); err != nil {
		return nil, err
	}
	for _, o := range []struct {
		w io.Writer
		b []byte
	}{{stdout, res.Stdout}, {stderr, res.Stderr}} {
		if o.w != nil && len(o.b) > 0 {
			if _, err := o.w.Write(o.b); err != nil {
				return nil, err
			}
		}
	}
	if res.Spilled == 0 {
		res.Stdout, res.Stderr = nil, nil
		return &res, nil
	}
	st, err := c.Stream(ctx, MethodAttach, &AttachArgs{ID: res.Spilled})
	if err != nil {
		return nil, err // the agent kills it after SpillAttachTimeout
	}
	st.Close() // no stdin: it was cmd.Stdin
	p := &Process{st: st, done: make(chan struct{})}
	if err := p.CopyOutput(stdout, stderr); err != nil {
		p.Close()
		return nil, err
	}
	return p.Wait()
}

// Errors of Process's output readers.
var (
	// ErrOutputDiscarded is read from a stream that was asked for after
	// the output started to flow: its output was discarded.
	ErrOutputDiscarded = errors.New("exec: output stream asked for after output started; it was discarded")
	// ErrOutputClaimed is returned by CopyOutput when the output is already
	// being read.
	ErrOutputClaimed = errors.New("exec: output already being read")
)

// Process is a command started with Start.
//
// Its output is read from the circuit by one demultiplexer that starts on
// the first Read from Stdout() or Stderr(), on Wait, or runs in CopyOutput.
// Stdout and Stderr return io.Pipe readers, so a slow reader slows the
// process down (backpressure through the circuit). Because both streams
// share the circuit, a stream that is delivered but never read would stall
// the other one forever; so a stream is delivered only if Stdout() or
// Stderr() was called for it before the output started to flow, and is
// discarded otherwise. Ask for the streams you want right after Start, and
// then read every stream you asked for until EOF (or call Close).
type Process struct {
	st rpc.Stream

	mu      sync.Mutex
	started bool
	closed  bool // set by Close: streams not yet asked for are discarded
	pipes   [3]*io.PipeReader
	sinks   [3]io.Writer // by stream id; nil discards
	done    chan struct{}
	derr    error // demux error, set before done is closed

	waitOnce sync.Once
	res      *Result
	werr     error
}

// Start starts cmd on c with a circuit attached (exec.Start).
func Start(ctx context.Context, c rpc.Caller, cmd Cmd) (*Process, error) {
	st, err := c.Stream(ctx, MethodStart, &cmd)
	if err != nil {
		return nil, err
	}
	return &Process{st: st, done: make(chan struct{})}, nil
}

// Stdin is the process's stdin. Close half-closes the circuit, which the
// process sees as end of file.
func (p *Process) Stdin() io.WriteCloser { return stdinWriter{p.st} }

type stdinWriter struct{ st rpc.Stream }

func (w stdinWriter) Write(b []byte) (int, error) { return w.st.Write(b) }
func (w stdinWriter) Close() error                { return w.st.Close() }

// Stdout is the process's standard output (and all output with a PTY).
func (p *Process) Stdout() io.Reader { return p.stream(StreamStdout) }

// Stderr is the process's standard error.
func (p *Process) Stderr() io.Reader { return p.stream(StreamStderr) }

func (p *Process) stream(id int) io.Reader {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pipes[id] == nil {
		if p.started || p.closed {
			return errReader{ErrOutputDiscarded}
		}
		r, w := io.Pipe()
		p.pipes[id], p.sinks[id] = r, w
	}
	return &streamReader{p: p, r: p.pipes[id]}
}

type streamReader struct {
	p *Process
	r *io.PipeReader
}

func (s *streamReader) Read(b []byte) (int, error) {
	s.p.startDemux()
	return s.r.Read(b)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// startDemux starts the demultiplexer goroutine unless output is already
// flowing.
func (p *Process) startDemux() {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return
	}
	p.started = true
	sinks := p.sinks
	p.mu.Unlock()
	go p.demux(sinks)
}

// CopyOutput copies the process's output to stdout and stderr (nil
// discards) until the circuit ends. It runs the demultiplexer in the
// calling goroutine, so it must be called before anything else reads the
// output.
func (p *Process) CopyOutput(stdout, stderr io.Writer) error {
	p.mu.Lock()
	if p.started || p.pipes[StreamStdout] != nil || p.pipes[StreamStderr] != nil {
		p.mu.Unlock()
		return ErrOutputClaimed
	}
	p.started = true
	p.mu.Unlock()
	p.demux([3]io.Writer{nil, stdout, stderr})
	return p.derr
}

// demux reads the output frames and hands each to its stream's sink. A
// sink that fails (its reader was closed) is dropped and the stream
// discarded, so that the other stream keeps flowing.
func (p *Process) demux(sinks [3]io.Writer) {
	var err error
	defer func() {
		for _, w := range sinks {
			if pw, ok := w.(*io.PipeWriter); ok {
				pw.CloseWithError(err)
			}
		}
		p.derr = err
		close(p.done)
	}()
	err = demuxFrames(p.st, sinks)
}

// demuxFrames reads output frames from r (what the agent sends: untrusted)
// until EOF and writes each frame's data to its stream's sink. A malformed
// frame is an error, after r was drained so that the agent can finish and
// reply.
func demuxFrames(r io.Reader, sinks [3]io.Writer) (err error) {
	var hdr [FrameHeaderLen]byte
	buf := make([]byte, chunkSize)
	for {
		if _, err = io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			if err == io.ErrUnexpectedEOF {
				err = fmt.Errorf("%s: output frame cut short", MethodStart)
			}
			return err
		}
		id, n := hdr[0], binary.BigEndian.Uint32(hdr[1:])
		if (id != StreamStdout && id != StreamStderr) || n > MaxFrameData {
			io.Copy(io.Discard, r)
			return fmt.Errorf("%s: malformed output frame (stream %d, %d bytes)", MethodStart, id, n)
		}
		if int(n) > cap(buf) {
			buf = make([]byte, n)
		}
		b := buf[:n]
		if _, err = io.ReadFull(r, b); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				err = fmt.Errorf("%s: output frame cut short", MethodStart)
			}
			return err
		}
		if w := sinks[id]; w != nil {
			if _, werr := w.Write(b); werr != nil {
				sinks[id] = nil
			}
		}
	}
}

// Wait waits until all output was delivered and the process exited, and
// returns its Result.
func (p *Process) Wait() (*Result, error) {
	p.waitOnce.Do(func() {
		p.startDemux()
		<-p.done
		var res Result
		if err := p.st.Wait(&res); err != nil {
			p.werr = err
			return
		}
		if p.derr != nil {
			p.werr = p.derr
			return
		}
		p.res = &res
	})
	return p.res, p.werr
}

// Resize sets the PTY's window size.
func (p *Process) Resize(rows, cols uint16) error {
	return p.st.Control(rpc.Control{Op: rpc.OpResize, Rows: rows, Cols: cols})
}

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) error {
	return p.st.Control(rpc.Control{Op: rpc.OpSignal, Signal: int(sig)})
}

// Close kills the process group (SIGKILL), discards any output not read
// yet (readers of Stdout and Stderr get io.ErrClosedPipe), half-closes
// stdin and waits for the call to end, so that nothing is left running on
// either side. It returns Wait's error. Close after Wait only releases the
// readers.
func (p *Process) Close() error {
	p.mu.Lock()
	p.closed = true
	pipes := p.pipes
	p.mu.Unlock()
	p.Signal(syscall.SIGKILL) // fails harmlessly if the call already ended
	for _, r := range pipes {
		if r != nil {
			r.Close()
		}
	}
	p.st.Close()
	_, err := p.Wait()
	return err
}
