package cli

import (
	"io"
	"strconv"

	"github.com/spf13/pflag"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/target"
	"go.uber.org/zap"
)

// ConnectFlags are the CLI's connection flags (-F, -i, -o,
// --host-key-policy, --password-env, and the become flags), for another
// command that connects as the CLI does: cmd/spindle-bench.
type ConnectFlags struct{ o connectOptions }

// AddFlags adds the flags to pf.
func (f *ConnectFlags) AddFlags(pf *pflag.FlagSet) { f.o.addFlags(pf) }

// SetInteractive says whether a password or host key question may be put
// on the terminal (standard input is one).
func (f *ConnectFlags) SetInteractive(on bool) { f.o.interactive = on }

// ForConfig is f for the ssh_config file cfg alone: only -F cfg, with
// f's --password-env and terminal.
func (f *ConnectFlags) ForConfig(cfg string) *ConnectFlags {
	return &ConnectFlags{o: connectOptions{configFile: cfg, passwordEnv: f.o.passwordEnv, interactive: f.o.interactive}}
}

// SSHOptions are the ssh connector's options for the hop a, as the CLI
// builds them; an error is a usage error (ExitCode).
func (f *ConnectFlags) SSHOptions(a target.SSHAddr) (ssh.Options, error) {
	so, err := f.o.sshOptions(a)
	if err != nil {
		return so, &usageError{cmd: "spindle", err: err}
	}
	return so, nil
}

// TargetOptions are the options of t's connectors, as the CLI builds
// them.
func (f *ConnectFlags) TargetOptions(t target.Target) (target.Options, error) {
	return f.o.targetOptions(t)
}

// OpenSSHArgs are ssh(1)'s options for the flags and a hop, and its
// destination argument.
func (f *ConnectFlags) OpenSSHArgs(a target.SSHAddr) (args []string, dest string) {
	o := &f.o
	if o.configFile != "" {
		args = append(args, "-F", o.configFile)
	}
	for _, id := range o.identities {
		args = append(args, "-i", id)
	}
	for _, kv := range o.sshOpts {
		args = append(args, "-o", kv)
	}
	if o.hostKeyPolicy != "" {
		v := o.hostKeyPolicy
		if v == "off" {
			v = "no"
		}
		args = append(args, "-o", "StrictHostKeyChecking="+v)
	}
	if a.Port != 0 {
		args = append(args, "-p", strconv.Itoa(a.Port))
	}
	if a.User != "" {
		args = append(args, "-l", a.User)
	}
	return args, a.Host
}

// Args are the spindle command line's flags that give f's SSH settings.
func (f *ConnectFlags) Args() []string {
	o := &f.o
	var args []string
	if o.configFile != "" {
		args = append(args, "-F", o.configFile)
	}
	for _, id := range o.identities {
		args = append(args, "-i", id)
	}
	for _, kv := range o.sshOpts {
		args = append(args, "-o", kv)
	}
	if o.hostKeyPolicy != "" {
		args = append(args, "--host-key-policy", o.hostKeyPolicy)
	}
	if o.passwordEnv != "" {
		args = append(args, "--password-env", o.passwordEnv)
	}
	return args
}

// ExitCode is the exit status the CLI gives err.
func ExitCode(err error) int { return exitCode(err) }

// UsageError marks err as a bad flag or argument of cmd: ExitCode 2.
func UsageError(cmd string, err error) error { return &usageError{cmd: cmd, err: err} }

// Logger is the CLI's logger: on w, at the level of -v verbose.
func Logger(w io.Writer, verbose int) *zap.Logger { return zap.New(consoleCore(w, verbose)) }
