// Package bootstrap gets an agent running at the far end of a fresh byte
// stream and checks that it is the agent we meant: the agent's command-line
// arguments, the hello line it prints before the protocol starts, the
// agent binaries the controller embeds, and the private per-user cache they
// run from.
package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spindle-rpc/spindle/internal/printable"
	"github.com/spindle-rpc/spindle/router"
	"go.uber.org/zap"
)

const (
	// HelloPrefix starts the line an agent prints when it is ready.
	HelloPrefix = "SPINDLE-HELLO"
	// ErrorPrefix starts a line the first stage prints when it cannot start
	// the agent; the rest of the line is shown to the user verbatim.
	ErrorPrefix = "SPINDLE-ERROR"
	// maxNoise bounds what login scripts may print before the hello.
	maxNoise = 1 << 20
	// maxLine bounds one line before the hello.
	maxLine = 64 << 10
)

// Hello is what an agent says about itself before the protocol starts.
type Hello struct {
	Proto   int    `json:"proto"`
	Version string `json:"version"`
	PID     int    `json:"pid"`
	UID     int    `json:"uid"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

// ErrAgent is wrapped by errors the far end reported before the hello.
var ErrAgent = errors.New("agent failed to start")

// ErrNoHello: the stream ended before the hello (the first stage or the
// agent exited; a connector can add how, say the session's exit status).
var ErrNoHello = errors.New("the far end closed the stream before saying hello")

// NewNonce returns a random token that marks this start's hello line, so
// that noise printed by login scripts can never be taken for it.
func NewNonce() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WriteHello prints the hello line.
func WriteHello(w io.Writer, nonce string, h Hello) error {
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s %s %s\n", HelloPrefix, nonce, js)
	return err
}

// ReadHello reads lines from r until the hello carrying nonce, skipping
// (and logging at debug) anything else. A SPINDLE-ERROR line, EOF, or more
// than 1 MiB of noise is an error. ctx cancellation is honoured only if the
// caller arranges for r to fail (e.g. by killing the process).
func ReadHello(ctx context.Context, r *bufio.Reader, nonce string, log *zap.Logger) (*Hello, error) {
	return readHello(ctx, r, nonce, log, nil)
}

// readHello is ReadHello with a hook: handle sees every line that is
// neither the hello nor an error line first, and says whether it was a
// request it dealt with (not noise) or an error that ends the start.
func readHello(ctx context.Context, r *bufio.Reader, nonce string, log *zap.Logger, handle func(line string) (bool, error)) (*Hello, error) {
	if log == nil {
		log = zap.NewNop()
	}
	var seen int
	var noise bytes.Buffer
	for {
		line, err := readLine(r)
		seen += len(line)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if noise.Len() > 0 {
				return nil, fmt.Errorf("%w: %w; it printed: %q", ErrAgent, ErrNoHello, tail(noise.String()))
			}
			return nil, fmt.Errorf("%w: %w: %v", ErrAgent, ErrNoHello, err)
		}
		if rest, ok := strings.CutPrefix(line, ErrorPrefix); ok {
			return nil, fmt.Errorf("%w: %s", ErrAgent, printable.String(strings.TrimSpace(rest)))
		}
		if rest, ok := strings.CutPrefix(line, HelloPrefix+" "+nonce+" "); ok {
			var h Hello
			if err := json.Unmarshal([]byte(rest), &h); err != nil {
				return nil, fmt.Errorf("%w: unreadable hello: %v", ErrAgent, err)
			}
			if h.Proto != router.ProtocolVersion {
				return nil, fmt.Errorf("%w: agent speaks protocol %d, this controller speaks %d: the agent cache holds a stale agent", ErrAgent, h.Proto, router.ProtocolVersion)
			}
			return &h, nil
		}
		if handle != nil {
			ok, err := handle(line)
			if err != nil {
				return nil, err
			}
			if ok {
				continue
			}
		}
		log.Debug("skipped output before hello", zap.String("line", line))
		if noise.Len() < 4096 {
			noise.WriteString(line + "\n")
		}
		if seen > maxNoise {
			return nil, fmt.Errorf("%w: more than %d bytes of output and no hello", ErrAgent, maxNoise)
		}
	}
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 512 {
		s = "…" + s[len(s)-512:]
	}
	return s
}

// readLine reads one line of at most maxLine bytes (longer lines are cut
// into pieces).
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		frag, err := r.ReadSlice('\n')
		b = append(b, frag...)
		if err == bufio.ErrBufferFull && len(b) < maxLine {
			continue
		}
		if err != nil && err != bufio.ErrBufferFull {
			return string(b), err
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
}
