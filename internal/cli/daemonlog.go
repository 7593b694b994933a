package cli

import (
	"fmt"
	"os"
	"sync"
)

// The daemon's log file is bounded: when a record would take it past
// maxDaemonLog, the file is moved aside to FILE + rotatedLogSuffix
// (replacing the one before) and a fresh one started, so that a daemon
// that runs for months, or is restarted day after day, keeps at most
// about twice maxDaemonLog of log.
const (
	maxDaemonLog     = 10 << 20
	rotatedLogSuffix = ".1"
)

// daemonLog is the daemon's log file, rotated by size. Each Write is one
// record (zap writes a whole entry at a time), which is never split
// between two files.
type daemonLog struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	size int64
}

// openDaemonLog opens path for appending, moving it aside first when it
// has grown past maxDaemonLog.
func openDaemonLog(path string) (*daemonLog, error) {
	l := &daemonLog{path: path, max: maxDaemonLog}
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() > l.max {
		if err := os.Rename(path, path+rotatedLogSuffix); err != nil {
			return nil, fmt.Errorf("rotating the daemon log: %w", err)
		}
	}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *daemonLog) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Write appends one record, rotating first when it would take the file
// past the limit.
func (l *daemonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size > 0 && l.size+int64(len(p)) > l.max {
		l.rotate()
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// rotate moves the file aside and starts a fresh one. If it cannot be
// moved (the directory became read-only), the file is emptied instead:
// the bound holds, at the price of the old records.
func (l *daemonLog) rotate() {
	if err := os.Rename(l.path, l.path+rotatedLogSuffix); err == nil {
		old := l.f
		if err := l.open(); err == nil {
			old.Close()
			return
		}
		l.f = old // keep writing to the moved file, emptied below
	}
	if l.f.Truncate(0) == nil {
		l.size = 0
	}
}

// Close closes the file, removing it when it is empty: nothing went
// wrong, and one is made per environment.
func (l *daemonLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size == 0 {
		os.Remove(l.path)
	}
	return l.f.Close()
}
