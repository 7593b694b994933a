// Package ssh reaches a machine over SSH (golang.org/x/crypto/ssh) and
// starts the agent there through ONE session whose stdin/stdout then carry
// the link.
package ssh

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"go.uber.org/zap"
)

// HostKeyPolicy says what to do with a host key known_hosts does not have.
type HostKeyPolicy string

const (
	// HostKeyStrict refuses unknown and changed keys (the default).
	HostKeyStrict HostKeyPolicy = "yes"
	// HostKeyAcceptNew accepts and records unknown keys, refuses changed ones.
	HostKeyAcceptNew HostKeyPolicy = "accept-new"
	// HostKeyOff accepts any key but one known_hosts marks @revoked:
	// insecure, for throwaway test machines only.
	HostKeyOff HostKeyPolicy = "off"
	// HostKeyAsk (ssh's default) asks through Options.HostKeyPrompt whether
	// to trust an unknown key, and records it when the answer is yes or the
	// key's fingerprint; without a prompt (or under BatchMode) it refuses,
	// as HostKeyStrict does. Changed keys are always refused.
	HostKeyAsk HostKeyPolicy = "ask"
)

// ParseHostKeyPolicy reads a policy as ssh's StrictHostKeyChecking writes
// it (yes, ask, accept-new, no) or as Spindle names it (off); case does
// not matter.
func ParseHostKeyPolicy(v string) (HostKeyPolicy, error) {
	switch strings.ToLower(v) {
	case "yes", "true":
		return HostKeyStrict, nil
	case "ask":
		return HostKeyAsk, nil
	case "accept-new":
		return HostKeyAcceptNew, nil
	case "off", "no", "false":
		return HostKeyOff, nil
	}
	return "", fmt.Errorf("bad host key policy %q (want yes, ask, accept-new or no)", v)
}

// Options configures an SSH connection. Zero fields take their value from
// ssh_config (as `ssh` would resolve Host), then from ssh's defaults.
type Options struct {
	// Host is a host name or ssh_config Host alias.
	Host string
	// Port, User override ssh_config.
	Port int
	User string
	// ConfigFile replaces ~/.ssh/config (like ssh -F); "none" reads none.
	ConfigFile string
	// IdentityFiles are tried in order (like ssh -i), before ssh_config's.
	IdentityFiles []string
	// IdentitiesOnly: offer only the identity files, not every agent key.
	IdentitiesOnly *bool
	// PreferredAuthentications overrides ssh_config's: the auth methods to
	// try, in order, among publickey, keyboard-interactive and password
	// (those ssh_config turns off stay off).
	PreferredAuthentications []string
	// SendEnv adds patterns of this process's variables to send to the
	// session, and SetEnv NAME=VALUE pairs, to ssh_config's (the server's
	// AcceptEnv decides which it takes). The agent, and so every command
	// it runs, has them.
	SendEnv []string
	SetEnv  []string
	// CertificateFiles are OpenSSH certificates to offer (CertificateFile),
	// before ssh_config's; each with the private key it certifies, from an
	// identity file or the ssh-agent. KEY-cert.pub beside an identity
	// file is offered without being named.
	CertificateFiles []string
	// IdentityAgent overrides ssh_config's IdentityAgent: the ssh-agent
	// socket to use instead of $SSH_AUTH_SOCK ("none": no agent; "$VAR":
	// the socket named by that variable).
	IdentityAgent string
	// ConnectionAttempts overrides ssh_config's ConnectionAttempts: how
	// many TCP connects to try, a second apart, before giving up (ssh's
	// default: 1). Hops started by agents try as often.
	ConnectionAttempts int
	// AddKeysToAgent overrides ssh_config's AddKeysToAgent: yes, no, ask
	// or confirm, optionally followed by a lifetime (1h), or a lifetime
	// alone. A key loaded from an identity file is then handed to the
	// ssh-agent once it has signed for a login, so that the next
	// connection does not ask for its passphrase again. ask asks through
	// HostKeyPrompt first.
	AddKeysToAgent string
	// ForwardAgent overrides ssh_config's ForwardAgent for AgentToForward:
	// "yes", "no", or the socket of the agent to forward (as in
	// IdentityAgent). The connector itself forwards nothing: the caller
	// starts the forwarding on the context (agentfwd.Start), as the CLI does.
	ForwardAgent string
	// Password for password and keyboard-interactive auth. Never logged.
	Password string
	// PasswordPrompt, if set, is called when a password or key passphrase
	// is needed and none was given (the CLI asks on the terminal).
	PasswordPrompt func(prompt string) (string, error)
	// HostKeyPrompt, if set, asks the user a question about an unknown host
	// key under HostKeyAsk and returns the answer as typed (the CLI asks on
	// the terminal, echoing). A hop started by an agent asks it too, on the
	// controller; it may be called from several goroutines at once when
	// hops start in parallel.
	HostKeyPrompt func(question string) (string, error)
	// KnownHostsFiles replace ~/.ssh/known_hosts (UserKnownHostsFile).
	KnownHostsFiles []string
	// HostKeyPolicy: default from StrictHostKeyChecking (ssh's default there
	// is ask), else ask.
	HostKeyPolicy HostKeyPolicy
	// ConnectTimeout bounds TCP connect AND the SSH handshake and auth
	// (each hop's), not the time spent waiting for PasswordPrompt or
	// HostKeyPrompt, also for a hop started by an agent.
	// Default: ssh_config's ConnectTimeout, else 30s.
	ConnectTimeout time.Duration
	// KeepaliveInterval and KeepaliveCountMax detect a dead peer
	// (ServerAliveInterval/CountMax); defaults 15s and 3. A negative
	// interval turns keepalives off.
	KeepaliveInterval time.Duration
	KeepaliveCountMax int
	// ContextName overrides the context's name (default "ssh:HOST").
	ContextName string
	// ProxyJump overrides ssh_config's ProxyJump: "[user@]host[:port]"
	// hops separated by commas, reached in order by TCP forwarding (no
	// agent on them); "none" connects directly.
	ProxyJump string
	// ProxyCommand overrides ssh_config's ProxyCommand (and ProxyJump,
	// unless ProxyJump above is set): a command, run as ssh runs it (`exec
	// COMMAND` through $SHELL, else /bin/sh, with the %h %p %r %n tokens
	// expanded), whose stdin and stdout carry the connection; "none"
	// connects directly. It runs on the controller's machine, for the
	// controller's own connection: a hop started by an agent ignores it,
	// as it ignores ProxyJump (the chain of agents is the route).
	ProxyCommand string
	// Ciphers, MACs, KexAlgorithms and HostKeyAlgorithms override
	// ssh_config's lists of the same names, in ssh_config's syntax:
	// "+LIST" adds to x/crypto's defaults, "-LIST" removes from them,
	// "^LIST" puts LIST first, a plain LIST replaces them; names may be
	// patterns (* and ?). Names x/crypto does not implement are skipped
	// (logged at debug); a list left empty is an error. Unset, ssh_config's
	// lists apply (as ssh resolves them, system crypto policies included),
	// else x/crypto's defaults. Hops started by agents use them too.
	Ciphers, MACs, KexAlgorithms, HostKeyAlgorithms string
	// Agent supplies the agent binaries; default: the StartRequest's
	// (the controller's embedded agents).
	Agent bootstrap.Source
	// OwnConnection applies to a hop started by an agent
	// (Context.Connect): such hops to the same user@host:port share one
	// SSH connection per agent by default, each in a session of its own,
	// as OpenSSH's ControlMaster does; OwnConnection dials one for this
	// hop alone. The controller's own connections are never shared.
	OwnConnection bool
}

// AgentToForward resolves ForwardAgent (Options, else ssh_config) to the
// socket of the ssh-agent that `ssh` would forward to this host, or "" when
// it would forward none.
func (o Options) AgentToForward(ctx context.Context, log *zap.Logger) (string, error) {
	if log == nil {
		log = zap.NewNop()
	}
	s, err := o.settle(ctx, log)
	if err != nil {
		return "", err
	}
	return s.forwardAgent, nil
}

// Forwards are the port forwardings ssh_config asks for a host, in the
// syntax of ssh's (and spindle forward's) -L, -R and -D:
// [BIND:]PORT:HOST:HOSTPORT (either side may be a Unix socket path) and
// [BIND:]PORT.
type Forwards struct {
	Local, Remote, Dynamic []string
	// Skipped are the ones Spindle does not do (a DynamicForward on a
	// Unix socket), as ssh_config gives them, for a warning.
	Skipped []string
}

// ConfigForwards returns ssh_config's LocalForward, RemoteForward and
// DynamicForward for this host, as ssh would apply them.
func (o Options) ConfigForwards(ctx context.Context, log *zap.Logger) (Forwards, error) {
	if log == nil {
		log = zap.NewNop()
	}
	s, err := o.settle(ctx, log)
	if err != nil {
		return Forwards{}, err
	}
	return s.forwards, nil
}

// ConfigEscapeChar returns ssh_config's EscapeChar for this host as
// written ("~", "^]", "none"), or "" when the config leaves ssh's
// default. The connector has no use for it: a terminal client (spindle
// shell) does.
func (o Options) ConfigEscapeChar(ctx context.Context, log *zap.Logger) (string, error) {
	if log == nil {
		log = zap.NewNop()
	}
	s, err := o.settle(ctx, log)
	if err != nil {
		return "", err
	}
	return s.escapeChar, nil
}

// configForwards turns hc's forwardings into ssh's -L/-R/-D syntax.
func configForwards(hc *hostConfig) Forwards {
	var f Forwards
	join := func(v string) string { return strings.Join(strings.Fields(v), ":") }
	socketListens := map[string]bool{}
	for _, v := range hc.LocalForwards {
		f.Local = append(f.Local, join(v))
		if w := strings.Fields(v); len(w) > 0 {
			socketListens[w[0]] = true
		}
	}
	for _, v := range hc.RemoteForwards {
		f.Remote = append(f.Remote, join(v))
	}
	for _, v := range hc.DynamicForwards {
		switch {
		case socketListens[v]:
			// ssh -G prints a LocalForward on a socket as a
			// DynamicForward too: not the user's.
		case strings.Contains(v, "/"):
			f.Skipped = append(f.Skipped, "DynamicForward "+v)
		default:
			f.Dynamic = append(f.Dynamic, join(v))
		}
	}
	return f
}
