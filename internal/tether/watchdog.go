package tether

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// What the parent tells the watchdog, on the watchdog's stdin: records of
// one op byte and a big-endian process group id. A record is far below
// PIPE_BUF, so each write of one arrives whole.
const (
	recordLen = 5
	opAdd     = '+'
	opRemove  = '-'
)

// watchdogArg0 and watchdogEnv, both at once, mark a process started as
// the watchdog; only startWatchdog sets them.
const (
	watchdogArg0 = "spindle-tether-watchdog"
	watchdogEnv  = "SPINDLE_TETHER_WATCHDOG"
)

// init turns this process into the watchdog when it was started as one.
// It is an init function rather than something a main function calls so
// that every binary that starts tethered processes (the agent, the spindle
// CLI with its local target, test binaries) is its own watchdog with
// nothing to wire up.
func init() {
	if len(os.Args) == 1 && os.Args[0] == watchdogArg0 && os.Getenv(watchdogEnv) == "1" {
		runWatchdog(os.Stdin)
		os.Exit(0)
	}
}

// runWatchdog keeps the list of groups in until its end of file (the
// parent is gone), then kills every group still listed.
func runWatchdog(in io.Reader) {
	groups := make(map[int]struct{})
	var rec [recordLen]byte
	for {
		if _, err := io.ReadFull(in, rec[:]); err != nil {
			break
		}
		pgid := int(binary.BigEndian.Uint32(rec[1:]))
		if pgid <= 1 {
			continue // kill(-1) would be everything, kill(-0) ourselves
		}
		switch rec[0] {
		case opAdd:
			groups[pgid] = struct{}{}
		case opRemove:
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		syscall.Kill(-pgid, syscall.SIGKILL) //nolint:errcheck // a group that is gone is what we want
	}
}

// watch is the process's one watchdog.
var watch watchdog

// watchdog is the parent's side: the groups to kill should this process
// die, and the pipe to the watchdog process that would do it.
type watchdog struct {
	mu     sync.Mutex
	groups map[int]struct{}
	cmd    *exec.Cmd // the running watchdog; nil before the first group
	w      *os.File  // its stdin
	// failed says why no watchdog runs: children then have PDEATHSIG
	// alone.
	failed error
}

func (d *watchdog) add(pgid int)    { d.update(opAdd, pgid) }
func (d *watchdog) remove(pgid int) { d.update(opRemove, pgid) }

func (d *watchdog) update(op byte, pgid int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if op == opAdd {
		if d.groups == nil {
			d.groups = make(map[int]struct{})
		}
		d.groups[pgid] = struct{}{}
	} else {
		delete(d.groups, pgid)
	}
	if d.failed != nil {
		return
	}
	if d.w != nil {
		if _, err := d.w.Write(record(nil, op, pgid)); err == nil {
			return
		}
		// Only a watchdog that went away (killed by hand) fails a write to
		// its pipe: start another and give it the whole list.
		d.stopLocked()
	}
	if len(d.groups) > 0 {
		d.failed = d.startLocked()
	}
}

func record(buf []byte, op byte, pgid int) []byte {
	buf = append(buf, op, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(buf[len(buf)-4:], uint32(pgid))
	return buf
}

// startLocked starts a watchdog and tells it every listed group.
func (d *watchdog) startLocked() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("tether: start the watchdog: %w", err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{watchdogArg0}
	cmd.Env = []string{watchdogEnv + "=1", "GOMAXPROCS=1"}
	cmd.Dir = "/"
	cmd.Stdin = r // its stdout and stderr are /dev/null: it holds nothing of ours open
	// A group of its own: a Ctrl-C or a kill meant for this process's group
	// must leave it to clean up after this process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return fmt.Errorf("tether: start the watchdog (%s): %w", cmd.Path, err)
	}
	var buf []byte
	for pgid := range d.groups {
		buf = record(buf, opAdd, pgid)
	}
	if _, err := w.Write(buf); err != nil {
		w.Close()
		cmd.Wait() //nolint:errcheck // it is gone; only its status would be left
		return fmt.Errorf("tether: the watchdog exited at once: %w", err)
	}
	d.cmd, d.w = cmd, w
	return nil
}

// Close ends the watchdog as this process's exit would: it kills the
// groups of the children still tethered and exits. Close returns once it
// has, so that nothing this process started outlives its exit (a test
// that rewrites the binary after the process exited would otherwise
// find the watchdog still running it). For a process about to exit:
// children started after Close have PDEATHSIG alone.
func Close() {
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if watch.w != nil {
		watch.stopLocked()
	}
	watch.failed = errors.New("tether: closed")
}

// stopLocked closes the pipe to the watchdog, which ends it (if it had
// not ended already), and reaps it.
func (d *watchdog) stopLocked() {
	d.w.Close()
	d.cmd.Wait() //nolint:errcheck // it is gone; only its status would be left
	d.cmd, d.w = nil, nil
}
