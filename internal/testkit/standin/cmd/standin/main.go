// Command standin stands in for kubectl, LXD's lxc client or systemd-run
// in tests (see package standin): it checks its argv as the real tool
// parses it, answers for the pods, instances or machines of the World
// beside it with the real tool's messages and exit codes, and runs an
// accepted command on this machine with the user and environment the
// real tool would give it. It is installed under the tool's name; the
// World's Tool says which one it is.
//
// A message prefixed "stand-in:" (exit 2) is not the real tool's: it
// refuses a command line the real tool would accept but that a
// connector must not produce (a pseudo-terminal on the link) or that the
// stand-in does not simulate.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spindle-rpc/spindle/internal/testkit/standin"
	"golang.org/x/sys/unix"
)

// defaultPath is the PATH the three tools give a command (the OCI
// runtimes', LXD's, systemd's).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// failure is the real tool's complaint: its stderr and exit code.
type failure struct {
	msg  string
	code int
}

func fail(code int, format string, args ...any) *failure {
	return &failure{msg: fmt.Sprintf(format, args...), code: code}
}

// notSimulated is the stand-in's own refusal.
func notSimulated(format string, args ...any) *failure {
	return &failure{msg: "stand-in: " + fmt.Sprintf(format, args...), code: 2}
}

// launch is an accepted command.
type launch struct {
	argv       []string
	env        []string
	dir        string
	uid, gid   int // -1: as the stand-in runs
	stdinNull  bool
	outputNull bool
	// notFound is the tool's complaint when argv[0] cannot be run.
	notFound func(cmd string) *failure
}

func main() {
	w, err := loadWorld()
	if err != nil {
		fmt.Fprintf(os.Stderr, "stand-in: %v\n", err)
		os.Exit(2)
	}
	var l *launch
	var f *failure
	switch w.Tool {
	case standin.Kubectl:
		l, f = kubectl(w, os.Args[1:])
	case standin.LXD:
		l, f = lxd(w, os.Args[1:])
	case standin.SystemdRun:
		l, f = systemdRun(w, os.Args[1:])
	default:
		f = notSimulated("unknown tool %q in %s", w.Tool, standin.WorldFile)
	}
	if f == nil {
		f = l.exec()
	}
	if f.msg != "" {
		fmt.Fprintln(os.Stderr, f.msg)
	}
	os.Exit(f.code)
}

// loadWorld reads the World beside the path the program was run by.
func loadWorld() (standin.World, error) {
	var w standin.World
	self := os.Args[0]
	if !strings.Contains(self, "/") {
		p, err := exec.LookPath(self)
		if err != nil {
			return w, err
		}
		self = p
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), standin.WorldFile))
	if err != nil {
		return w, err
	}
	return w, json.Unmarshal(b, &w)
}

// exec replaces the stand-in with the command; it returns only on
// failure.
func (l *launch) exec() *failure {
	path := l.argv[0]
	if !strings.Contains(path, "/") {
		path = lookPath(path, l.env)
	}
	if fi, err := os.Stat(path); path == "" || err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return l.notFound(l.argv[0])
	}
	if l.stdinNull || l.outputNull {
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return notSimulated("%v", err)
		}
		if l.stdinNull {
			syscall.Dup2(int(null.Fd()), 0)
		}
		if l.outputNull {
			syscall.Dup2(int(null.Fd()), 1)
			syscall.Dup2(int(null.Fd()), 2)
		}
	}
	if err := os.Chdir(l.dir); err != nil {
		return notSimulated("chdir %s: %v", l.dir, err)
	}
	if l.gid >= 0 && l.gid != os.Getgid() || l.uid >= 0 && l.uid != os.Getuid() {
		if os.Geteuid() != 0 {
			return notSimulated("running as uid %d gid %d needs root", l.uid, l.gid)
		}
		gid, uid := l.gid, l.uid
		if gid < 0 {
			gid = os.Getgid()
		}
		if uid < 0 {
			uid = os.Getuid()
		}
		if err := syscall.Setgroups([]int{gid}); err != nil {
			return notSimulated("setgroups: %v", err)
		}
		if err := syscall.Setgid(gid); err != nil {
			return notSimulated("setgid: %v", err)
		}
		if err := syscall.Setuid(uid); err != nil {
			return notSimulated("setuid: %v", err)
		}
	}
	err := syscall.Exec(path, l.argv, l.env)
	return notSimulated("exec %s: %v", path, err)
}

// lookPath finds name in env's PATH, or returns "".
func lookPath(name string, env []string) string {
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// errorf prints a line on stderr, as the tool's warnings.
func errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// isTerminal says whether fd is a terminal.
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}
