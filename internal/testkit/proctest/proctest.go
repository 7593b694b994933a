// Package proctest waits in tests for processes that are not the test's
// children to exit, without polling on a timer: a pidfd becomes readable
// when its process exits.
package proctest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Watch opens a pidfd on each of pids now, so that a pid reused later
// cannot be mistaken for the process; a pid with no process is already
// gone. Call the returned function to wait for them all to exit: it fails
// t naming those still running after within (a bound against hanging, not
// a measurement).
func Watch(t testing.TB, pids ...int) (waitGone func(within time.Duration)) {
	t.Helper()
	fds := map[int]int{}
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		switch {
		case errors.Is(err, unix.ESRCH):
			continue
		case errors.Is(err, unix.ENOSYS):
			t.Fatalf("pidfd_open: %v (Linux 5.3 or later needed)", err)
		case err != nil:
			t.Fatalf("pidfd_open %d: %v", pid, err)
		}
		fds[pid] = fd
	}
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	return func(within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for len(fds) > 0 {
			pfds := make([]unix.PollFd, 0, len(fds))
			for _, fd := range fds {
				pfds = append(pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			}
			left := time.Until(deadline)
			if left <= 0 {
				var still []string
				for pid := range fds {
					still = append(still, Describe(pid))
				}
				t.Fatalf("still running after %v: %s", within, strings.Join(still, "; "))
			}
			if _, err := unix.Poll(pfds, int(left/time.Millisecond)+1); err != nil && !errors.Is(err, unix.EINTR) {
				t.Fatalf("poll pidfds: %v", err)
			}
			for pid, fd := range fds {
				for _, p := range pfds {
					if int(p.Fd) == fd && p.Revents != 0 {
						unix.Close(fd)
						delete(fds, pid)
					}
				}
			}
		}
	}
}

// Describe names pid and its command line, for failure messages.
func Describe(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return fmt.Sprintf("%d (gone)", pid)
	}
	return fmt.Sprintf("%d (%s)", pid, strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")))
}

// InGroup lists the processes of process group pgid that have not
// exited (a zombie has: in a container nobody may reap an orphan).
func InGroup(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if pg, err := strconv.Atoi(f[2]); err == nil && pg == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}
