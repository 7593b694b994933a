// Package pyrunner keeps warm Python processes on an agent that run
// pipelined AnsiballZ modules by forking, so that a module run costs a
// fork instead of an interpreter start and the import of
// ansible.module_utils.
//
// A runner is one "INTERPRETER -c runner.py ZIP" process per interpreter,
// environment and zip family (the ansible/ entries of a module's zip
// outside ansible/modules/, which the runner preloads: a runner is never
// used for a zip whose module_utils differ from what it imported). It
// imports ansible.module_utils.basic from the first zip of its family,
// then forks per run; the child takes the run's stdin, stdout and stderr
// (passed over a socket), environment and working directory, becomes
// what a fresh interpreter reading its script from stdin would be, and
// exits through the interpreter's own exit. Nothing a module does reaches
// the runner or the next module.
//
// While nothing runs, the runner forks its next run ahead; that fork
// readies what no request changes, makes its own copy of the runner's
// writable memory (so that the module's writes cost no page faults),
// then reads its request from the agent's socket itself (the runner
// leaves the socket to it until it took one): the fork, its page copies
// and a hop through the runner are paid between tasks. A run closes its
// standard streams and reports its exit status (a datagram to the
// runner, whose sender the runner knows from the kernel's credentials)
// before its address space is torn down, which takes about as long as a
// small module's run; the runner's waitpid reports the runs that could
// not.
//
// Whatever cannot host a runner (no such interpreter, older than 3.6, no
// os.fork, a zip that does not preload) makes Start return an error
// wrapping ErrUnavailable: the caller runs the command the plain way.
// A runner that dies is replaced on the next Start; one whose resident
// memory grew past Pool.MaxRSS is replaced after its run.
//
// A module's zip is most of its script (175 KiB of a command module's
// 180): a runner holds the text of the zips it was given (at most 32
// MiB, runner.py's ZIP_TEXT_MAX), read once from its private directory,
// and a run reads and compiles only the wrapper around it (Spec.Apart).
package pyrunner

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/internal/tether"
	"golang.org/x/sys/unix"
)

//go:embed runner.py
var script string

// ErrUnavailable says that no runner can host a run: run it plainly.
var ErrUnavailable = errors.New("pyrunner: no warm runner for this run")

// ErrDied is the error of the runs in flight when their runner died.
var ErrDied = errors.New("pyrunner: the module runner died during the run")

// Defaults of a Pool.
const (
	DefaultMaxRunners = 8
	DefaultMaxRSS     = 256 << 20
	// StartTimeout bounds a runner's start and preload.
	StartTimeout = 60 * time.Second
	// retryUnsupported is how long an interpreter that could not host a
	// runner is not asked again.
	retryUnsupported = time.Minute
)

// Pool is an agent's set of runners; safe for concurrent use.
type Pool struct {
	// MaxRunners bounds the runners kept; past it the least recently
	// used idle one stops. Default DefaultMaxRunners.
	MaxRunners int
	// MaxRSS bounds a runner's resident memory; default DefaultMaxRSS.
	// Its next run, forked ahead, holds as much again while it waits.
	MaxRSS int64
	// CodeCacheDir is where runners keep the compiled code of the
	// module_utils they preload, a file per family and interpreter
	// (runner.py's CodeCache, at most 16 files); default pycode/ in
	// the agent's private cache directory (bootstrap.PrivateDir),
	// "-" for none.
	CodeCacheDir string

	families families

	mu          sync.Mutex
	runners     map[key]*runner
	unsupported map[string]time.Time // by interpreter
	failed      map[key]time.Time    // runners that failed to start
}

// Default is the agent's pool.
var Default = &Pool{}

type key struct {
	interp string
	env    [sha256.Size]byte
	family [sha256.Size]byte
}

// Spec says what a run is.
type Spec struct {
	// Interpreter is the absolute path of the Python to run.
	Interpreter string
	// Env and Dir are the run's environment and working directory.
	Env []string
	Dir string
	// Zip is the module's zip in base64, as the AnsiballZ wrapper holds
	// it; the runner preloads its ansible.module_utils.
	Zip []byte
	// Apart says that the script on stdin lacks Zip, which belongs at
	// byte ZipAt of it: the runner holds each zip's text, and a run
	// compiles only the wrapper's few KiB around it. Without it stdin
	// holds the whole script.
	Apart bool
	ZipAt int
}

// families caches the family of each zip seen, by the sha256 of its
// base64 text.
type families struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]familyOf
}

type familyOf struct {
	sum [sha256.Size]byte
	err error
}

const maxFamilies = 1024

// of returns the family of zip64, and zip64's own sha256.
func (f *families) of(zip64 []byte) (family, self [sha256.Size]byte, err error) {
	k := sha256.Sum256(zip64)
	f.mu.Lock()
	fo, ok := f.m[k]
	f.mu.Unlock()
	if ok {
		return fo.sum, k, fo.err
	}
	raw, err := base64.StdEncoding.DecodeString(string(zip64))
	if err == nil {
		fo.sum, fo.err = Family(raw)
	} else {
		fo.err = err
	}
	f.mu.Lock()
	if f.m == nil || len(f.m) >= maxFamilies {
		f.m = map[[sha256.Size]byte]familyOf{}
	}
	f.m[k] = fo
	f.mu.Unlock()
	return fo.sum, k, fo.err
}

// maxFamilyBytes bounds the bytes Family reads from a zip's entries.
const maxFamilyBytes = 64 << 20

// Family is the digest of a zip's entries under ansible/ outside
// ansible/modules/ (names and contents), or an error for a zip that is
// not one of an AnsiballZ module.
func Family(zipData []byte) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	zr, err := zip.NewReader(bytes.NewReader(zipData), int64(len(zipData)))
	if err != nil {
		return sum, err
	}
	var files []*zip.File
	basic := false
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, "ansible/") && !strings.HasPrefix(f.Name, "ansible/modules/") {
			files = append(files, f)
			basic = basic || f.Name == "ansible/module_utils/basic.py"
		}
	}
	if !basic {
		return sum, errors.New("no ansible/module_utils/basic.py in the zip")
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	h, eh := sha256.New(), sha256.New()
	buf := make([]byte, 32<<10)
	var n [8]byte
	left := int64(maxFamilyBytes)
	for _, f := range files {
		rc, err := f.Open()
		if err != nil {
			return sum, fmt.Errorf("%s: %w", f.Name, err)
		}
		eh.Reset()
		copied, err := io.CopyBuffer(eh, io.LimitReader(rc, left+1), buf)
		rc.Close()
		if err != nil {
			return sum, fmt.Errorf("%s: %w", f.Name, err)
		}
		if left -= copied; left < 0 {
			return sum, fmt.Errorf("more than %d bytes of module_utils in the zip", maxFamilyBytes)
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Name)))
		h.Write(n[:])
		h.Write([]byte(f.Name))
		h.Write(eh.Sum(buf[:0]))
	}
	h.Sum(sum[:0])
	return sum, nil
}

// Proc is a run in a fork of a runner.
type Proc struct {
	// Pid is the child's pid, which is also its process group's.
	Pid int

	r       *runner
	release func()
	done    chan struct{}
	status  syscall.WaitStatus
	err     error
}

// Wait waits for the run's end and returns its wait status.
func (p *Proc) Wait() (syscall.WaitStatus, error) {
	<-p.done
	p.release()
	if p.err == nil {
		p.r.pool.afterRun(p.r)
	}
	return p.status, p.err
}

// Start runs the script read from stdin (the read end of a pipe) in a
// fork of the runner for spec, with stdout and stderr; the files are the
// caller's to close. An error wrapping ErrUnavailable means nothing ran.
func (p *Pool) Start(ctx context.Context, spec Spec, stdin, stdout, stderr *os.File) (*Proc, error) {
	if !filepath.IsAbs(spec.Interpreter) {
		return nil, fmt.Errorf("%w: interpreter %q is not an absolute path", ErrUnavailable, spec.Interpreter)
	}
	if spec.Apart && (spec.ZipAt < 0 || len(spec.Zip) == 0) {
		return nil, fmt.Errorf("%w: a zip apart from the script at byte %d", ErrUnavailable, spec.ZipAt)
	}
	family, zipSum, err := p.families.of(spec.Zip)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	k := key{interp: spec.Interpreter, env: envSum(spec.Env), family: family}
	for attempt := 0; ; attempt++ {
		r, err := p.get(ctx, k, spec)
		if err != nil {
			return nil, err
		}
		proc, err := r.start(spec, zipSum, stdin, stdout, stderr)
		if err == nil || !errors.Is(err, ErrDied) {
			return proc, err
		}
		if attempt > 0 {
			// Its fork, if there was one, died with it.
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		// It had died while idle, and nothing ran: start another one.
		p.mu.Lock()
		if p.runners[k] == r {
			delete(p.runners, k)
		}
		p.mu.Unlock()
	}
}

func envSum(env []string) [sha256.Size]byte {
	h := sha256.New()
	for _, kv := range env {
		h.Write([]byte(kv))
		h.Write([]byte{0})
	}
	var s [sha256.Size]byte
	h.Sum(s[:0])
	return s
}

// get returns the runner for k, started now if there is none.
func (p *Pool) get(ctx context.Context, k key, spec Spec) (*runner, error) {
	p.mu.Lock()
	if until, ok := p.unsupported[k.interp]; ok && time.Now().Before(until) {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %s cannot host a runner", ErrUnavailable, k.interp)
	}
	if until, ok := p.failed[k]; ok && time.Now().Before(until) {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: a runner for this interpreter, environment and module_utils failed to start", ErrUnavailable)
	}
	if p.runners == nil {
		p.runners = map[key]*runner{}
	}
	r := p.runners[k]
	if r != nil && r.dead() {
		delete(p.runners, k)
		r = nil
	}
	if r == nil {
		r = &runner{pool: p, key: k, ready: make(chan struct{}), exited: make(chan struct{}), loopDone: make(chan struct{})}
		r.spareSeen = sync.NewCond(&r.mu)
		r.used = time.Now()
		p.runners[k] = r
		p.evictLocked()
		go r.run(spec)
	}
	r.used = time.Now()
	p.mu.Unlock()

	select {
	case <-r.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.startErr != nil {
		p.mu.Lock()
		if p.runners[k] == r {
			delete(p.runners, k)
		}
		if errors.Is(r.startErr, errUnsupported) {
			if p.unsupported == nil {
				p.unsupported = map[string]time.Time{}
			}
			p.unsupported[k.interp] = time.Now().Add(retryUnsupported)
		} else {
			// A zip whose module_utils do not preload (another
			// ansible-core's wrapper may need more) must not cost a
			// failed start per run.
			if p.failed == nil || len(p.failed) >= maxFamilies {
				p.failed = map[key]time.Time{}
			}
			p.failed[k] = time.Now().Add(retryUnsupported)
		}
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, r.startErr)
	}
	return r, nil
}

// evictLocked stops the least recently used idle runners past MaxRunners.
func (p *Pool) evictLocked() {
	max := p.MaxRunners
	if max <= 0 {
		max = DefaultMaxRunners
	}
	for len(p.runners) > max {
		var old *runner
		for _, r := range p.runners {
			if r.busy() == 0 && (old == nil || r.used.Before(old.used)) {
				old = r
			}
		}
		if old == nil {
			return
		}
		delete(p.runners, old.key)
		old.stop()
	}
}

// afterRun replaces r if it grew too large.
func (p *Pool) afterRun(r *runner) {
	max := p.MaxRSS
	if max <= 0 {
		max = DefaultMaxRSS
	}
	if n := rss(r.pid); n > max {
		p.mu.Lock()
		if p.runners[r.key] == r {
			delete(p.runners, r.key)
		}
		p.mu.Unlock()
		r.stopWhenIdle()
	}
}

// Stat describes a runner.
type Stat struct {
	Interpreter string
	Pid         int
	// RSS is the runner's resident memory in bytes (its forks not
	// included); SpareRSS that of its next run, forked ahead and
	// waiting, which holds a private copy of the runner's writable
	// memory once populated (0: none now).
	RSS, SpareRSS int64
	// Runs is how many runs it forked; Ahead how many of them were
	// forked before their request (a spare, in runner.py);
	// EarlyStatuses how many reported their status before their
	// teardown (report_status), the others when the runner reaped them.
	Runs, Ahead, EarlyStatuses int64
	// Preloaded are the modules it imported from its first zip;
	// CachedCode how many of the zip's sources it did not compile, their
	// code cached by an earlier runner (Pool.CodeCacheDir).
	Preloaded  []string
	CachedCode int
}

// Stats describes the live runners.
func (p *Pool) Stats() []Stat {
	p.mu.Lock()
	rs := make([]*runner, 0, len(p.runners))
	for _, r := range p.runners {
		rs = append(rs, r)
	}
	p.mu.Unlock()
	var out []Stat
	for _, r := range rs {
		select {
		case <-r.ready:
		default:
			continue
		}
		if r.startErr != nil || r.dead() {
			continue
		}
		r.mu.Lock()
		s := Stat{Interpreter: r.key.interp, Pid: r.pid, Runs: r.runs, Ahead: r.ahead, EarlyStatuses: r.early, Preloaded: r.preloaded, CachedCode: r.cachedCode}
		spare := r.spare
		r.mu.Unlock()
		s.RSS = rss(r.pid)
		if spare != 0 {
			s.SpareRSS = rss(spare)
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return out
}

// Close stops every runner (and the runs in flight) and returns once
// they are gone.
func (p *Pool) Close() {
	p.mu.Lock()
	rs := p.runners
	p.runners = nil
	p.mu.Unlock()
	for _, r := range rs {
		<-r.ready
		if r.startErr == nil {
			r.kill()
			<-r.loopDone
		}
	}
}

var errUnsupported = errors.New("the interpreter cannot host a runner")

// codeCacheDir is CodeCacheDir or its default, "" for none.
func (p *Pool) codeCacheDir() string {
	switch p.CodeCacheDir {
	case "-":
		return ""
	case "":
		d, err := bootstrap.PrivateDir()
		if err != nil {
			return ""
		}
		return filepath.Join(d, "pycode")
	}
	return p.CodeCacheDir
}

// runner is one warm interpreter.
type runner struct {
	pool *Pool
	key  key
	used time.Time // under pool.mu

	ready    chan struct{} // closed once started, or failed (startErr)
	startErr error
	exited   chan struct{} // closed once the process was waited for
	loopDone chan struct{} // closed once readLoop returned

	cmd *exec.Cmd
	ctl *os.File // our end of the control socket
	dir string
	pid int
	wmu sync.Mutex // serialises requests and their replies
	// zipFiles are the zips written to dir for the runner (zipFile),
	// the least recently used first; under wmu.
	zipFiles [][sha256.Size]byte
	mu       sync.Mutex
	runs     int64
	early    int64 // runs whose status came before their teardown
	ahead    int64 // runs forked before their request
	// spare is the pid of the fork made ahead that waits for a request,
	// 0 when none is known; spareSeen is signalled when one is learnt.
	spare     int
	spareSeen *sync.Cond
	next      int64
	// started gets the reply to the request in flight.
	started    chan startReply
	procs      map[int]*Proc // by pid, runs not yet ended
	died       bool
	idleStop   bool
	preloaded  []string
	cachedCode int
}

type startReply struct {
	proc *Proc
	err  error
}

// msg is what the runner sends.
type msg struct {
	Ready     bool     `json:"ready"`
	Pid       int      `json:"pid"`
	Preloaded []string `json:"preloaded"`
	Cached    int      `json:"cached_code"`
	Error     string   `json:"error"`
	ID        *int64   `json:"id"`
	Status    *int     `json:"status"`
	Early     bool     `json:"early"`
	Ahead     bool     `json:"ahead"`
	Spare     int      `json:"spare"` // the pid of a fork made ahead
}

// run starts the runner and reads its messages until it ends.
func (r *runner) run(spec Spec) {
	err := r.startProcess(spec)
	if err != nil {
		r.startErr = err
		close(r.ready)
		return
	}
	close(r.ready)
	r.readLoop()
}

func (r *runner) startProcess(spec Spec) error {
	dir, err := os.MkdirTemp("", "spindle-pyrunner-")
	if err != nil {
		return err
	}
	r.dir = dir
	zipPath := filepath.Join(dir, "module_utils.zip")
	raw, err := base64.StdEncoding.DecodeString(string(spec.Zip))
	if err == nil {
		err = os.WriteFile(zipPath, raw, 0o600)
	}
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	// Our end non-blocking, so that it is the poller's: a read then
	// honours its deadline (StartTimeout) and a Close ends it.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		os.RemoveAll(dir)
		return err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "pyrunner-ctl"), os.NewFile(uintptr(fds[1]), "pyrunner-ctl")
	args := []string{"-c", script, zipPath}
	if dir := r.pool.codeCacheDir(); dir != "" {
		interp := sha256.Sum256([]byte(spec.Interpreter))
		args = append(args, filepath.Join(dir, hex.EncodeToString(r.key.family[:8])+"-"+hex.EncodeToString(interp[:8])+".marshal"))
	}
	cmd := exec.Command(spec.Interpreter, args...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Pipes, as a module's stdin, stdout and stderr are: a fork inherits
	// sys.stdin, sys.stdout and sys.stderr made for them (buffering,
	// seekable), and only their file descriptors are replaced.
	var stdout, stderr bytes.Buffer
	cmd.Stdin = strings.NewReader("")
	cmd.Stdout = &limitedBuffer{b: &stdout, max: 4 << 10}
	cmd.Stderr = &limitedBuffer{b: &stderr, max: 4 << 10}
	release, err := tether.Start(cmd)
	theirs.Close()
	if err != nil {
		ours.Close()
		os.RemoveAll(dir)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("%w: %v", errUnsupported, err)
		}
		return err
	}
	r.cmd, r.ctl, r.pid = cmd, ours, cmd.Process.Pid
	go func() {
		cmd.Wait() //nolint:errcheck // its end is what matters, seen on the socket
		release()
		os.RemoveAll(dir)
		close(r.exited)
	}()
	// The first message says it is ready, or why not; a runner that
	// exits first could not start (its stderr says why).
	ours.SetReadDeadline(time.Now().Add(StartTimeout)) //nolint:errcheck // a socket supports deadlines
	m, _, err := r.read()
	ours.SetReadDeadline(time.Time{}) //nolint:errcheck // as above
	if err != nil || !m.Ready {
		r.kill()
		<-r.exited
		why := strings.TrimSpace(stderr.String())
		if m.Error != "" {
			why = m.Error
		}
		if why == "" && err != nil {
			why = err.Error()
		}
		if strings.Contains(why, "unsupported:") {
			return fmt.Errorf("%w: %s", errUnsupported, why)
		}
		return fmt.Errorf("%s runner did not start: %s", spec.Interpreter, why)
	}
	r.preloaded, r.cachedCode = m.Preloaded, m.Cached
	return nil
}

// read reads one message from the runner.
func (r *runner) read() (msg, int, error) {
	var m msg
	buf := make([]byte, 64<<10)
	n, err := r.ctl.Read(buf)
	if err != nil {
		return m, 0, err
	}
	if n == 0 {
		return m, 0, errors.New("the runner closed its socket")
	}
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		return m, n, fmt.Errorf("a message from the runner: %w", err)
	}
	return m, n, nil
}

// readLoop delivers the runner's replies and its children's statuses.
func (r *runner) readLoop() {
	defer close(r.loopDone)
	for {
		m, _, err := r.read()
		if err != nil {
			break
		}
		r.mu.Lock()
		switch {
		case m.ID != nil || (m.Error != "" && m.Status == nil):
			// The answer to the request in flight (an error, even
			// one whose id could not be read).
			if r.started != nil {
				var rep startReply
				if m.Error != "" {
					rep.err = errors.New(m.Error)
				} else {
					// Known before its status can arrive.
					rep.proc = &Proc{Pid: m.Pid, r: r, done: make(chan struct{}), release: tether.Track(m.Pid)}
					if r.procs == nil {
						r.procs = map[int]*Proc{}
					}
					r.procs[m.Pid] = rep.proc
					r.runs++
					if m.Ahead {
						r.ahead++
					}
					if m.Pid == r.spare {
						r.spare = 0 // a run now
					}
				}
				r.started <- rep
				r.started = nil
			}
		case m.Spare != 0:
			r.spare = m.Spare
			r.spareSeen.Broadcast()
		case m.Status != nil:
			if p := r.procs[m.Pid]; p != nil {
				delete(r.procs, m.Pid)
				if m.Early {
					r.early++
				}
				p.status = syscall.WaitStatus(*m.Status)
				close(p.done)
			}
		}
		idle := r.idleStop && len(r.procs) == 0
		r.mu.Unlock()
		if idle {
			r.kill()
		}
	}
	r.kill()
	<-r.exited
	r.mu.Lock()
	r.died = true
	r.spareSeen.Broadcast()
	if r.started != nil {
		r.started <- startReply{err: ErrDied}
		r.started = nil
	}
	for pid, p := range r.procs {
		// Its exit status is lost with the runner: end what is left of it.
		syscall.Kill(-pid, syscall.SIGKILL) //nolint:errcheck // it may be gone
		p.err = ErrDied
		close(p.done)
	}
	r.procs = nil
	r.mu.Unlock()
	r.ctl.Close()
}

func (r *runner) dead() bool {
	select {
	case <-r.ready:
	default:
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.died
}

func (r *runner) busy() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.procs)
}

func (r *runner) kill() {
	syscall.Kill(-r.pid, syscall.SIGKILL) //nolint:errcheck // it may be gone
}

func (r *runner) stop() {
	select {
	case <-r.ready:
	default:
		go func() { <-r.ready; r.stop() }()
		return
	}
	if r.cmd != nil {
		r.kill()
	}
}

func (r *runner) stopWhenIdle() {
	r.mu.Lock()
	r.idleStop = true
	idle := len(r.procs) == 0
	r.mu.Unlock()
	if idle {
		r.kill()
	}
}

// nextSpare waits until r knows of a fork made ahead, and returns its
// pid (0: the runner died first).
func (r *runner) nextSpare() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.spare == 0 && !r.died {
		r.spareSeen.Wait()
	}
	return r.spare
}

// rss is process pid's resident set size in bytes, 0 if unknown.
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// start asks the runner for a fork running the script on stdin.
func (r *runner) start(spec Spec, zipSum [sha256.Size]byte, stdin, stdout, stderr *os.File) (*Proc, error) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.mu.Lock()
	if r.died {
		r.mu.Unlock()
		return nil, ErrDied
	}
	r.next++
	id := r.next
	replies := make(chan startReply, 1)
	r.started = replies
	r.mu.Unlock()

	cwd := spec.Dir
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	fields := map[string]any{"id": id, "env": slices.Clip(spec.Env), "cwd": cwd}
	if spec.Apart {
		path, err := r.zipFile(zipSum, spec.Zip)
		if err != nil {
			r.mu.Lock()
			r.started = nil
			r.mu.Unlock()
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		fields["zip"] = map[string]any{"key": hex.EncodeToString(zipSum[:]), "path": path, "at": spec.ZipAt}
	}
	req, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	rights := unix.UnixRights(int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd()))
	rc, err := r.ctl.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	cerr := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), req, rights, nil, 0)
		return serr != unix.EAGAIN
	})
	if cerr == nil {
		cerr = serr
	}
	if cerr != nil {
		r.mu.Lock()
		r.started = nil
		r.mu.Unlock()
		if errors.Is(cerr, unix.EMSGSIZE) {
			return nil, fmt.Errorf("%w: environment too large for the runner's socket", ErrUnavailable)
		}
		r.kill()
		return nil, ErrDied
	}
	rep := <-replies
	if rep.err != nil {
		if errors.Is(rep.err, ErrDied) {
			return nil, ErrDied
		}
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, rep.err)
	}
	return rep.proc, nil
}

// maxZipFiles bounds the zips a runner's directory holds for it to
// load (runner.py keeps the text of those it loaded, bounded too).
const maxZipFiles = 16

// zipFile returns the file in the runner's private directory that holds
// zip64, whose sha256 is sum, written now if it is not there. Called
// with wmu held.
func (r *runner) zipFile(sum [sha256.Size]byte, zip64 []byte) (string, error) {
	path := filepath.Join(r.dir, hex.EncodeToString(sum[:])+".b64")
	if i := slices.Index(r.zipFiles, sum); i >= 0 {
		r.zipFiles = append(slices.Delete(r.zipFiles, i, i+1), sum) // the most recent last
		return path, nil
	}
	if len(r.zipFiles) >= maxZipFiles {
		old := r.zipFiles[0]
		r.zipFiles = slices.Delete(r.zipFiles, 0, 1)
		os.Remove(filepath.Join(r.dir, hex.EncodeToString(old[:])+".b64"))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, zip64, 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", err
	}
	r.zipFiles = append(r.zipFiles, sum)
	return path, nil
}

// limitedBuffer keeps the first max bytes written.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
