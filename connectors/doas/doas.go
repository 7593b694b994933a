// Package doas starts an agent as another user through doas(1) (OpenBSD's
// doas, or opendoas on Linux), with the hybrid terminal of package become:
// the link on stdin/stdout, a PTY for the password prompt and doas's
// messages.
package doas

import (
	"context"
	"github.com/spindle-rpc/spindle/internal/lazyre"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/become"
)

// Options configures a doas hop. It is msgpack-encoded by the controller
// and decoded by the agent that runs doas; Password travels over the
// encrypted link and is never logged.
type Options struct {
	// User is the target user; default root.
	User string `msgpack:"user,omitempty"`
	// Password answers doas's prompt (the invoking user's password).
	// Without it doas runs with -n and fails at once if it needs one.
	Password string `msgpack:"password,omitempty"`
	// Flags are extra doas flags, placed before `--`.
	Flags []string `msgpack:"flags,omitempty"`
	// Exe is the doas program to run (a path, or a name looked up in
	// PATH); default "doas".
	Exe string `msgpack:"exe,omitempty"`
	// Timeout bounds the start (password and handshake); default 30s.
	Timeout time.Duration `msgpack:"timeout,omitempty"`
	// ContextName overrides the context's name (default "doas:USER").
	ContextName string `msgpack:"context_name,omitempty"`
}

// Kind implements connectors.Remote.
func (o Options) Kind() string { return "doas" }

func (o Options) user() string {
	if o.User == "" {
		return "root"
	}
	return o.User
}

// Name implements connectors.Connector.
func (o Options) Name() string {
	if o.ContextName != "" {
		return o.ContextName
	}
	return "doas:" + o.user()
}

// Argv is the command Start runs, with become.Script standing for the
// first stage.
func (o Options) Argv() []string {
	argv := []string{"doas"}
	if o.Exe != "" {
		argv[0] = o.Exe
	}
	if o.Password == "" {
		argv = append(argv, "-n")
	}
	argv = append(argv, "-u", o.user())
	argv = append(argv, o.Flags...)
	return append(argv, "--", "sh", "-c", become.Script)
}

// Start implements connectors.Connector.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	if req.Name == "" {
		req.Name = o.Name()
	}
	return become.Start(ctx, req, o.Argv(), become.Prompter{
		Tool:     "doas",
		Package:  "opendoas",
		Password: o.Password,
		IsPrompt: IsPrompt,
		Classify: Classify,
		Timeout:  o.Timeout,
	})
}

var promptRE = lazyre.New(`(?i)password[^\n]*:\s*$`)

// IsPrompt reports whether out ends with doas's prompt
// ("doas (user@host) password: ").
func IsPrompt(out string) bool { return promptRE.MatchString(out) }

// The messages of opendoas 6.8 and OpenBSD doas.
var classes = []struct {
	re  *lazyre.Regexp
	err error
}{
	{lazyre.New(`(?i)authentication required|authorization required`), become.ErrPasswordRequired},
	{lazyre.New(`(?i)authentication failed`), become.ErrWrongPassword},
	{lazyre.New(`(?i)unknown user`), become.ErrNoSuchUser},
	{lazyre.New(`(?i)operation not permitted|not permitted|doas is not enabled`), become.ErrNotAllowed},
}

// Classify maps doas's terminal output to a become error kind.
func Classify(out string) error {
	for _, c := range classes {
		if c.re.MatchString(out) {
			return c.err
		}
	}
	return nil
}

func init() {
	connectors.Register("doas", func() connectors.Remote { return &Options{} })
}

var (
	_ connectors.Remote = Options{}
	_ connectors.Remote = (*Options)(nil)
)
