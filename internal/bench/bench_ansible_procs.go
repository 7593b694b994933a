package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
	all := map[int]procStat{}
	var roots []int
	err := eachProc(func(pid int, dir string, stat []byte, st procStat) {
		if pid == os.Getpid() {
			return
		}
		all[pid] = st
		if cl, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil && bytes.Contains(cl, []byte(marker)) {
			roots = append(roots, pid)
		}
	})
	if err != nil {
		return nil, err
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
	for _, pid := range parentsFirst(procs) {
		cpu += procs[pid].cpu
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

// parentsFirst orders procs' pids so that a process comes before its
// descendants among them: signalled in that order, no helper sees its
// child end (and exits on its own, with another status) before its own
// signal.
func parentsFirst(procs map[int]procStat) []int {
	depth := func(pid int) int {
		d := 0
		for p, ok := procs[pid]; ok && d < len(procs); p, ok = procs[p.ppid] {
			d++
		}
		return d
	}
	pids := make([]int, 0, len(procs))
	for pid := range procs {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return depth(pids[i]) < depth(pids[j]) })
	return pids
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

// Processes on the target: when the bench's target is its own sshd on
// this machine, what a run leaves there (Mitogen's interpreters, Spindle's
// agent and runner, Ansible's module processes) can be read from /proc
// while the run lasts.

// procEntry is what targetProcs needs of one process.
type procEntry struct {
	ppid int
	uid  int
	comm string
}

// readProcs lists every process with its parent, owner and command name.
func readProcs() (map[int]procEntry, error) {
	out := map[int]procEntry{}
	err := eachProc(func(pid int, dir string, stat []byte, st procStat) {
		fi, err := os.Stat(dir)
		if err != nil {
			return
		}
		sys, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return
		}
		comm := ""
		if i, j := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')'); i >= 0 && j > i {
			comm = string(stat[i+1 : j])
		}
		out[pid] = procEntry{ppid: st.ppid, uid: int(sys.Uid), comm: comm}
	})
	return out, err
}

// eachProc calls fn for every process in /proc with its directory, its
// stat line and that line parsed; a process gone meanwhile is skipped.
func eachProc(fn func(pid int, dir string, stat []byte, st procStat)) error {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		st, err := parseProcStat(b)
		if err != nil {
			return fmt.Errorf("pid %d: %w", pid, err)
		}
		fn(pid, dir, b, st)
	}
	return nil
}

// targetProcs are the processes of uid and all their descendants (a
// become's root interpreter under sudo among them), except sshd's own
// session processes, which every system has alike, and the pids in old.
func targetProcs(procs map[int]procEntry, uid int, old map[int]bool) map[int]bool {
	in := map[int]bool{}
	for pid, p := range procs {
		if p.uid == uid {
			in[pid] = true
		}
	}
	for grew := true; grew; {
		grew = false
		for pid, p := range procs {
			if !in[pid] && in[p.ppid] {
				in[pid] = true
				grew = true
			}
		}
	}
	for pid := range in {
		if old[pid] || procs[pid].comm == "sshd" {
			delete(in, pid)
		}
	}
	return in
}

// targetRSSEvery is how often a run's target processes are sampled: often
// enough to see what lives for the run (an interpreter, an agent), rarely
// enough to cost the machine, which the run shares, next to nothing.
const targetRSSEvery = 100 * time.Millisecond

// rssWatch samples, until stopped, the summed RSS and PSS of the target
// processes that were not there when it started, and keeps the peaks.
// RSS counts the pages a forked child shares with its parent in both;
// PSS splits them, so that a design that forks (Mitogen's per-task
// children, Spindle's runner) is not charged twice for one page.
type rssWatch struct {
	stop chan struct{}
	done chan struct{}
	peak targetMem
}

// targetMem is a sample's or a run's memory on the target, bytes.
type targetMem struct{ rss, pss int64 }

// watchTargetRSS starts sampling the processes of uid (targetProcs).
func watchTargetRSS(uid int) (*rssWatch, error) {
	procs, err := readProcs()
	if err != nil {
		return nil, err
	}
	old := targetProcs(procs, uid, nil)
	w := &rssWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(targetRSSEvery)
		defer t.Stop()
		for {
			w.sample(uid, old)
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w, nil
}

func (w *rssWatch) sample(uid int, old map[int]bool) {
	procs, err := readProcs()
	if err != nil {
		return
	}
	var sum targetMem
	for pid := range targetProcs(procs, uid, old) {
		sum.rss += rss(pid)
		sum.pss += pss(pid)
	}
	w.peak.rss = max(w.peak.rss, sum.rss)
	w.peak.pss = max(w.peak.pss, sum.pss)
}

// pss is a process's proportional set size in bytes (0 if unknown).
func pss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// Stop ends the sampling and returns the peaks.
func (w *rssWatch) Stop() targetMem {
	close(w.stop)
	<-w.done
	return w.peak
}
