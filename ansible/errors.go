package ansible

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/spindle-rpc/spindle/connectors/become"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/hostvars"
)

// The error kinds of a response (PROTOCOL.md), each raised by the plugin
// as its own Ansible exception.
const (
	KindUnreachable     = "unreachable"               // AnsibleConnectionFailure: the task is UNREACHABLE
	KindBecomeIncorrect = "become_password_incorrect" // "Incorrect sudo password"
	KindBecomeMissing   = "become_password_missing"   // "Missing sudo password"
	KindBecomeFailed    = "become_failed"
	KindTimeout         = "timeout"
	KindNotFound        = "not_found" // AnsibleFileNotFound
	KindVersion         = "version"   // the plugin restarts the daemon
	KindBadRequest      = "bad_request"
	KindInternal        = "internal"
)

// Error is a response's error.
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Kind + ": " + e.Message }

// stage is where a request failed, which decides most of its kind.
type stage int

const (
	stageResolve stage = iota // reading the host's variables
	stageHost                 // connecting the host's chain
	stageBecome               // starting the become child on it
	stageOp                   // the operation on the connection
	stageWrite                // put's operation: a missing path on the host is not the source's
)

// classify turns err, from stage, into the response's error: its kind
// for the plugin, and a message that names the chain and never a
// password.
func classify(st stage, err error, h *hostvars.Host, b *hostvars.Become) *Error {
	kind := KindInternal
	switch {
	case st == stageResolve || errors.Is(err, errkind.ErrBadArgs) && st != stageOp && st != stageWrite:
		kind = KindBadRequest
	case errors.Is(err, context.Canceled) || errors.Is(err, errkind.ErrCanceled):
		kind = KindInternal // the client went away or the daemon stops: nobody reads it
	case st == stageHost:
		// Refused logins and host keys, names that do not resolve, ports
		// that do not answer, timeouts: what ssh reports as UNREACHABLE.
		kind = KindUnreachable
	case st == stageBecome:
		kind = becomeKind(err, b)
	case errors.Is(err, errkind.ErrDisconnected) || errors.Is(err, errkind.ErrStalled):
		kind = KindUnreachable
	case errors.Is(err, errkind.ErrTimeout):
		kind = KindTimeout
	case st == stageOp && (errors.Is(err, errkind.ErrNotFound) || errors.Is(err, os.ErrNotExist)):
		kind = KindNotFound
	case st == stageWrite && errors.Is(err, os.ErrNotExist) && !errors.Is(err, errkind.ErrRemote):
		kind = KindNotFound
	}
	msg := err.Error()
	for _, pw := range secrets(h, b) {
		msg = strings.ReplaceAll(msg, pw, "********")
	}
	if hint := hints[kind]; hint != "" {
		msg += " (" + hint + ")"
	}
	return &Error{Kind: kind, Message: msg}
}

// becomeKind tells a become child's failure apart. The become connector
// runs on the host's agent, so its error crossed the wire: its kind
// (errkind.ErrAuth) and text survive, the Go error values do not; the
// text of become's errors says which.
func becomeKind(err error, b *hostvars.Become) string {
	msg := err.Error()
	switch {
	case errors.Is(err, errkind.ErrDisconnected) || errors.Is(err, errkind.ErrStalled):
		return KindUnreachable
	case errors.Is(err, become.ErrPasswordRequired) || strings.Contains(msg, become.ErrPasswordRequired.Error()):
		return KindBecomeMissing
	case errors.Is(err, become.ErrWrongPassword) || strings.Contains(msg, become.ErrWrongPassword.Error()):
		return KindBecomeIncorrect
	case errors.Is(err, errkind.ErrAuth):
		if b == nil || b.Password == "" {
			return KindBecomeMissing
		}
		return KindBecomeIncorrect
	case errors.Is(err, errkind.ErrTimeout):
		return KindTimeout
	}
	return KindBecomeFailed
}

// secrets are the passwords a message must not show. Those shorter than
// three characters would blank out ordinary words, and say little.
func secrets(h *hostvars.Host, b *hostvars.Become) []string {
	var out []string
	if h != nil && len(h.Password) >= 3 {
		out = append(out, h.Password)
	}
	if b != nil && len(b.Password) >= 3 {
		out = append(out, b.Password)
	}
	return out
}

// hints say what the user can do.
var hints = map[string]string{
	KindBecomeIncorrect: "check become_password / --ask-become-pass",
	KindBecomeMissing:   "set become_password or run with --ask-become-pass",
	KindUnreachable:     "check that the host is reachable with these settings, e.g. with spindle run",
}
