package target

import (
	"errors"
	"fmt"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/errkind"
)

// Hop is one step of a target chain.
type Hop struct {
	Kind string // "local", "ssh", "sudo", "docker", …
	Arg  string // what follows "kind:", or the bare host; "" for none
}

// String is the hop's canonical form: "kind" or "kind:arg". Two hops with
// the same string lead to the same place from the same previous hop.
func (h Hop) String() string {
	if h.Arg == "" {
		return h.Kind
	}
	return h.Kind + ":" + h.Arg
}

// Target is a parsed chain string.
type Target struct {
	Raw  string // as given to Parse
	Hops []Hop
}

func (t Target) String() string { return t.Raw }

// Has reports whether any of t's hops is of kind.
func (t Target) Has(kind string) bool {
	for _, h := range t.Hops {
		if h.Kind == kind {
			return true
		}
	}
	return false
}

// Step is one connector of a chain and the hop it comes from. A chain
// whose first hop is a become or container hop ("sudo:postgres" alone)
// starts with an implicit Hop{Kind: "local"} step: the agent on this
// machine that starts it.
type Step struct {
	Hop       Hop
	Connector spindle.Connector
}

// Options configure the connectors Target.Steps builds. The caller
// supplies everything: the package reads no flags, environment variables
// or terminals.
type Options struct {
	// SSH is the base of every SSH hop's options. A copy is made per hop,
	// with the hop's host, and the hop's user and port when it names them
	// (they win over SSH.User and SSH.Port); whatever stays zero is
	// resolved through ssh_config (SSH.ConfigFile, else ~/.ssh/config) by
	// the connector, as ssh does. SSH.PasswordPrompt and
	// SSH.HostKeyPrompt are how an SSH hop asks for a password or a key
	// passphrase, and about an unknown host key; nil: it does not ask.
	SSH ssh.Options

	// BecomePassword returns the password of a become hop (kind "sudo",
	// "su" or "doas", to become user). It is called once per become hop,
	// while Steps builds the chain. Nil, or "": no password; sudo and doas
	// then run non-interactively and fail at once if the target needs one.
	BecomePassword func(kind, user string) (string, error)
}

// ErrBadTarget is matched (errors.Is) by every *ParseError.
var ErrBadTarget = errors.New("bad target")

// What a *ParseError can say is wrong, for errors.Is.
var (
	ErrEmpty       = errors.New("empty target or hop")
	ErrUnknownKind = errors.New("unknown hop kind")
	ErrArgument    = errors.New("bad hop argument")   // missing, unwanted or malformed
	ErrPlacement   = errors.New("hop in a bad place") // first-only, or not as the first
	ErrAddress     = errors.New("bad SSH address")
)

// ParseError is a chain string that Parse (or Target.Steps, for a Target
// built by hand) refuses.
type ParseError struct {
	Raw string // the whole target as given
	// Hop is the 1-based position of the hop at fault; 0 when the target
	// as a whole is (empty, no hops).
	Hop int
	// Err says what is wrong, in words, and wraps one of ErrEmpty,
	// ErrUnknownKind, ErrArgument, ErrPlacement or ErrAddress.
	Err error
}

func (e *ParseError) Error() string { return fmt.Sprintf("%v %q: %v", ErrBadTarget, e.Raw, e.Err) }

func (e *ParseError) Unwrap() error { return e.Err }

// Is makes every ParseError match ErrBadTarget and, for callers that test
// only the project's error kinds, errkind.ErrBadArgs.
func (e *ParseError) Is(target error) bool {
	return target == ErrBadTarget || target == errkind.ErrBadArgs
}

// reason is a ParseError's Err: a message of its own, wrapping the
// sentinel of its kind.
type reason struct {
	kind error
	msg  string
}

func (r *reason) Error() string { return r.msg }
func (r *reason) Unwrap() error { return r.kind }

func parseErr(raw string, hop int, kind error, format string, args ...any) *ParseError {
	return &ParseError{Raw: raw, Hop: hop, Err: &reason{kind: kind, msg: fmt.Sprintf(format, args...)}}
}
