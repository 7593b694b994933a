package main

import "strings"

// flagSet is a command's flags: long name → takes a value; short letter
// → long name.
type flagSet struct {
	long  map[string]bool
	short map[byte]string
	// stopAtArg: options end at the first argument (getopt's "+", as
	// systemd-run's); otherwise they may follow arguments (pflag's way,
	// as kubectl's and lxc's), up to "--".
	stopAtArg bool
}

// parsed is a parsed command line.
type parsed struct {
	flags map[string][]string // long name → values ("true" for a bool)
	args  []string            // the arguments, after "--" included
	dash  int                 // len(args) before "--"; -1 without one
}

func (p parsed) has(name string) bool { return len(p.flags[name]) > 0 }

// last is the last value of name, or "".
func (p parsed) last(name string) string {
	if v := p.flags[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// errUnknown is an unknown flag, in the words of the tool's parser.
type errUnknown struct{ flag string }

func (e errUnknown) Error() string { return "unknown flag: " + e.flag }

// errNoValue is a flag given without its value.
type errNoValue struct{ flag string }

func (e errNoValue) Error() string { return "flag needs an argument: " + e.flag }

func (fs flagSet) parse(argv []string) (parsed, error) {
	p := parsed{flags: map[string][]string{}, dash: -1}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			p.dash = len(p.args)
			p.args = append(p.args, argv[i+1:]...)
			return p, nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			takes, ok := fs.long[name]
			if !ok {
				return p, errUnknown{"--" + name}
			}
			if takes && !hasVal {
				if i+1 >= len(argv) {
					return p, errNoValue{"--" + name}
				}
				i++
				val = argv[i]
			} else if !takes {
				if !hasVal {
					val = "true"
				}
			}
			p.flags[name] = append(p.flags[name], val)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// -x, -xVALUE, -x VALUE, -xyz (bools).
			for j := 1; j < len(a); j++ {
				name, ok := fs.short[a[j]]
				if !ok {
					return p, errUnknown{"-" + string(a[j])}
				}
				if !fs.long[name] {
					p.flags[name] = append(p.flags[name], "true")
					continue
				}
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(argv) {
						return p, errNoValue{"-" + string(a[j])}
					}
					i++
					val = argv[i]
				}
				p.flags[name] = append(p.flags[name], strings.TrimPrefix(val, "="))
				break
			}
		default:
			if fs.stopAtArg {
				p.args = append(p.args, argv[i:]...)
				return p, nil
			}
			p.args = append(p.args, a)
		}
	}
	return p, nil
}

// split cuts argv at the first argument that is not a flag of fs (nor a
// flag's value): the global flags, the subcommand, and the rest.
func (fs flagSet) split(argv []string) (global parsed, sub string, rest []string, err error) {
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			global, err = fs.parse(argv[:i])
			if a == "--" {
				return global, "", argv[i+1:], err
			}
			return global, a, argv[i+1:], err
		}
		// A flag: does its value follow as the next argument?
		if strings.HasPrefix(a, "--") {
			if name, _, hasVal := strings.Cut(a[2:], "="); fs.long[name] && !hasVal {
				i++
			}
		} else if long, ok := fs.short[a[1]]; ok && len(a) == 2 && fs.long[long] {
			i++
		}
	}
	global, err = fs.parse(argv)
	return global, "", nil, err
}
