// Package sys is the agent's "sys" service: liveness and host facts.
//
// Methods (register them on an agent with Register); msgpack keys in
// brackets:
//
//	sys.Ping  args PingArgs, optional {Payload []byte [p]}
//	          result Pong {Payload []byte [p]}: the payload echoed. It does
//	          no other work: it is the round-trip latency benchmark.
//	sys.Info  args none
//	          result HostInfo {OS string [os], Arch string [arch],
//	          Kernel string [kernel] (uname release and version),
//	          Hostname string [host], UID int [uid], GID int [gid],
//	          PID int [pid], User string [user], Home string [home],
//	          AgentVersion string [ver], Pythons []string [py]}
//
// HostInfo's slow parts (uname, hostname, user lookup, the interpreter search)
// are computed once per agent process; UID, GID and PID are read on every
// call. Pythons lists the absolute paths of the Python interpreters found on
// the agent's PATH and in /usr/bin, /usr/local/bin and
// /usr/libexec/platform-python (python3, python3.14 … python3.6,
// platform-python, python, python2, in that order of preference), each
// verified to be an executable regular file, deduplicated by the file they
// resolve to.
//
// The client helpers Ping and Info call these methods through any
// rpc.Caller.
package sys

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/version"
	"golang.org/x/sys/unix"
)

// Method names.
const (
	MethodPing = "sys.Ping"
	MethodInfo = "sys.Info"
)

// PingArgs are the optional arguments of sys.Ping.
type PingArgs struct {
	Payload []byte `msgpack:"p,omitempty"`
}

// Pong is the result of sys.Ping.
type Pong struct {
	Payload []byte `msgpack:"p,omitempty"`
}

// HostInfo is the result of sys.Info: facts about the agent and its host.
type HostInfo struct {
	OS   string `msgpack:"os"`   // runtime.GOOS
	Arch string `msgpack:"arch"` // runtime.GOARCH
	// Kernel is uname's release and version, space separated.
	Kernel   string `msgpack:"kernel"`
	Hostname string `msgpack:"host"`
	UID      int    `msgpack:"uid"`
	GID      int    `msgpack:"gid"`
	PID      int    `msgpack:"pid"`
	// User and Home come from the user database, else $USER and $HOME.
	User         string   `msgpack:"user"`
	Home         string   `msgpack:"home"`
	AgentVersion string   `msgpack:"ver"`
	Pythons      []string `msgpack:"py"`
}

// Register adds the sys methods to reg.
func Register(reg *rpc.Registry) {
	reg.Handle(MethodPing, handlePing)
	reg.Handle(MethodInfo, handleInfo)
}

var emptyPong = &Pong{}

func handlePing(_ context.Context, call *rpc.Call) (any, error) {
	var a PingArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if len(a.Payload) == 0 {
		return emptyPong, nil
	}
	return &Pong{Payload: a.Payload}, nil
}

var (
	staticOnce sync.Once
	static     HostInfo
)

func handleInfo(context.Context, *rpc.Call) (any, error) {
	staticOnce.Do(func() { static = gather() })
	info := static
	info.Pythons = append([]string(nil), static.Pythons...)
	info.UID, info.GID, info.PID = os.Getuid(), os.Getgid(), os.Getpid()
	return &info, nil
}

// gather computes the facts that do not change while the agent runs.
func gather() HostInfo {
	info := HostInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, AgentVersion: version.Version}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		info.Kernel = strings.TrimSpace(unix.ByteSliceToString(uts.Release[:]) + " " + unix.ByteSliceToString(uts.Version[:]))
	}
	info.Hostname, _ = os.Hostname()
	info.User, info.Home = currentUser()
	info.Pythons = findPythons(os.Getenv("PATH"))
	return info
}

// currentUser looks the real user up in the user database. The agent
// is built without cgo, so os/user only reads /etc/passwd; users from LDAP,
// sssd and the like fall back to $USER and $HOME.
func currentUser() (name, home string) {
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
		name, home = u.Username, u.HomeDir
	}
	if name == "" {
		name = os.Getenv("USER")
		if name == "" {
			name = os.Getenv("LOGNAME")
		}
	}
	if home == "" {
		home = os.Getenv("HOME")
	}
	return name, home
}

// pythonNames lists the interpreter names searched, most preferred first.
func pythonNames() []string {
	names := []string{"python3"}
	for n := 14; n >= 6; n-- {
		names = append(names, "python3."+strconv.Itoa(n))
	}
	return append(names, "platform-python", "python", "python2")
}

// findPythons returns the interpreters found on path (a $PATH value) and in
// the usual directories, most preferred first, one per resolved file.
func findPythons(path string) []string {
	var dirs []string
	seenDir := map[string]bool{}
	addDir := func(d string) {
		if !filepath.IsAbs(d) {
			return // relative PATH entries depend on the agent's cwd
		}
		d = filepath.Clean(d)
		if !seenDir[d] {
			seenDir[d] = true
			dirs = append(dirs, d)
		}
	}
	for _, d := range filepath.SplitList(path) {
		addDir(d)
	}
	addDir("/usr/bin")
	addDir("/usr/local/bin")

	var out []string
	seen := map[string]bool{}
	consider := func(p string) {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] || !isExecutable(real) {
			return
		}
		seen[real] = true
		out = append(out, p)
	}
	for _, name := range pythonNames() {
		if name == "platform-python" {
			consider("/usr/libexec/platform-python")
			continue
		}
		for _, d := range dirs {
			consider(filepath.Join(d, name))
		}
	}
	return out
}

// isExecutable reports whether p is a regular file the agent may execute.
func isExecutable(p string) bool {
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return false
	}
	return unix.Access(p, unix.X_OK) == nil
}

// Ping calls sys.Ping on c.
func Ping(ctx context.Context, c rpc.Caller) error {
	return c.Call(ctx, MethodPing, nil, nil)
}

// Info calls sys.Info on c.
func Info(ctx context.Context, c rpc.Caller) (*HostInfo, error) {
	var info HostInfo
	if err := c.Call(ctx, MethodInfo, nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}
