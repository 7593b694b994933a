package bootstrap

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// StalePrefix starts the line an agent prints instead of its hello when its
// own executable does not have the hash the first stage expected:
// `SPINDLE-STALE <nonce> <actual sha256>`. The agent then exits with
// StaleExitCode.
const StalePrefix = "SPINDLE-STALE"

// StaleExitCode is the exit status of an agent that found itself stale.
const StaleExitCode = 3

// ErrStaleAgent is wrapped by the error RemoteStart returns when the cached
// agent failed its self-check (a corrupt or foreign file under the expected
// name). The agent has removed the file: start a fresh session and call
// RemoteStart again, once; that start uploads a fresh agent.
var ErrStaleAgent = errors.New("cached agent failed its self-check")

// CheckSelf verifies, when args.SHA256 is set, that the running executable
// hashes to it. On a mismatch it prints the SPINDLE-STALE line on w (the
// protocol stdout), removes the executable if it is an agent in a private
// cache directory of ours, and returns stale=true with an error saying so:
// the caller exits with StaleExitCode. An error with stale=false means the
// check could not be made (the caller warns and carries on). It is a guard
// against corrupt, truncated or mixed-up cache files, not against a hostile
// agent (which would simply skip it): the private cache directory rules are
// what keep other users out.
//
// Hashing the 6–7 MiB binary costs ~5 ms of CPU at every start, a sixth of
// an agent hop's CPU. So, like git's index, a verified cached agent leaves
// a memo beside itself naming its hash and its file's identity and times;
// a later start whose file still has exactly that identity, size, mtime
// and ctime (which every write changes) skips the hash.
//
// An agent started with -unpacked (args.Unpacked: the first stage has just
// unpacked it) is not checked here but by CheckUnpacked, after its hello.
func CheckSelf(w io.Writer, args AgentArgs) (stale bool, err error) {
	if args.SHA256 == "" || args.Unpacked {
		return false, nil
	}
	return checkSelf(w, args)
}

// CheckUnpacked is CheckSelf for an agent started with -unpacked, meant to
// run after its hello, beside its first calls. The first stage has just
// unpacked the file with gzip or zstd, which checked the stream's CRC-32
// or XXH64 and length, under the name the controller gave for this hash: the hash is
// expected to match, and checking it before the hello would add its ~5 ms
// to every cold start (BENCHMARKS.md, "Agent delivery and start"). It
// reads in 32 KiB steps and yields between them, so that on the agent's
// one P a call waits for at most one step. It leaves the memo as CheckSelf does. On a mismatch it removes the
// file and the memo and returns stale=true with an error saying so; it
// prints nothing (stdout is the bus by now): the agent logs the error
// and exits with StaleExitCode, and the next start uploads afresh.
func CheckUnpacked(args AgentArgs) (stale bool, err error) {
	if args.SHA256 == "" || !args.Unpacked {
		return false, nil
	}
	return checkSelf(nil, args)
}

// checkSelf is CheckSelf's check; a stale line goes to w unless nil.
func checkSelf(w io.Writer, args AgentArgs) (stale bool, err error) {
	// /proc/self/exe opens the very inode we run, even if the path was
	// replaced since; elsewhere fall back to the path.
	self := "/proc/self/exe"
	if _, err := os.Stat(self); err != nil {
		if self, err = os.Executable(); err != nil {
			return false, fmt.Errorf("agent self-check: %w", err)
		}
	}
	f, err := os.Open(self)
	if err != nil {
		return false, fmt.Errorf("agent self-check: %w", err)
	}
	defer f.Close()
	var before unix.Stat_t
	memo := ""
	if unix.Fstat(int(f.Fd()), &before) == nil {
		memo = memoPath(self)
	}
	if memo != "" && readMemo(memo) == memoLine(args.SHA256, &before) {
		markUsed(memo)
		return false, nil
	}
	actual, err := hashAndMemo(f, args.SHA256, memo)
	if err != nil {
		return false, fmt.Errorf("agent self-check: %w", err)
	}
	if actual == args.SHA256 {
		return false, nil
	}
	if memo != "" {
		os.Remove(memo)
	}
	// Remove the file before saying so: the controller starts again as
	// soon as it reads the line, and its first stage must not find the
	// stale file still there.
	removeStaleSelf(self)
	if w != nil {
		fmt.Fprintf(w, "%s %s %s\n", StalePrefix, args.Nonce, actual)
	}
	return true, fmt.Errorf("agent self-check: executable hashes to %s, expected %s", actual, args.SHA256)
}

// memoLine is what the memo of a verified agent file holds.
func memoLine(hash string, st *unix.Stat_t) string {
	return fmt.Sprintf("%s %d %d %d %d.%09d %d.%09d\n", hash, st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}

func readMemo(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 512 {
		return ""
	}
	return string(b)
}

// memoPath is where the self-check memo of our executable goes: beside it,
// if it is an agent file in a private cache directory of ours (the only
// place where a memo could not be forged by someone else); else "".
func memoPath(self string) string {
	path, ok := ownCachedAgent(self)
	if !ok {
		return ""
	}
	return memoBeside(path)
}

// memoBeside is the memo path of the agent file path.
func memoBeside(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".ok")
}

// hashAndMemo hashes the agent file f and, if it hashes to want and
// nothing wrote it while it was read, leaves memo (unless "") for later
// checks to trust. It returns the hash.
func hashAndMemo(f *os.File, want, memo string) (string, error) {
	var before, after unix.Stat_t
	stable := unix.Fstat(int(f.Fd()), &before) == nil
	h := newHasher()
	if _, err := io.Copy(h, yieldingReader{f}); err != nil {
		return "", err
	}
	actual := hex.EncodeToString(h.Sum(nil))
	if actual == want && memo != "" && stable && unix.Fstat(int(f.Fd()), &after) == nil && memoLine(actual, &after) == memoLine(actual, &before) {
		os.WriteFile(memo, []byte(memoLine(actual, &after)), 0o600) //nolint:errcheck // best effort: the next check hashes again
	}
	return actual, nil
}

// markUsed sets the memo's mtime to now: the time an agent file was last
// used, which PruneCache goes by. The agent file's own times must not
// change (its ctime is part of the memo).
func markUsed(memo string) {
	now := time.Now()
	os.Chtimes(memo, now, now) //nolint:errcheck // best effort: pruning then goes by the install time
}

// removeStaleSelf removes our executable if it is `agent-*` in a directory
// that is ours and private, and is still the file we run.
func removeStaleSelf(self string) {
	if path, ok := ownCachedAgent(self); ok {
		os.Remove(path)
	}
}

// ownCachedAgent returns the path of our executable if it is `agent-*` in
// a directory that is ours and private, and is still the file we run.
func ownCachedAgent(self string) (string, bool) {
	path, err := os.Executable()
	if err != nil {
		return "", false
	}
	path = strings.TrimSuffix(path, " (deleted)")
	if !strings.HasPrefix(filepath.Base(path), "agent-") {
		return "", false
	}
	var dir, file, running unix.Stat_t
	if unix.Lstat(filepath.Dir(path), &dir) != nil || unix.Lstat(path, &file) != nil || unix.Stat(self, &running) != nil {
		return "", false
	}
	if dir.Mode&unix.S_IFMT != unix.S_IFDIR || int(dir.Uid) != os.Geteuid() || dir.Mode&0o022 != 0 {
		return "", false
	}
	if file.Mode&unix.S_IFMT != unix.S_IFREG || int(file.Uid) != os.Geteuid() || file.Dev != running.Dev || file.Ino != running.Ino {
		return "", false
	}
	return path, true
}

// yieldingReader lets other goroutines run before each read: a hash that
// runs beside an agent's calls (CheckUnpacked) then delays them by one
// read's worth of hashing at most, not by the whole file.
type yieldingReader struct{ r io.Reader }

func (y yieldingReader) Read(p []byte) (int, error) {
	runtime.Gosched()
	return y.r.Read(p)
}
