// Package sudo starts an agent as another user through sudo(8), with the
// hybrid terminal of package become: the link on stdin/stdout, a PTY for
// the password prompt and sudo's messages.
package sudo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"github.com/spindle-rpc/spindle/internal/lazyre"
	"strings"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/become"
)

// Options configures a sudo hop. It is msgpack-encoded by the controller
// and decoded by the agent that runs sudo; Password travels over the
// encrypted link and is never logged.
type Options struct {
	// User is the target user; default root.
	User string `msgpack:"user,omitempty"`
	// Password answers sudo's prompt. Without it sudo runs with -n and
	// fails at once if it needs one.
	Password string `msgpack:"password,omitempty"`
	// PreserveEnv passes -E.
	PreserveEnv bool `msgpack:"preserve_env,omitempty"`
	// SetHome passes -H (HOME of the target user). Nil means true, like
	// Ansible's default become flags.
	SetHome *bool `msgpack:"set_home,omitempty"`
	// Login gives the first stage a login environment like -i: it runs
	// as `sh -l` (reading /etc/profile and ~/.profile) in the target's
	// home. (sudo -i itself, e.g. in Flags, breaks the first stage: it
	// hands the command to the login shell with $ unescaped.)
	Login bool `msgpack:"login,omitempty"`
	// Flags are extra sudo flags, placed before `--`.
	Flags []string `msgpack:"flags,omitempty"`
	// Exe is the sudo program to run (a path, or a name looked up in
	// PATH); default "sudo".
	Exe string `msgpack:"exe,omitempty"`
	// Timeout bounds the start (password and handshake); default 30s.
	Timeout time.Duration `msgpack:"timeout,omitempty"`
	// ContextName overrides the context's name (default "sudo:USER").
	ContextName string `msgpack:"context_name,omitempty"`
}

// Kind implements connectors.Remote.
func (o Options) Kind() string { return "sudo" }

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
	return "sudo:" + o.user()
}

// Argv is the command Start runs, with become.Script standing for the
// first stage and prompt for sudo's -p prompt.
func (o Options) Argv(prompt string) []string {
	argv := []string{exe(o.Exe, "sudo")}
	if o.Password == "" {
		argv = append(argv, "-n")
	}
	argv = append(argv, "-u", o.user())
	if o.SetHome == nil || *o.SetHome {
		argv = append(argv, "-H")
	}
	if o.PreserveEnv {
		argv = append(argv, "-E")
	}
	argv = append(argv, "-p", prompt)
	argv = append(argv, o.Flags...)
	if o.Login {
		// Not sudo -i: it hands the command to the login shell with
		// every character but $ backslash-escaped, so the shell expands
		// the first stage's variables. A login sh reads the profile and
		// starts in the target's home instead, as -i would.
		return append(argv, "--", "sh", "-l", "-c", "cd 2>/dev/null; "+become.Script)
	}
	return append(argv, "--", "sh", "-c", become.Script)
}

// Start implements connectors.Connector.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	if req.Name == "" {
		req.Name = o.Name()
	}
	var b [6]byte
	rand.Read(b[:])
	prompt := "[spindle-sudo-" + hex.EncodeToString(b[:]) + "] password: "
	return become.Start(ctx, req, o.Argv(prompt), become.Prompter{
		Tool:     "sudo",
		Package:  "sudo",
		Password: o.Password,
		IsPrompt: func(out string) bool { return containsPrompt(out, prompt) },
		Classify: Classify,
		Timeout:  o.Timeout,
	})
}

// exe is the program to run: name unless the caller named another.
func exe(given, name string) string {
	if given != "" {
		return given
	}
	return name
}

func containsPrompt(out, prompt string) bool {
	return strings.Contains(out, strings.TrimSpace(prompt))
}

// The messages of sudo 1.8/1.9 (LC_ALL=C), most specific first.
var classes = []struct {
	re  *lazyre.Regexp
	err error
}{
	{lazyre.New(`(?i)a password is required`), become.ErrPasswordRequired},
	{lazyre.New(`(?i)incorrect password attempt|Sorry, try again`), become.ErrWrongPassword},
	{lazyre.New(`(?i)you must have a tty to run sudo|a terminal is required`), become.ErrNeedTTY},
	{lazyre.New(`(?i)is not in the sudoers file|is not allowed to execute|is not allowed to run sudo|may not run sudo`), become.ErrNotAllowed},
	{lazyre.New(`(?i)unknown user`), become.ErrNoSuchUser},
}

// Classify maps sudo's terminal output to a become error kind.
func Classify(out string) error {
	for _, c := range classes {
		if c.re.MatchString(out) {
			return c.err
		}
	}
	return nil
}

func init() {
	connectors.Register("sudo", func() connectors.Remote { return &Options{} })
}

var (
	_ connectors.Remote = Options{}
	_ connectors.Remote = (*Options)(nil)
)
