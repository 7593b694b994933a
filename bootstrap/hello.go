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
	// ErrorPrefix starts the line the first stage prints when it cannot
	// start the agent, `SPINDLE-ERROR <nonce> <text>`: the text is shown
	// to the user (made printable).
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
	// MaxFrame is the largest frame the agent reads (a bus message or a
	// circuit header, router.Options.MaxFrameSize): its parent refuses a
	// larger one at once. 0: the agent does not say (router.SetPeerMaxFrame).
	MaxFrame int `json:"max_frame,omitempty"`
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
// (and logging at debug) anything else, even glued to the front of the
// hello's line. A SPINDLE-ERROR line carrying nonce, EOF, or more than 1 MiB
// of noise is an error. ctx cancellation is honoured only if the
// caller arranges for r to fail (e.g. by killing the process).
func ReadHello(ctx context.Context, r *bufio.Reader, nonce string, log *zap.Logger) (*Hello, error) {
	return readHello(ctx, r, nonce, log, nil)
}

// readHello is ReadHello with a hook: handle sees every marked line that
// is neither the hello nor an error line first (from its marker on), and
// says whether it was a request it dealt with (not noise) or an error that
// ends the start.
//
// A marker (markerKeys) counts anywhere in a line, not only at its start:
// a login script that prints without a final newline (a prompt, a terminal
// title escape) glues its output to the front of the stage's first line,
// which would otherwise pass for noise and leave the start waiting for
// its timeout. What precedes the marker is skipped as noise.
func readHello(ctx context.Context, r *bufio.Reader, nonce string, log *zap.Logger, handle func(line string) (bool, error)) (*Hello, error) {
	if log == nil {
		log = zap.NewNop()
	}
	keys := markerKeys(nonce)
	longest := 0
	for _, k := range keys {
		longest = max(longest, len(k))
	}
	var seen int
	var noise bytes.Buffer
	skip := func(s string) {
		if s == "" {
			return
		}
		log.Debug("skipped output before hello", zap.String("line", printable.String(s)))
		if noise.Len() < 4096 {
			noise.WriteString(s + "\n")
		}
	}
	tooMuch := fmt.Errorf("%w: more than %d bytes of output and no hello", ErrAgent, maxNoise)
	carry := "" // the end of a cut line that may begin a marker
	for {
		piece, whole, err := readPiece(r)
		seen += len(piece)
		text := carry + piece
		carry = ""
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			skip(text)
			if noise.Len() > 0 {
				return nil, fmt.Errorf("%w: %w; it printed: %q", ErrAgent, ErrNoHello, tail(noise.String()))
			}
			return nil, fmt.Errorf("%w: %w: %v", ErrAgent, ErrNoHello, err)
		}
		at := findMarker(text, keys)
		if !whole {
			// The line goes on: a marker found, or the bytes that could
			// begin one, wait for the rest of it, unless that grows past
			// what a line may hold.
			keep := at
			if keep < 0 || len(text)-keep > maxLine {
				keep = max(0, len(text)-(longest-1))
			}
			skip(text[:keep])
			carry = text[keep:]
			if seen > maxNoise {
				return nil, tooMuch
			}
			continue
		}
		if at < 0 {
			skip(text)
			if seen > maxNoise {
				return nil, tooMuch
			}
			continue
		}
		skip(text[:at])
		line := text[at:]
		if rest, ok := strings.CutPrefix(line, keys[markError]); ok {
			return nil, fmt.Errorf("%w: %s", ErrAgent, printable.String(strings.TrimSpace(rest)))
		}
		if rest, ok := strings.CutPrefix(line, keys[markHello]); ok {
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
		skip(line)
		if seen > maxNoise {
			return nil, tooMuch
		}
	}
}

// The markers, in markerKeys' order.
const (
	markHello = iota
	markError
	markNeed
	markStale
)

// markerKeys returns the start of every line the first stage and the
// agent print before the hello: the line's kind, a space, this start's
// nonce and a space. The nonce is what makes a marker unambiguous, so
// that noise which merely contains a kind (a motd that quotes one, a
// line of another start) is never taken for one.
func markerKeys(nonce string) [4]string {
	var k [4]string
	for i, kind := range [4]string{markHello: HelloPrefix, markError: ErrorPrefix, markNeed: NeedPrefix, markStale: StalePrefix} {
		k[i] = kind + " " + nonce + " "
	}
	return k
}

// findMarker returns where the first of keys starts in s, or -1.
func findMarker(s string, keys [4]string) int {
	at := -1
	for _, k := range keys {
		if i := strings.Index(s, k); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 512 {
		s = "…" + s[len(s)-512:]
	}
	return s
}

// readPiece reads one line without its line ending (whole), or, of a line
// longer than maxLine, the next maxLine bytes or so (not whole).
func readPiece(r *bufio.Reader) (piece string, whole bool, err error) {
	var b []byte
	for {
		frag, err := r.ReadSlice('\n')
		b = append(b, frag...)
		if err == bufio.ErrBufferFull {
			if len(b) < maxLine {
				continue
			}
			return string(b), false, nil
		}
		if err != nil {
			return string(b), false, err
		}
		return strings.TrimRight(string(b), "\r\n"), true, nil
	}
}
