package errkind

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a failure of one kind, in one place.
//
// Its message is "chain: op: text", each part present when known, where
// text is Msg, else the cause's message, else the kind's. The op is left
// out when the text already begins with it: handlers often name their
// method ("exec.Start ls: not found"), and saying it twice only makes the
// message harder to read. The kind itself is not printed: the text says
// what happened in its own words ("open /etc/shadow: permission denied").
//
// errors.Is matches Kind and whatever Err matches; errors.As reaches into
// Err.
type Error struct {
	// Chain names the context the error happened in, e.g.
	// "bastion → web1 → sudo:root"; empty for an error not tied to a
	// context, such as a handler's on an agent or a connector's.
	Chain string
	// Op is the method or operation that failed, e.g. "exec.Run"; empty
	// for connection errors.
	Op string
	// Kind is one of the kinds of this package, or nil when Err carries
	// its own (an rpc.RemoteError, or an error wrapping a kind).
	Kind error
	// Msg, when set, is the text in place of Err's: a message that says
	// what to do, while Err keeps the cause for errors.Is and errors.As.
	Msg string
	// Err is the cause.
	Err error
}

func (e *Error) Error() string {
	text := e.Msg
	if text == "" && e.Err != nil {
		text = e.Err.Error()
	}
	if text == "" && e.Kind != nil {
		text = e.Kind.Error()
	}
	if e.Op != "" && !namesOp(text, e.Op) {
		text = e.Op + ": " + text
	}
	if e.Chain != "" {
		text = e.Chain + ": " + text
	}
	return text
}

// namesOp reports whether text starts with op as a word.
func namesOp(text, op string) bool {
	rest, ok := strings.CutPrefix(text, op)
	return ok && (rest == "" || rest[0] == ' ' || rest[0] == ':')
}

// Unwrap gives the kind and the cause, so that errors.Is matches either.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Errorf makes an error of kind (one of this package's) whose text is
// formatted as fmt.Errorf does; %w keeps a cause. An agent's handler
// returns it so that the caller's errors.Is finds the kind after the
// error has crossed the wire.
func Errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// In places err in a context chain and operation: err itself when it
// names a chain already, a copy naming them when it is an *Error that
// names none (a handler's or a connector's), else a new *Error around it.
// An op already set is kept when op is empty.
func In(chain, op string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		if e.Chain != "" {
			return err
		}
		c := *e
		c.Chain = chain
		if op != "" {
			c.Op = op
		}
		return &c
	}
	var e *Error
	if errors.As(err, &e) && e.Chain != "" {
		return err
	}
	return &Error{Chain: chain, Op: op, Err: err}
}
