package cli

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/target"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// connectOptions are the global flags that configure connectors (today
// the ssh ones), shared by every command that takes a TARGET.
type connectOptions struct {
	configFile    string   // -F FILE
	identities    []string // -i FILE, repeatable
	sshOpts       []string // -o KEY=VALUE, repeatable
	hostKeyPolicy string   // --host-key-policy
	passwordEnv   string   // --password-env VAR
	become        becomeOptions

	// interactive says stdin is a terminal: a needed password or key
	// passphrase is asked for on /dev/tty.
	interactive bool
	// prompt reads a secret; nil = readSecretTTY. Tests replace it.
	prompt func(prompt string) (string, error)
	// ask reads an answer, echoed; nil = readLineTTY. Tests replace it.
	ask func(question string) (string, error)
}

func (o *connectOptions) addFlags(pf *pflag.FlagSet) {
	pf.StringVarP(&o.configFile, "config", "F", "", "ssh: read this ssh_config file instead of ~/.ssh/config (like ssh -F; \"none\" reads none)")
	pf.StringArrayVarP(&o.identities, "identity", "i", nil, "ssh: private key file to try, before ssh_config's (like ssh -i; repeatable)")
	pf.StringArrayVarP(&o.sshOpts, "option", "o", nil, "ssh: an ssh_config option as KEY=VALUE (like ssh -o; repeatable): "+strings.Join(sshOptionNames, ", "))
	pf.StringVar(&o.hostKeyPolicy, "host-key-policy", "", "ssh: unknown host keys: ask (on the terminal, as ssh does; refused without one), yes (refuse), accept-new (record them), off (accept any key but one marked @revoked: insecure); default: ssh_config's StrictHostKeyChecking, else ask")
	pf.StringVar(&o.passwordEnv, "password-env", "", "ssh: read the password (or key passphrase) from this environment variable")
	o.become.addFlags(pf)
}

// sshOptionNames are the -o keys the CLI understands.
var sshOptionNames = []string{"StrictHostKeyChecking", "UserKnownHostsFile", "IdentityFile", "IdentitiesOnly", "IdentityAgent", "CertificateFile", "ForwardAgent",
	"AddKeysToAgent", "ConnectionAttempts", "User", "Port", "ConnectTimeout", "ServerAliveInterval", "ServerAliveCountMax", "BatchMode",
	"ProxyCommand", "ProxyJump", "PreferredAuthentications", "SendEnv", "SetEnv", "EscapeChar",
	"Ciphers", "MACs", "KexAlgorithms", "HostKeyAlgorithms"}

func parseYesNo(key, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "yes", "true":
		return true, nil
	case "no", "false":
		return false, nil
	}
	return false, fmt.Errorf("-o %s: want yes or no, got %q", key, v)
}

// targetOptions are the options of t's connectors: the SSH flags (read
// only when t has an SSH hop, so that a local target never trips on them)
// and the become password flags.
func (o *connectOptions) targetOptions(t target.Target) (target.Options, error) {
	to := target.Options{BecomePassword: func(string, string) (string, error) {
		pw, err := o.become.password(o)
		if err != nil {
			return "", &usageError{err: err}
		}
		return pw, nil
	}}
	if t.Has("ssh") {
		base, err := o.sshBase()
		if err != nil {
			return to, &usageError{cmd: "spindle", err: err}
		}
		to.SSH = base
	}
	return to, nil
}

// sshOptions are the ssh connector's options for one hop: the hop's user
// and port over the flags' (sshBase).
func (o *connectOptions) sshOptions(a target.SSHAddr) (ssh.Options, error) {
	base, err := o.sshBase()
	if err != nil {
		return base, err
	}
	return a.Options(base), nil
}

// sshBase is the base of every SSH hop's options, from the global flags;
// everything left zero is resolved by the connector through ssh_config,
// like `ssh` does. A hop's own user and port win over -o User and -o Port.
func (o *connectOptions) sshBase() (ssh.Options, error) {
	so := ssh.Options{ConfigFile: o.configFile}
	so.IdentityFiles = append(so.IdentityFiles, o.identities...)
	batch := false
	for _, kv := range o.sshOpts {
		key, val, ok := splitOption(kv)
		if !ok {
			return so, fmt.Errorf("-o %q: want KEY=VALUE", kv)
		}
		switch strings.ToLower(key) {
		case "stricthostkeychecking":
			p, err := ssh.ParseHostKeyPolicy(val)
			if err != nil {
				return so, fmt.Errorf("-o %s: %w", key, err)
			}
			so.HostKeyPolicy = p
		case "userknownhostsfile":
			so.KnownHostsFiles = append(so.KnownHostsFiles, strings.Fields(val)...)
		case "identityfile":
			so.IdentityFiles = append(so.IdentityFiles, val)
		case "sendenv":
			so.SendEnv = append(so.SendEnv, strings.Fields(val)...)
		case "setenv":
			so.SetEnv = append(so.SetEnv, val)
		case "preferredauthentications":
			if so.PreferredAuthentications == nil {
				so.PreferredAuthentications = strings.Split(val, ",")
			}
		case "certificatefile":
			so.CertificateFiles = append(so.CertificateFiles, val)
		case "identitiesonly":
			b, err := parseYesNo(key, val)
			if err != nil {
				return so, err
			}
			so.IdentitiesOnly = &b
		case "user":
			if so.User == "" {
				so.User = val // the first -o User wins, as in ssh
			}
		case "port":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > 65535 {
				return so, fmt.Errorf("-o Port: bad port %q", val)
			}
			if so.Port == 0 {
				so.Port = n
			}
		case "connecttimeout", "serveraliveinterval":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return so, fmt.Errorf("-o %s: want seconds, got %q", key, val)
			}
			if strings.EqualFold(key, "ConnectTimeout") {
				so.ConnectTimeout = time.Duration(n) * time.Second
			} else {
				so.KeepaliveInterval = time.Duration(n) * time.Second
			}
		case "serveralivecountmax":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				return so, fmt.Errorf("-o %s: want a count, got %q", key, val)
			}
			so.KeepaliveCountMax = n
		case "connectionattempts":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				return so, fmt.Errorf("-o %s: want a count, got %q", key, val)
			}
			if so.ConnectionAttempts == 0 {
				so.ConnectionAttempts = n
			}
		case "identityagent":
			if so.IdentityAgent == "" {
				so.IdentityAgent = val
			}
		case "forwardagent":
			if so.ForwardAgent == "" {
				so.ForwardAgent = val
			}
		case "addkeystoagent":
			if so.AddKeysToAgent == "" {
				so.AddKeysToAgent = val
			}
		case "proxycommand", "proxyjump":
			// As in ssh, the first of the two given wins.
			if so.ProxyCommand == "" && so.ProxyJump == "" {
				if strings.EqualFold(key, "ProxyCommand") {
					so.ProxyCommand = val
				} else {
					so.ProxyJump = val
				}
			}
		case "ciphers", "macs", "kexalgorithms", "hostkeyalgorithms":
			// As in ssh, the first value given wins.
			dst := map[string]*string{"ciphers": &so.Ciphers, "macs": &so.MACs,
				"kexalgorithms": &so.KexAlgorithms, "hostkeyalgorithms": &so.HostKeyAlgorithms}[strings.ToLower(key)]
			if *dst == "" {
				*dst = val
			}
		case "batchmode":
			b, err := parseYesNo(key, val)
			if err != nil {
				return so, err
			}
			batch = b
		case "escapechar":
			// The terminal's side (spindle shell), not the connection's.
			if _, _, err := parseEscapeChar(val); err != nil {
				return so, fmt.Errorf("-o %s: %w", key, err)
			}
		default:
			return so, fmt.Errorf("-o %s: not supported (supported: %s)", key, strings.Join(sshOptionNames, ", "))
		}
	}
	if o.hostKeyPolicy != "" {
		p, err := ssh.ParseHostKeyPolicy(o.hostKeyPolicy)
		if err != nil {
			return so, fmt.Errorf("--host-key-policy: %w", err)
		}
		so.HostKeyPolicy = p
	}
	if o.passwordEnv != "" {
		pw, ok := os.LookupEnv(o.passwordEnv)
		if !ok {
			return so, fmt.Errorf("--password-env %s: the variable is not set", o.passwordEnv)
		}
		so.Password = pw
	}
	if so.Password == "" && o.interactive && !batch {
		prompt := o.prompt
		if prompt == nil {
			prompt = readSecretTTY
		}
		so.PasswordPrompt = prompt
	}
	if o.interactive && !batch {
		ask := o.ask
		if ask == nil {
			ask = readLineTTY
		}
		so.HostKeyPrompt = ask
	}
	return so, nil
}

// keepalive is the keepalive of every link the CLI's controller and its
// agents keep to a child (router.Options.KeepaliveInterval and
// KeepaliveCountMax), from -o ServerAliveInterval and ServerAliveCountMax
// as ssh takes them: seconds, 0 for none; a count of unanswered pings.
// Not given, they are 0 (the router's defaults, 15 s and 3). An SSH hop's
// own keepalive takes them too (sshOptions), with ssh_config's.
func (o *connectOptions) keepalive() (interval time.Duration, countMax int, err error) {
	if v := o.optionValue("ServerAliveInterval"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, 0, fmt.Errorf("-o ServerAliveInterval: want seconds, got %q", v)
		}
		interval = time.Duration(n) * time.Second
		if n == 0 {
			interval = -1 // ssh's "none"
		}
	}
	if v := o.optionValue("ServerAliveCountMax"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, 0, fmt.Errorf("-o ServerAliveCountMax: want a count, got %q", v)
		}
		countMax = n
	}
	return interval, countMax, nil
}

// optionValue is the value of the last -o KEY=VALUE for key (any case),
// or "".
func (o *connectOptions) optionValue(key string) string {
	v := ""
	for _, kv := range o.sshOpts {
		if k, val, ok := splitOption(kv); ok && strings.EqualFold(k, key) {
			v = val
		}
	}
	return v
}

// splitOption splits -o's KEY=VALUE (or "KEY VALUE", as ssh takes it);
// ok is false unless both are there.
func splitOption(kv string) (key, val string, ok bool) {
	key, val, ok = strings.Cut(kv, "=")
	if !ok {
		key, val, ok = strings.Cut(strings.TrimSpace(kv), " ")
	}
	key, val = strings.TrimSpace(key), strings.TrimSpace(val)
	return key, val, ok && key != "" && val != ""
}

// readSecretTTY asks for a password or passphrase on the controlling
// terminal, without echo. The secret is never logged.
// readLineTTY asks question on the terminal and reads the answer, echoed:
// a host key's confirmation, as ssh asks it.
func readLineTTY(question string) (string, error) {
	ttyMu.Lock()
	defer ttyMu.Unlock()
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("no terminal to ask on (%v)", err)
	}
	defer tty.Close()
	if _, err := fmt.Fprint(tty, question); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(tty).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("read the answer from the terminal: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// ttyMu keeps one question at a time on the terminal: hops that start
// in parallel (a chain's several SSH hops through one bastion) may each
// have one.
var ttyMu sync.Mutex

func readSecretTTY(prompt string) (string, error) {
	ttyMu.Lock()
	defer ttyMu.Unlock()
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("cannot ask for a password: no terminal (%v); use --password-env VAR or a key", err)
	}
	defer tty.Close()
	if prompt == "" {
		prompt = "Password: "
	}
	// Echo goes off before the prompt is shown, as ssh's readpassphrase
	// does: someone typing as soon as the prompt appears (a script
	// driving a pty does) would otherwise see the first characters
	// echoed, before term.ReadPassword turned echo off.
	fd := int(tty.Fd())
	if old, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		quiet := *old
		quiet.Lflag &^= unix.ECHO
		quiet.Lflag |= unix.ICANON | unix.ISIG
		quiet.Iflag |= unix.ICRNL
		if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err == nil {
			defer unix.IoctlSetTermios(fd, unix.TCSETS, old) //nolint:errcheck // as term.ReadPassword restores
		}
	}
	if _, err := fmt.Fprint(tty, prompt); err != nil {
		return "", err
	}
	b, err := term.ReadPassword(fd)
	fmt.Fprintln(tty)
	if err != nil {
		return "", fmt.Errorf("read password from the terminal: %w", err)
	}
	return string(b), nil
}
