package hostvars

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-rpc/spindle/connectors/ssh"
)

// sshSettings accumulates SSH arguments in the order ssh reads them: the
// first value of a single setting wins, lists add up.
type sshSettings struct {
	o          ssh.Options // everything but User and Port
	user       string      // the host's own hop
	port       int
	timeoutSet bool
	policySet  bool
	proxySet   bool
	ignored    []string
}

// ssh's options that take an argument (its getopt string); the others
// are flags.
const sshArgLetters = "bceilmopBDEFIJLOQRSWw"

// args applies one variable's arguments (shell-quoted, as Ansible passes
// them to ssh).
func (s *sshSettings) args(variable, raw string) error {
	words, err := splitShell(raw)
	if err != nil {
		return fmt.Errorf("%s %q: %v", variable, raw, err)
	}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if len(w) < 2 || w[0] != '-' || w == "--" {
			return fmt.Errorf("%s: %q is not an ssh option (want options such as -o KEY=VALUE, -i FILE, -J HOST)", variable, w)
		}
		// A cluster of flags ("-tt", "-4C"), possibly ending in an
		// option with its argument attached ("-oUser=x", "-p2222") or
		// next.
		for j := 1; j < len(w); j++ {
			letter := w[j]
			if strings.IndexByte(sshArgLetters, letter) < 0 {
				s.flag(letter)
				continue
			}
			arg := w[j+1:]
			if arg == "" {
				if i+1 >= len(words) {
					return fmt.Errorf("%s: -%c needs an argument", variable, letter)
				}
				i++
				arg = words[i]
			}
			if err := s.option(letter, arg); err != nil {
				return fmt.Errorf("%s: %w", variable, err)
			}
			break
		}
	}
	return nil
}

// flag applies an ssh flag without an argument.
func (s *sshSettings) flag(letter byte) {
	switch letter {
	case 'A':
		if s.o.ForwardAgent == "" {
			s.o.ForwardAgent = "yes"
		}
	case 'a':
		if s.o.ForwardAgent == "" {
			s.o.ForwardAgent = "no"
		}
	default:
		// -C (compression), -q, -v, -T, -4 and the like change nothing
		// Spindle does.
		s.ignored = append(s.ignored, "-"+string(letter))
	}
}

// option applies an ssh option that takes an argument.
func (s *sshSettings) option(letter byte, arg string) error {
	switch letter {
	case 'o':
		key, val, ok := splitOption(arg)
		if !ok {
			return fmt.Errorf("-o %q: want KEY=VALUE or \"KEY VALUE\"", arg)
		}
		return s.config(key, val)
	case 'i':
		s.o.IdentityFiles = append(s.o.IdentityFiles, arg)
	case 'l':
		return s.config("User", arg)
	case 'p':
		return s.config("Port", arg)
	case 'F':
		if s.o.ConfigFile == "" {
			s.o.ConfigFile = arg
		}
	case 'J':
		return s.config("ProxyJump", arg)
	case 'c':
		return s.config("Ciphers", arg)
	case 'm':
		return s.config("MACs", arg)
	default:
		// Forwardings (-L, -R, -D, -W), control sockets (-S, -O),
		// logging (-E) and the like: not a connection setting.
		s.ignored = append(s.ignored, "-"+string(letter)+" "+arg)
	}
	return nil
}

// splitOption splits -o's KEY=VALUE or "KEY VALUE"; a value in double
// quotes (Ansible writes IdentityFile="…") loses them, as ssh_config's do.
func splitOption(kv string) (key, val string, ok bool) {
	kv = strings.TrimSpace(kv)
	i := strings.IndexAny(kv, "= \t")
	if i < 0 {
		return "", "", false
	}
	key, val = kv[:i], strings.TrimLeft(kv[i:], " \t")
	val = strings.TrimPrefix(val, "=")
	val = strings.TrimSpace(val)
	if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
		val = val[1 : len(val)-1]
	}
	return key, val, key != "" && val != ""
}

// config applies one ssh_config setting given on the command line.
func (s *sshSettings) config(key, val string) error {
	first := func(dst *string) {
		if *dst == "" {
			*dst = val
		}
	}
	switch strings.ToLower(key) {
	case "user":
		first(&s.user)
	case "port":
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%s: bad port %q (want 1-65535)", key, val)
		}
		if s.port == 0 {
			s.port = n
		}
	case "stricthostkeychecking":
		p, err := ssh.ParseHostKeyPolicy(val)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if !s.policySet {
			s.o.HostKeyPolicy, s.policySet = p, true
		}
	case "userknownhostsfile":
		if s.o.KnownHostsFiles == nil {
			s.o.KnownHostsFiles = strings.Fields(val)
		}
	case "identityfile":
		s.o.IdentityFiles = append(s.o.IdentityFiles, val)
	case "certificatefile":
		s.o.CertificateFiles = append(s.o.CertificateFiles, val)
	case "identitiesonly":
		b, err := yesNo(key, val)
		if err != nil {
			return err
		}
		if s.o.IdentitiesOnly == nil {
			s.o.IdentitiesOnly = &b
		}
	case "preferredauthentications":
		if s.o.PreferredAuthentications == nil {
			s.o.PreferredAuthentications = strings.Split(val, ",")
		}
	case "sendenv":
		s.o.SendEnv = append(s.o.SendEnv, strings.Fields(val)...)
	case "setenv":
		s.o.SetEnv = append(s.o.SetEnv, val)
	case "connecttimeout":
		n, err := seconds(key, val)
		if err != nil {
			return err
		}
		if !s.timeoutSet {
			s.o.ConnectTimeout, s.timeoutSet = n, true
		}
	case "serveraliveinterval":
		n, err := seconds(key, val)
		if err != nil {
			return err
		}
		if s.o.KeepaliveInterval == 0 {
			s.o.KeepaliveInterval = n
			if n == 0 {
				s.o.KeepaliveInterval = -1 // ssh's 0: none
			}
		}
	case "serveralivecountmax", "connectionattempts":
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 {
			return fmt.Errorf("%s: want a count, got %q", key, val)
		}
		dst := &s.o.KeepaliveCountMax
		if strings.EqualFold(key, "ConnectionAttempts") {
			dst = &s.o.ConnectionAttempts
		}
		if *dst == 0 {
			*dst = n
		}
	case "proxycommand", "proxyjump":
		// As in ssh, the first of the two given wins.
		if !s.proxySet {
			s.proxySet = true
			if strings.EqualFold(key, "ProxyCommand") {
				s.o.ProxyCommand = val
			} else {
				s.o.ProxyJump = val
			}
		}
	case "identityagent":
		first(&s.o.IdentityAgent)
	case "forwardagent":
		first(&s.o.ForwardAgent)
	case "addkeystoagent":
		first(&s.o.AddKeysToAgent)
	case "ciphers":
		first(&s.o.Ciphers)
	case "macs":
		first(&s.o.MACs)
	case "kexalgorithms":
		first(&s.o.KexAlgorithms)
	case "hostkeyalgorithms":
		first(&s.o.HostKeyAlgorithms)
	default:
		// ControlMaster, ControlPath and ControlPersist (the daemon keeps
		// connections itself), PasswordAuthentication, Compression,
		// LogLevel and the rest: nothing for Spindle to do.
		s.ignored = append(s.ignored, "-o "+key+"="+val)
	}
	return nil
}

func yesNo(key, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "yes", "true":
		return true, nil
	case "no", "false":
		return false, nil
	}
	return false, fmt.Errorf("%s: want yes or no, got %q", key, v)
}

func seconds(key, v string) (time.Duration, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: want seconds, got %q", key, v)
	}
	return time.Duration(n) * time.Second, nil
}
