package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Helper processes of a playbook run: what outlives ansible-playbook and
// works for it (OpenSSH's ControlPersist master, the spindle daemon).
// Nobody waits for them, so their CPU is in no rusage of the run: it is
// read from /proc before they are stopped.

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Spindle builds for (sysconf needs cgo).
const clockTicks = 100

// procStat is what the bench reads from /proc/PID/stat.
type procStat struct {
	ppid int
	// cpu is utime + stime + cutime + cstime: the process's own CPU and
	// that of the children it has waited for.
	cpu time.Duration
}

// parseProcStat reads /proc/PID/stat's text. The command name (field 2)
// is in parentheses and may hold spaces and parentheses itself, so the
// fields are counted from the last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("/proc stat: no ')' after the command name")
	}
	// After ')': state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
	f := bytes.Fields(b[i+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc stat: %d fields after the command name, want at least 15", len(f))
	}
	num := func(k int) (int64, error) {
		v, err := strconv.ParseInt(string(f[k-3]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat field %d: %w", k, err)
		}
		return v, nil
	}
	ppid, err := num(4)
	if err != nil {
		return procStat{}, err
	}
	var ticks int64
	for k := 14; k <= 17; k++ {
		v, err := num(k)
		if err != nil {
			return procStat{}, err
		}
		ticks += v
	}
	return procStat{ppid: int(ppid), cpu: time.Duration(ticks) * time.Second / clockTicks}, nil
}

// helperProcs returns the processes whose command line contains marker
// (a path of the run's own), with all their descendants, and the CPU of
// each.
func helperProcs(marker string) (map[int]procStat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	all := map[int]procStat{}
	var roots []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		st, err := parseProcStat(b)
		if err != nil {
			return nil, fmt.Errorf("pid %d: %w", pid, err)
		}
		all[pid] = st
		if cl, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil && bytes.Contains(cl, []byte(marker)) {
			roots = append(roots, pid)
		}
	}
	out := map[int]procStat{}
	for _, r := range roots {
		out[r] = all[r]
	}
	// Descendants, to any depth: add children of what is in until nothing
	// new comes.
	for grew := true; grew; {
		grew = false
		for pid, st := range all {
			if _, in := out[pid]; !in {
				if _, parentIn := out[st.ppid]; parentIn {
					out[pid] = st
					grew = true
				}
			}
		}
	}
	return out, nil
}

// stopHelpers reads the CPU of marker's helper processes, then stops them
// (SIGTERM, then SIGKILL after 5 s) and waits until they are gone.
func stopHelpers(marker string) (time.Duration, error) {
	procs, err := helperProcs(marker)
	if err != nil {
		return 0, err
	}
	var cpu time.Duration
	for pid, st := range procs {
		cpu += st.cpu
		syscall.Kill(pid, syscall.SIGTERM) //nolint:errcheck // it may have exited
	}
	deadline := time.Now().Add(5 * time.Second)
	for pid := range procs {
		for alive(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // it may have exited
			}
			if time.Now().After(deadline.Add(5 * time.Second)) {
				return cpu, fmt.Errorf("helper process %d outlived SIGKILL", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return cpu, nil
}

// alive says whether pid is still a running process (a zombie is not:
// its parent, not the bench, reaps it).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}
