package hostvars

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/target"
)

// Host is one inventory host's connection variables, as resolved by
// Ansible (the names in the comments) or by an inventory reader. Zero
// fields are unset. The JSON names are the Ansible endpoint's.
type Host struct {
	Name           string `json:"name"`             // inventory_hostname
	Address        string `json:"address"`          // ansible_host; default Name
	Port           int    `json:"port"`             // ansible_port
	User           string `json:"user"`             // ansible_user
	Password       string `json:"password"`         // ansible_password, ansible_ssh_pass; never logged
	PrivateKeyFile string `json:"private_key_file"` // ansible_ssh_private_key_file
	// SSHArgs, SSHCommonArgs and SSHExtraArgs are shell-quoted ssh
	// arguments (ansible_ssh_args, ansible_ssh_common_args,
	// ansible_ssh_extra_args): -o KEY=VALUE or -o "KEY VALUE", -i, -l,
	// -p, -F, -J, -A. Control* options and flags that change nothing
	// for Spindle are ignored (Resolved.Ignored lists them).
	SSHArgs       string `json:"ssh_args"`
	SSHCommonArgs string `json:"ssh_common_args"`
	SSHExtraArgs  string `json:"ssh_extra_args"`
	// HostKeyChecking false accepts any host key (ssh's
	// StrictHostKeyChecking=no); true or nil leaves it to the arguments
	// and ssh_config.
	HostKeyChecking *bool `json:"host_key_checking"`
	Timeout         int   `json:"timeout"` // seconds to connect; 0: ssh_config's, else 30
	// Via is a chain of hops before the host (ansible_spindle_via):
	// "bastion", "admin@bastion:2222,sudo".
	Via string `json:"via"`
	// Target replaces the host's own SSH hop (ansible_spindle_target):
	// "docker:app1", "sudo:app". The chain is then Via + Target, and
	// User and Port (which name the host's own SSH hop) are not used:
	// an SSH hop in Target names its own ("ssh:deploy@web1:2222").
	Target string `json:"target"`
}

// Resolved is what a Host connects with.
type Resolved struct {
	// Target is the chain: the via hops, then the host's own.
	Target target.Target
	// SSH is the base of every SSH hop's options (target.Options.SSH).
	SSH ssh.Options
	// Ignored are the SSH arguments that change nothing here, as given
	// (for a log line: a user who wonders why ControlPersist does
	// nothing).
	Ignored []string
}

// Resolve turns h into a chain and SSH options. Its errors name the
// variable at fault and match errkind.ErrBadArgs.
func (h Host) Resolve() (*Resolved, error) {
	var s sshSettings
	bad := func(err error) (*Resolved, error) {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "host %s: %v", h.Name, err)
	}
	if err := s.args("ssh_args", h.SSHArgs); err != nil {
		return bad(err)
	}
	// The variables Ansible's ssh connection turns into -o options,
	// in its order: ssh_args set before them win.
	if h.HostKeyChecking != nil && !*h.HostKeyChecking {
		s.config("StrictHostKeyChecking", "no") //nolint:errcheck // a valid value
	}
	if h.Port != 0 {
		if err := s.config("Port", fmt.Sprint(h.Port)); err != nil {
			return bad(fmt.Errorf("ansible_port: %w", err))
		}
	}
	if h.PrivateKeyFile != "" {
		s.o.IdentityFiles = append(s.o.IdentityFiles, h.PrivateKeyFile)
	}
	if h.User != "" {
		s.config("User", h.User) //nolint:errcheck // any string
	}
	if h.Timeout < 0 {
		return bad(fmt.Errorf("timeout: %d seconds", h.Timeout))
	}
	if h.Timeout > 0 && !s.timeoutSet {
		s.o.ConnectTimeout, s.timeoutSet = time.Duration(h.Timeout)*time.Second, true
	}
	if err := s.args("ssh_common_args", h.SSHCommonArgs); err != nil {
		return bad(err)
	}
	if err := s.args("ssh_extra_args", h.SSHExtraArgs); err != nil {
		return bad(err)
	}
	s.o.Password = h.Password

	own := h.Target
	if own == "" {
		addr := h.Address
		if addr == "" {
			addr = h.Name
		}
		if addr == "" {
			return bad(fmt.Errorf("no address: neither ansible_host nor the inventory name is set"))
		}
		a := target.SSHAddr{User: s.user, Host: addr, Port: s.port}
		if _, err := target.ParseSSHAddr(a.String()); err != nil {
			return bad(fmt.Errorf("ansible_host %q, ansible_user %q: %v", addr, s.user, err))
		}
		own = "ssh:" + a.String()
	} else if _, err := target.Parse(own); err != nil {
		return bad(fmt.Errorf("ansible_spindle_target: %v", err))
	}
	raw := own
	if strings.TrimSpace(h.Via) != "" {
		if _, err := target.Parse(h.Via); err != nil {
			return bad(fmt.Errorf("ansible_spindle_via: %v", err))
		}
		raw = h.Via + "," + own
	}
	t, err := target.Parse(raw)
	if err != nil {
		return bad(fmt.Errorf("the chain %q (ansible_spindle_via, then the host): %v", raw, err))
	}
	return &Resolved{Target: t, SSH: s.o, Ignored: s.ignored}, nil
}

// Steps are the chain's connectors (target.Target.Steps). A become hop
// written in the chain (via "web1,sudo") gets no password: sudo and doas
// then run with -n.
func (r *Resolved) Steps() ([]target.Step, error) {
	return r.Target.Steps(target.Options{SSH: r.SSH})
}

// Chain names the chain by its hops' canonical forms: two hosts with the
// same chain reach the same place.
func (r *Resolved) Chain() string {
	names := make([]string, len(r.Target.Hops))
	for i, h := range r.Target.Hops {
		names[i] = h.String()
	}
	return strings.Join(names, ",")
}

// Settings names everything the chain's connectors are built with
// besides the hops: connections with equal Settings can share a
// controller and its routes (a bastion dialled once for forty hosts).
// The password appears only as a keyed hash (Secret), so the string can
// be kept and compared but says nothing of it.
func (r *Resolved) Settings() string {
	o := r.SSH
	policy := string(o.HostKeyPolicy)
	ident := ""
	if o.IdentitiesOnly != nil {
		ident = fmt.Sprint(*o.IdentitiesOnly)
	}
	return fmt.Sprintf("%q", []any{o.ConfigFile, o.IdentityFiles, ident, o.PreferredAuthentications, o.SendEnv, o.SetEnv,
		o.CertificateFiles, o.IdentityAgent, o.ConnectionAttempts, o.AddKeysToAgent, o.ForwardAgent, Secret(o.Password),
		o.KnownHostsFiles, policy, o.ConnectTimeout, o.KeepaliveInterval, o.KeepaliveCountMax, o.ProxyJump, o.ProxyCommand,
		o.Ciphers, o.MACs, o.KexAlgorithms, o.HostKeyAlgorithms})
}

// secretKey keys Secret: random per process, so that a hash never leaves
// the process it can be compared in.
var secretKey = func() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}()

// Secret is a keyed hash of a password, for keys that must tell
// passwords apart without holding them: equal within this process for
// equal passwords, meaningless outside it. "" for no password.
func Secret(pw string) string {
	if pw == "" {
		return ""
	}
	m := hmac.New(sha256.New, secretKey)
	m.Write([]byte(pw))
	return hex.EncodeToString(m.Sum(nil)[:16])
}
