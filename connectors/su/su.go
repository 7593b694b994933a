// Package su starts an agent as another user through su(1), with the
// hybrid terminal of package become: the link on stdin/stdout, a PTY for
// the password prompt and su's messages.
package su

import (
	"context"
	"github.com/spindle-rpc/spindle/internal/lazyre"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/become"
)

// Options configures an su hop. It is msgpack-encoded by the controller
// and decoded by the agent that runs su; Password travels over the
// encrypted link and is never logged.
type Options struct {
	// User is the target user; default root.
	User string `msgpack:"user,omitempty"`
	// Password is the TARGET user's password (su asks for it unless the
	// caller is root). Without it a prompt fails the start at once.
	Password string `msgpack:"password,omitempty"`
	// Login passes -l (a login environment).
	Login bool `msgpack:"login,omitempty"`
	// Flags are extra su flags, placed before -c.
	Flags []string `msgpack:"flags,omitempty"`
	// Exe is the su program to run (a path, or a name looked up in
	// PATH); default "su".
	Exe string `msgpack:"exe,omitempty"`
	// Timeout bounds the start (password and handshake); default 30s.
	// su waits a few seconds (pam_faildelay) before reporting a wrong
	// password.
	Timeout time.Duration `msgpack:"timeout,omitempty"`
	// ContextName overrides the context's name (default "su:USER").
	ContextName string `msgpack:"context_name,omitempty"`
}

// Kind implements connectors.Remote.
func (o Options) Kind() string { return "su" }

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
	return "su:" + o.user()
}

// Argv is the command Start runs: su hands the command to the target
// user's login shell (which may be fish or tcsh), so it gets the whole
// one-line `exec sh -c '…'` first stage (become.Command), which any shell runs.
func (o Options) Argv() []string {
	argv := []string{"su"}
	if o.Exe != "" {
		argv[0] = o.Exe
	}
	if o.Login {
		argv = append(argv, "-l")
	}
	argv = append(argv, o.Flags...)
	return append(argv, "-c", become.Command, "--", o.user())
}

// Start implements connectors.Connector.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	if req.Name == "" {
		req.Name = o.Name()
	}
	return become.Start(ctx, req, o.Argv(), become.Prompter{
		Tool:     "su",
		Package:  "util-linux",
		Password: o.Password,
		IsPrompt: IsPrompt,
		Classify: Classify,
		Timeout:  o.Timeout,
		// PAM's misc_conv prompts on stderr and reads stdin.
		AnswerOnStdin: true,
	})
}

var promptRE = lazyre.New(`(?i)password[^\n]*:\s*$`)

// IsPrompt reports whether out ends with a password prompt ("Password: ").
func IsPrompt(out string) bool { return promptRE.MatchString(out) }

// The messages of util-linux su and shadow su (LC_ALL=C).
var classes = []struct {
	re  *lazyre.Regexp
	err error
}{
	{lazyre.New(`(?i)authentication failure|incorrect password|sorry`), become.ErrWrongPassword},
	{lazyre.New(`(?i)does not exist|unknown (login|user)`), become.ErrNoSuchUser},
	{lazyre.New(`(?i)permission denied|not allowed|account is currently not available|must be run from a terminal`), become.ErrNotAllowed},
}

// Classify maps su's terminal output to a become error kind.
func Classify(out string) error {
	for _, c := range classes {
		if c.re.MatchString(out) {
			return c.err
		}
	}
	return nil
}

func init() {
	connectors.Register("su", func() connectors.Remote { return &Options{} })
}

var (
	_ connectors.Remote = Options{}
	_ connectors.Remote = (*Options)(nil)
)
