package main

import (
	"os"
	"strconv"
	"strings"

	"github.com/spindle-rpc/spindle/internal/testkit/standin"
)

// The lxc client's global flags, also accepted after "exec" (cobra
// persistent flags).
var lxdGlobal = map[string]bool{"project": true, "force-local": false, "quiet": false, "verbose": false, "debug": false}

var lxdGlobalFlags = flagSet{long: lxdGlobal, short: map[byte]string{'q': "quiet", 'v': "verbose"}}

// `lxc exec`'s flags (lxc/exec.go), globals included.
var lxdExecFlags = func() flagSet {
	long := map[string]bool{"env": true, "mode": true, "force-interactive": false, "force-noninteractive": false,
		"disable-stdin": false, "user": true, "group": true, "cwd": true}
	for k, v := range lxdGlobal {
		long[k] = v
	}
	return flagSet{long: long, short: map[byte]string{'t': "force-interactive", 'T': "force-noninteractive",
		'n': "disable-stdin", 'q': "quiet", 'v': "verbose"}}
}()

// lxdSocket is where the snap's LXD listens.
const lxdSocket = "/var/snap/lxd/common/lxd/unix.socket"

// lxd takes `lxc [GLOBAL] exec [FLAGS] [REMOTE:]INSTANCE [--] COMMAND…` as
// LXD 5's client and daemon do (lxc/exec.go, lxd/instance_exec.go), with
// the World's instances ("PROJECT/NAME") as the daemon's.
func lxd(w standin.World, argv []string) (*launch, *failure) {
	global, sub, rest, err := lxdGlobalFlags.split(argv)
	if err != nil {
		return nil, fail(1, "Error: %v", err)
	}
	if sub != "exec" {
		return nil, notSimulated("only `lxc exec` is simulated, not %q", sub)
	}
	p, err := lxdExecFlags.parse(rest)
	if err != nil {
		return nil, fail(1, "Error: %v", err)
	}
	for k, v := range global.flags {
		p.flags[k] = append(v, p.flags[k]...)
	}
	if len(p.args) < 2 {
		return nil, fail(1, "Error: Invalid number of arguments")
	}
	ti, tn := p.has("force-interactive"), p.has("force-noninteractive")
	mode := p.last("mode")
	if mode == "" {
		mode = "auto"
	}
	if ti && tn {
		return nil, fail(1, "Error: You can't pass -t and -T at the same time")
	}
	if mode != "auto" && (ti || tn) {
		return nil, fail(1, "Error: You can't pass -t or -T at the same time as --mode")
	}
	ids := map[string]int{}
	for _, f := range []string{"user", "group"} {
		ids[f] = 0
		if v := p.last(f); v != "" {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return nil, fail(1, "Error: invalid argument %q for \"--%s\" flag: %v", v, f, err)
			}
			ids[f] = int(n)
		}
	}
	interactive := false
	switch {
	case p.has("disable-stdin"):
	case mode == "interactive" || ti:
		interactive = true
	case mode == "non-interactive" || tn:
	default:
		interactive = isTerminal(0) && isTerminal(1)
	}
	if interactive {
		return nil, notSimulated("interactive mode puts the command on a pseudo-terminal (stdout and stderr merged)")
	}
	name := p.args[0]
	if remote, n, ok := strings.Cut(name, ":"); ok {
		if remote != "local" {
			return nil, fail(1, "Error: The remote %q doesn't exist", remote)
		}
		name = n
	}
	if w.Down {
		return nil, fail(1, "Error: LXD unix socket %q not found: Please check LXD is running", lxdSocket)
	}
	project := p.last("project")
	if project == "" {
		project = "default"
	}
	o, ok := w.Objects[project+"/"+name]
	switch {
	case !ok:
		return nil, fail(1, "Error: Instance not found")
	case o.State == "Frozen":
		return nil, fail(1, "Error: Instance is frozen")
	case o.State != "Running":
		return nil, fail(1, "Error: Instance is not running")
	}
	command := p.args[1:]
	if len(command) == 0 {
		return nil, fail(1, "Error: Invalid number of arguments")
	}
	env := []string{"PATH=" + defaultPath, "LANG=C.UTF-8"}
	if t := os.Getenv("TERM"); t != "" {
		env = append(env, "TERM="+t)
	}
	if ids["user"] == 0 {
		env = append(env, "HOME=/root", "USER=root")
	}
	for _, kv := range p.flags["env"] {
		if strings.Contains(kv, "=") {
			env = append(env, kv)
		}
	}
	dir := p.last("cwd")
	if dir == "" {
		dir = "/"
		if ids["user"] == 0 {
			dir = "/root"
		}
	}
	return &launch{argv: command, env: env, dir: dir, uid: ids["user"], gid: ids["group"],
		stdinNull: p.has("disable-stdin"),
		notFound: func(string) *failure {
			// forkexec's status for a command it cannot find.
			return fail(127, "")
		},
	}, nil
}
