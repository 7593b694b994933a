// Package proto is the protocol between the spindle CLI and its
// daemon (spindle daemon), which keeps connections open between
// commands, as OpenSSH's ControlPersist does.
//
// A client connects to the daemon's Unix socket (0600, in a 0700
// directory; the daemon checks the peer's uid too) and runs a yamux
// session over it, as its client. It opens four streams, in order:
// control, stdin, stdout and stderr, each starting with its Role byte.
// The control stream carries frames (a 4-byte big-endian length, then one
// msgpack Msg): the client's KindRun first; then, in either direction,
// KindPrompt from the daemon (a question for the client's terminal) and
// the client's KindAnswer, the client's KindSignal, the daemon's
// KindStarted once the command runs, the client's KindResize and
// KindClose for a terminal command, and last the daemon's KindExit, sent
// once stdout and stderr are closed. Stdin, stdout and stderr carry raw
// bytes; closing stdin is end of file. A client sends stdin only after
// KindStarted: until then its terminal may be answering a question.
//
// The daemon belongs to one user and one environment (its socket's name
// hashes both, with the CLI's version): a client never talks to a daemon
// that would connect with another SSH agent, ssh_config or spindle.
package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/spindle-rpc/spindle/internal/wire"
)

// MaxFrame bounds a control frame. A Run holds a command line and
// connection flags: it leaves 1 MiB for the flags above the largest
// command line an agent takes (router.DefaultMaxFrameSize, which the
// daemon's own call then enforces with an error naming it). Anything
// larger is an error, not an allocation.
const MaxFrame = 5 << 20

// Role is the first byte of each stream.
type Role byte

const (
	RoleControl Role = 'c'
	RoleStdin   Role = 'i'
	RoleStdout  Role = 'o'
	RoleStderr  Role = 'e'
)

// Kinds of Msg.
const (
	KindRun     = "run"
	KindPrompt  = "prompt"
	KindAnswer  = "answer"
	KindSignal  = "signal"
	KindStarted = "started"
	KindResize  = "resize" // the client's terminal changed size
	KindClose   = "close"  // the client's user typed <escape>.
	KindExit    = "exit"
)

// Msg is one control frame; Kind says which fields matter.
type Msg struct {
	Kind string `msgpack:"kind"`
	Run  *Run   `msgpack:"run,omitempty"` // KindRun

	// KindPrompt: Text is the question; Echo says whether the answer is
	// shown as typed (a host key's confirmation) or not (a password).
	// KindAnswer: Text is the answer, or Err why there is none.
	Text string `msgpack:"text,omitempty"`
	Echo bool   `msgpack:"echo,omitempty"`
	Err  string `msgpack:"err,omitempty"`

	Signal int `msgpack:"signal,omitempty"` // KindSignal: its number

	// KindStarted of a terminal command: Text is the context's name, and
	// Escape the escape character the client acts on ("~", "^]", "none").
	Escape string `msgpack:"escape,omitempty"`

	// KindResize: the client's terminal's size.
	Rows uint16 `msgpack:"rows,omitempty"`
	Cols uint16 `msgpack:"cols,omitempty"`

	// KindExit: Code is the CLI's exit status, and Text what the CLI
	// prints on stderr about its failure (nothing after a command that
	// ran), as is.
	Code int `msgpack:"code,omitempty"`
}

// Run asks the daemon to run Argv on Target with the connection flags the
// client was given; paths in them are absolute.
type Run struct {
	Version string   `msgpack:"version"` // the client's; must be the daemon's
	Target  string   `msgpack:"target"`
	Argv    []string `msgpack:"argv"`
	Via     string   `msgpack:"via,omitempty"` // -J

	ConfigFile        string   `msgpack:"config,omitempty"`     // -F
	Identities        []string `msgpack:"identities,omitempty"` // -i
	Options           []string `msgpack:"options,omitempty"`    // -o
	HostKeyPolicy     string   `msgpack:"host_key_policy,omitempty"`
	PasswordEnv       string   `msgpack:"password_env,omitempty"`
	BecomePasswordEnv string   `msgpack:"become_password_env,omitempty"`
	AskBecomePass     bool     `msgpack:"ask_become_pass,omitempty"`
	ForwardAgent      bool     `msgpack:"forward_agent,omitempty"` // -A

	// A terminal command (spindle shell): the remote side gets a
	// pseudo-terminal of Term, Rows and Cols; Escape is the client's -e
	// (or -o EscapeChar), "" for ssh_config's or ~.
	PTY    bool   `msgpack:"pty,omitempty"`
	Term   string `msgpack:"term,omitempty"`
	Rows   uint16 `msgpack:"rows,omitempty"`
	Cols   uint16 `msgpack:"cols,omitempty"`
	Escape string `msgpack:"escape,omitempty"`

	// A copy (spindle cp) instead of a command: Target and Argv are
	// unused.
	Copy *Copy `msgpack:"copy,omitempty"`

	TimeoutNS   int64 `msgpack:"timeout_ns,omitempty"` // --timeout, for a new connection
	Interactive bool  `msgpack:"interactive,omitempty"`
	Verbose     int   `msgpack:"verbose,omitempty"`    // the client's -v: its request's logs go to its stderr too // the client can ask its user
	PersistNS   int64 `msgpack:"persist_ns,omitempty"` // idle time before the daemon exits
	// RawLogs is the client's --raw-logs: its connections show agents'
	// log records unescaped (connections are kept apart by it).
	RawLogs bool `msgpack:"raw_logs,omitempty"`
}

// WriteMsg writes m as one frame.
func WriteMsg(w io.Writer, m *Msg) error {
	b, err := wire.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > MaxFrame {
		return fmt.Errorf("daemon message of %d bytes exceeds the daemon's frame limit of %d", len(b), MaxFrame)
	}
	frame := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(frame, uint32(len(b)))
	copy(frame[4:], b)
	_, err = w.Write(frame)
	return err
}

// ErrFrame is wrapped by every malformed frame.
var ErrFrame = errors.New("bad daemon frame")

// ReadMsg reads one frame. A length over MaxFrame or a payload that does
// not decode is an error wrapping ErrFrame; the stream is then unusable.
func ReadMsg(r io.Reader) (*Msg, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return nil, fmt.Errorf("%w: %d bytes announced, at most %d", ErrFrame, n, MaxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %v", ErrFrame, err)
	}
	m := &Msg{}
	if err := wire.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFrame, err)
	}
	if m.Kind == KindRun && m.Run == nil {
		return nil, fmt.Errorf("%w: a run without its request", ErrFrame)
	}
	return m, nil
}

// Copy is a spindle cp run by the daemon: either side a TARGET and a
// path, or a local (absolute) path with no target.
type Copy struct {
	SrcTarget string `msgpack:"src_target,omitempty"`
	SrcPath   string `msgpack:"src_path"`
	DstTarget string `msgpack:"dst_target,omitempty"`
	DstPath   string `msgpack:"dst_path"`
	Recursive bool   `msgpack:"recursive,omitempty"`
	Preserve  bool   `msgpack:"preserve,omitempty"`
	Parallel  int    `msgpack:"parallel,omitempty"`
	// Progress: the client's stderr is a terminal, so a progress bar
	// is drawn on the stderr stream.
	Progress bool `msgpack:"progress,omitempty"`
}
