package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"regexp"
	"strconv"
	"strings"

	"github.com/spindle-rpc/spindle/internal/testkit/standin"
)

// systemd-run's options (getopt_long with "+": they end at the first
// argument), a selection of systemd 252's.
var systemdRunFlags = flagSet{stopAtArg: true,
	long: map[string]bool{"machine": true, "host": true, "pipe": false, "quiet": false, "wait": false,
		"collect": false, "service-type": true, "uid": true, "gid": true, "property": true, "setenv": true,
		"pty": false, "unit": true, "description": true, "no-block": false, "user": false, "system": false,
		"nice": true, "working-directory": true, "same-dir": false, "send-sighup": false,
		"remain-after-exit": false, "slice": true, "no-ask-password": false},
	short: map[byte]string{'M': "machine", 'H': "host", 'P': "pipe", 'q': "quiet", 'W': "wait",
		'G': "collect", 'p': "property", 'E': "setenv", 't': "pty", 'u': "unit", 'd': "same-dir",
		'r': "remain-after-exit"},
}

// systemdRun takes `systemd-run --machine=NAME [OPTIONS] [--] COMMAND…`
// as systemd 252's does, with the World's machines as the running ones
// machined knows, and this host's users as theirs.
func systemdRun(w standin.World, argv []string) (*launch, *failure) {
	p, err := systemdRunFlags.parse(argv)
	if err != nil {
		var e errUnknown
		if ok := asUnknown(err, &e); ok {
			if strings.HasPrefix(e.flag, "--") {
				return nil, fail(1, "systemd-run: unrecognized option '%s'", e.flag)
			}
			return nil, fail(1, "systemd-run: invalid option -- '%s'", strings.TrimPrefix(e.flag, "-"))
		}
		return nil, fail(1, "systemd-run: %v", err)
	}
	machine := p.last("machine")
	if machine == "" {
		return nil, notSimulated("only --machine runs are simulated")
	}
	if p.has("pty") {
		return nil, notSimulated("--pty puts the command on a pseudo-terminal")
	}
	if len(p.args) == 0 {
		return nil, fail(1, "Command line to execute required.")
	}
	// sd_bus_open_system_machine: no /run/systemd/machines/NAME.
	if o, ok := w.Objects[machine]; !ok || o.State != "running" {
		return nil, fail(1, "Failed to connect to bus: Host is down")
	}
	unit := fmt.Sprintf("run-u%d.service", os.Getpid())
	quiet := p.has("quiet")
	// A start job that fails (User= unknown, ExecStart= not executable:
	// the service exits 217/USER or 203/EXEC before it runs) is reported
	// by bus_wait_for_jobs, which --quiet silences; exit status 1.
	jobFailed := func() *failure {
		if quiet {
			return &failure{code: 1}
		}
		return fail(1, "Job for %[1]s failed because the control process exited with error code.\n"+
			"See \"systemctl status %[1]s\" and \"journalctl -xeu %[1]s\" for details.", unit)
	}
	env := []string{"PATH=" + defaultPath, "INVOCATION_ID=" + randomHex(16)}
	uid, gid := -1, -1
	if u := p.last("uid"); u != "" {
		pw, err := user.Lookup(u)
		if err != nil {
			pw, err = user.LookupId(u)
		}
		if err != nil {
			return nil, jobFailed()
		}
		uid, _ = strconv.Atoi(pw.Uid)
		gid, _ = strconv.Atoi(pw.Gid)
		env = append(env, "HOME="+pw.HomeDir, "USER="+pw.Username, "LOGNAME="+pw.Username, "SHELL="+loginShell(pw.Uid))
	}
	if g := p.last("gid"); g != "" {
		n, err := strconv.Atoi(g)
		if err != nil {
			grp, lerr := user.LookupGroup(g)
			if lerr != nil {
				return nil, jobFailed()
			}
			n, _ = strconv.Atoi(grp.Gid)
		}
		gid = n
	}
	for _, kv := range p.flags["setenv"] {
		if !strings.Contains(kv, "=") {
			kv += "=" + os.Getenv(kv)
		}
		env = append(env, kv)
	}
	command := make([]string, 0, len(p.args))
	for _, a := range p.args {
		command = append(command, expandEnv(a, env)...)
	}
	if len(command) == 0 {
		return nil, jobFailed()
	}
	if !quiet {
		errorf("Running as unit: %s", unit)
	}
	return &launch{argv: command, env: env, dir: "/", uid: uid, gid: gid,
		// Without --pipe the service's stdio is /dev/null and the
		// journal.
		stdinNull: !p.has("pipe"), outputNull: !p.has("pipe"),
		notFound: func(string) *failure { return jobFailed() },
	}, nil
}

func asUnknown(err error, target *errUnknown) bool {
	e, ok := err.(errUnknown)
	if ok {
		*target = e
	}
	return ok
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// loginShell is the shell of uid in /etc/passwd, or /bin/sh.
func loginShell(uid string) string {
	b, _ := os.ReadFile("/etc/passwd")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Split(line, ":"); len(f) == 7 && f[2] == uid {
			return f[6]
		}
	}
	return "/bin/sh"
}

var (
	wholeVar  = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)$`)
	bracedVar = regexp.MustCompile(`\$\$|\$\{[^}]*\}`)
)

// expandEnv does what systemd does to each word of ExecStart= (systemd
// 252's replace_env_argv): "$$" is "$", "${NAME}" (and ${NAME:-…},
// ${NAME:+…}) is NAME's value anywhere in the word, and a word that is
// "$NAME" alone becomes NAME's value split at whitespace (no words when
// unset).
func expandEnv(word string, env []string) []string {
	lookup := func(name string) (string, bool) {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				return v, true
			}
		}
		return "", false
	}
	if m := wholeVar.FindStringSubmatch(word); m != nil {
		v, _ := lookup(m[1])
		return strings.Fields(v)
	}
	return []string{bracedVar.ReplaceAllStringFunc(word, func(s string) string {
		if s == "$$" {
			return "$"
		}
		expr := s[2 : len(s)-1]
		if name, alt, ok := strings.Cut(expr, ":+"); ok {
			if v, set := lookup(name); set && v != "" {
				return alt
			}
			return ""
		}
		if name, def, ok := strings.Cut(expr, ":-"); ok {
			if v, set := lookup(name); set && v != "" {
				return v
			}
			return def
		}
		v, _ := lookup(expr)
		return v
	})}
}
