package hostvars

import (
	"fmt"
	"strings"

	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/doas"
	"github.com/spindle-rpc/spindle/connectors/su"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	"github.com/spindle-rpc/spindle/errkind"
)

// Become is a become request in Ansible's vocabulary (become_method,
// become_user, become_pass, become_flags, become_exe).
type Become struct {
	Method   string `json:"method"`   // sudo, su or doas
	User     string `json:"user"`     // default root
	Password string `json:"password"` // never logged
	// Flags are shell-quoted flags for the tool. Those the connector
	// manages itself (sudo's -S -n -H -u -p, doas's -n -u, su's -c) are
	// dropped; sudo's -E and -i and su's -l become the connector's
	// options; the rest are passed on.
	Flags string `json:"flags"`
	Exe   string `json:"exe"` // the tool's program; default its name
}

func (b Become) user() string {
	if b.User == "" {
		return "root"
	}
	return b.User
}

// Connector returns the become hop, to be started by the host's agent.
// Its errors match errkind.ErrBadArgs.
func (b Become) Connector() (connectors.Remote, error) {
	flags, err := splitShell(b.Flags)
	if err != nil {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "become_flags %q: %v", b.Flags, err)
	}
	switch b.Method {
	case "sudo":
		o := sudo.Options{User: b.user(), Password: b.Password, Exe: b.Exe}
		o.Flags, err = shortFlags(flags, "SnH", "up", "gCDhrtTUR", func(c byte) bool {
			switch c {
			case 'E':
				o.PreserveEnv = true
			case 'i':
				o.Login = true
			default:
				return false
			}
			return true
		}, map[string]string{"--stdin": "", "--non-interactive": "", "--set-home": "", "--user": "u", "--prompt": "p",
			"--preserve-env": "E", "--login": "i"})
		if err != nil {
			return nil, errkind.Errorf(errkind.ErrBadArgs, "become_flags %q: %v", b.Flags, err)
		}
		return o, nil
	case "su":
		o := su.Options{User: b.user(), Password: b.Password, Exe: b.Exe}
		for _, f := range flags {
			switch {
			case f == "-" || f == "-l" || f == "--login":
				o.Login = true
			case f == "-c" || strings.HasPrefix(f, "--command"):
				return nil, errkind.Errorf(errkind.ErrBadArgs, "become_flags %q: su's %s is Spindle's to give", b.Flags, f)
			default:
				o.Flags = append(o.Flags, f)
			}
		}
		return o, nil
	case "doas":
		o := doas.Options{User: b.user(), Password: b.Password, Exe: b.Exe}
		o.Flags, err = shortFlags(flags, "n", "u", "aC", nil, nil)
		if err != nil {
			return nil, errkind.Errorf(errkind.ErrBadArgs, "become_flags %q: %v", b.Flags, err)
		}
		return o, nil
	}
	return nil, errkind.Errorf(errkind.ErrBadArgs, "become method %q: Spindle becomes with sudo, su or doas", b.Method)
}

// shortFlags filters a tool's flags: the letters in drop (no argument)
// and dropArg (with one) are the connector's own; take may claim a
// letter as a connector option; keepArg are the other letters that take
// an argument. long maps long options to the letter they stand for (""
// drops one without an argument); unknown long options are kept.
func shortFlags(words []string, drop, dropArg, keepArg string, take func(byte) bool, long map[string]string) ([]string, error) {
	var out []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "--") {
			name, _, hasVal := strings.Cut(w, "=")
			letter, ok := long[name]
			switch {
			case !ok:
				out = append(out, w)
			case letter == "":
			case strings.Contains(dropArg, letter):
				if !hasVal {
					i++ // its argument
				}
			case hasVal:
				out = append(out, w) // --preserve-env=LIST
			case take != nil && take(letter[0]):
			default:
				out = append(out, w)
			}
			continue
		}
		if len(w) < 2 || w[0] != '-' {
			return nil, fmt.Errorf("%q is not a flag", w)
		}
		for j := 1; j < len(w); j++ {
			c := w[j]
			switch {
			case strings.IndexByte(drop, c) >= 0:
			case strings.IndexByte(dropArg, c) >= 0 || strings.IndexByte(keepArg, c) >= 0:
				arg := w[j+1:]
				if arg == "" {
					if i+1 >= len(words) {
						return nil, fmt.Errorf("-%c needs an argument", c)
					}
					i++
					arg = words[i]
				}
				if strings.IndexByte(keepArg, c) >= 0 {
					out = append(out, "-"+string(c), arg)
				}
				j = len(w)
			case take != nil && take(c):
			default:
				out = append(out, "-"+string(c))
			}
		}
	}
	return out, nil
}

// Key names b for a registry of become children: equal for requests that
// can share one child, the password only as Secret.
func (b Become) Key() string {
	return fmt.Sprintf("%q", []string{b.Method, b.user(), b.Flags, b.Exe, Secret(b.Password)})
}
