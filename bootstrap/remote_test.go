package bootstrap_test

import (
	"bytes"
	"compress/gzip"
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/internal/testkit"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/rpc"
	spexec "github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) {
	if _, err := testagent.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

const depsHint = "run scripts/test-deps.sh as root, which installs it"

// loginShell is how a session's login shell would run the command string.
type loginShell struct {
	name string
	argv []string // the command string is appended after these
}

var loginShells = []loginShell{
	{"sh", []string{"/bin/sh", "-c"}},
	{"bash", []string{"bash", "-c"}},
	{"dash", []string{"dash", "-c"}},
	{"zsh", []string{"zsh", "-c"}},
	{"fish", []string{"fish", "-c"}},
	{"tcsh", []string{"tcsh", "-c"}},
	{"busybox", []string{"busybox", "sh", "-c"}},
}

func need(t *testing.T, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		testkit.Unavailable(t, prog+" is not installed: "+depsHint)
	}
	return p
}

// target is a fake remote machine: a private XDG_RUNTIME_DIR and HOME, and
// a PATH (which decides what `sh` the stage runs under).
type target struct {
	t    *testing.T
	xdg  string
	home string
	path string
	// dirs lists the cache dir candidates (sh words). It is private to the
	// target: the real list also names /dev/shm/spindle-$uid, which other
	// packages' tests running at the same time fill with this very agent,
	// so a "cold" start would find it there and run it warm.
	dirs     string
	extraEnv []string
}

func newTarget(t *testing.T) *target {
	root := t.TempDir()
	tg := &target{t: t, xdg: filepath.Join(root, "xdg"), home: filepath.Join(root, "home"), path: os.Getenv("PATH")}
	for _, d := range []string{tg.xdg, tg.home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tg.dirs = `"${XDG_RUNTIME_DIR:+$XDG_RUNTIME_DIR/spindle}" "${HOME:+$HOME/.cache/spindle}"`
	return tg
}

func (tg *target) env() []string {
	return append([]string{"PATH=" + tg.path, "HOME=" + tg.home, "XDG_RUNTIME_DIR=" + tg.xdg, "LANG=C"}, tg.extraEnv...)
}

func (tg *target) cacheDir() string { return filepath.Join(tg.xdg, "spindle") }

// session starts argv + cmdline like an SSH exec request would; stderr is
// logged. closeFn waits for the process (killing it after a grace period).
type session struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	closed atomic.Int32
	stderr *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (tg *target) start(sh loginShell, cmdline string) *session {
	tg.t.Helper()
	argv := append(append([]string{}, sh.argv...), cmdline)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = tg.env()
	cmd.Dir = tg.home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &session{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = s.stderr
	var err error
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		tg.t.Fatal(err)
	}
	if s.stdout, err = cmd.StdoutPipe(); err != nil {
		tg.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tg.t.Fatal(err)
	}
	return s
}

func (s *session) close() error {
	s.closed.Add(1)
	s.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		return <-done
	}
}

// connector runs the first stage through a login shell on a target, like
// the SSH connector does through a session, and retries once on
// ErrStaleAgent.
type connector struct {
	tg     *target
	sh     loginShell
	src    bootstrap.Source
	prefix string // run by the login shell before the stage (noise)
	noProc bool   // the stage cannot read the platform from /proc
	opts   []bootstrap.StartOption
	log    *zap.Logger
	stale  int // ErrStaleAgent seen
}

func (c *connector) Name() string { return "fake:" + c.sh.name + " → a b%" }

func (c *connector) Start(ctx stdctx.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	for attempt := 0; ; attempt++ {
		conn, err := c.startOnce(ctx, req)
		if errors.Is(err, bootstrap.ErrStaleAgent) && attempt == 0 {
			c.stale++
			req.Fresh = true
			continue
		}
		return conn, err
	}
}

func (c *connector) startOnce(ctx stdctx.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	args := req.Args()
	var cmdline string
	var err error
	if c.noProc {
		cmdline, err = bootstrap.RemoteCommandNoProc(args, c.src, c.tg.dirs)
	} else {
		cmdline, err = bootstrap.RemoteCommandDirs(args, c.src, c.tg.dirs)
	}
	if err != nil {
		return nil, err
	}
	s := c.tg.start(c.sh, c.prefix+cmdline)
	conn, err := bootstrap.RemoteStart(ctx, s.stdin, s.stdout, args, c.src, req.Name, c.log, s.close, c.opts...)
	if err != nil {
		if s.closed.Load() == 0 {
			c.tg.t.Errorf("RemoteStart returned %v without running closeFn", err)
		}
		if e := s.stderr.String(); e != "" {
			c.tg.t.Logf("stage stderr: %s", e)
		}
	}
	return conn, err
}

// dial starts an agent through the connector, pings it, and reports
// whether it was uploaded (from the info log) and how long the start took.
func dial(t *testing.T, c *connector) (uploaded bool, took time.Duration) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	c.log = zap.New(core)
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	cx, closeFn, err := spindle.Dial(ctx, c, spindle.Options{})
	took = time.Since(t0)
	if err != nil {
		t.Fatalf("%s: %v", c.sh.name, err)
	}
	defer closeFn()
	if err := sys.Ping(ctx, cx); err != nil {
		t.Fatalf("%s: ping: %v", c.sh.name, err)
	}
	checkOneProc(ctx, t, cx)
	cached := logs.FilterMessage("agent cached").Len()
	up := logs.FilterMessageSnippet("agent uploaded (").Len()
	if cached+up != 1 {
		t.Fatalf("%s: want one of agent cached/uploaded logged, got %v", c.sh.name, logs.All())
	}
	for _, e := range logs.All() {
		t.Logf("%s: %s %v", c.sh.name, e.Message, e.ContextMap())
	}
	return up == 1, took
}

// checkOneProc: the stage started the agent with GOMAXPROCS=1 (its
// environment at exec, in /proc), and the agent took it out again, so
// the commands it runs see neither it nor the marker.
func checkOneProc(ctx stdctx.Context, t *testing.T, cx rpc.Caller) {
	t.Helper()
	environ := agentProcFile(ctx, t, cx, "environ")
	if !slices.Contains(strings.Split(string(environ), "\x00"), "GOMAXPROCS=1") {
		t.Errorf("agent started without GOMAXPROCS=1: %q", environ)
	}
	res, err := spexec.Run(ctx, cx, spexec.Cmd{Shell: `echo "${GOMAXPROCS-none} ${SPINDLE_SET_GOMAXPROCS-none}"`})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "none none" {
		t.Errorf("a command run by the agent inherited GOMAXPROCS and the marker: %q", got)
	}
}

func agentFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "agent-*"))
	return m
}

// TestLoginShells: through every login shell, a cold start uploads the
// agent and a warm start runs the cached one.
func TestLoginShells(t *testing.T) {
	for _, sh := range loginShells {
		t.Run(sh.name, func(t *testing.T) {
			need(t, sh.argv[0])
			tg := newTarget(t)
			c := &connector{tg: tg, sh: sh, src: bootstrap.Default()}
			up, cold := dial(t, c)
			if !up {
				t.Fatal("cold start did not upload")
			}
			if f := agentFiles(t, tg.cacheDir()); len(f) != 1 {
				t.Fatalf("cache holds %v", f)
			}
			st, err := os.Lstat(tg.cacheDir())
			if err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
				t.Fatalf("cache dir: %v %v", st.Mode(), err)
			}
			up, warm := dial(t, c)
			if up {
				t.Fatal("warm start uploaded again")
			}
			t.Logf("%s: cold start %v, warm start %v", sh.name, cold, warm)
		})
	}
}

// TestStageShells runs the stage itself (the inner `sh`) under bash, dash,
// busybox ash, and busybox with nothing but busybox applets on PATH (its
// head -c, gzip, …).
func TestStageShells(t *testing.T) {
	cases := []struct {
		name  string
		prog  string
		links []string // names to point at prog; PATH = only that dir if all
		only  bool
	}{
		{"dash", "dash", []string{"sh"}, false},
		{"bash", "bash", []string{"sh"}, false},
		{"busybox-ash", "busybox", []string{"sh"}, false},
		{"busybox-only", "busybox", []string{"sh", "id", "uname", "mkdir", "chmod", "rm", "head", "gzip", "wc", "mv"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prog := need(t, tc.prog)
			tg := newTarget(t)
			bin := t.TempDir()
			for _, l := range tc.links {
				if err := os.Symlink(prog, filepath.Join(bin, l)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.only {
				tg.path = bin
			} else {
				tg.path = bin + ":" + tg.path
			}
			sh := loginShell{tc.name, []string{filepath.Join(bin, "sh"), "-c"}}
			c := &connector{tg: tg, sh: sh, src: bootstrap.Default()}
			if up, _ := dial(t, c); !up {
				t.Fatal("cold start did not upload")
			}
			if up, _ := dial(t, c); up {
				t.Fatal("warm start uploaded again")
			}
		})
	}
}

// onlyOnPath gives the stage a PATH holding nothing but progs.
func onlyOnPath(t *testing.T, tg *target, progs ...string) {
	t.Helper()
	bin := t.TempDir()
	for _, p := range progs {
		if err := os.Symlink(need(t, p), filepath.Join(bin, p)); err != nil {
			t.Fatal(err)
		}
	}
	tg.path = bin
}

// warmWithOnly makes a cached agent with a fresh self-check memo, then
// starts it again with nothing but progs on PATH.
func warmWithOnly(t *testing.T, progs ...string) {
	tg, c, _ := coldStart(t)
	if up, _ := dial(t, c); up { // the first warm start writes the memo
		t.Fatal("warm start uploaded")
	}
	onlyOnPath(t, tg, progs...)
	if up, _ := dial(t, c); up {
		t.Fatalf("warm start with only %v on PATH uploaded", progs)
	}
}

// A warm start whose agent has a fresh self-check memo needs no size
// check (wc): the memo stands for it.
func TestWarmStartNeedsNoWc(t *testing.T) { warmWithOnly(t, "sh", "uname") }

// On Linux 6.1+ a warm start reads the platform from /proc and starts no
// process but the agent: with nothing but sh on PATH it still starts.
func TestWarmStartForksNothing(t *testing.T) {
	if _, err := os.Stat("/proc/sys/kernel/arch"); err != nil {
		testkit.Unavailable(t, fmt.Sprintf("this kernel has no /proc/sys/kernel/arch (Linux 6.1+, as Debian 12's): %v", err))
	}
	warmWithOnly(t, "sh")
}

// Where /proc does not name the platform, the stage asks uname: a warm
// start works with sh and uname, and fails without uname.
func TestPlatformFromUname(t *testing.T) {
	tg, c, _ := coldStart(t)
	if up, _ := dial(t, c); up {
		t.Fatal("warm start uploaded")
	}
	c.noProc = true
	onlyOnPath(t, tg, "sh", "uname")
	if up, _ := dial(t, c); up {
		t.Fatal("warm start through uname uploaded")
	}
	onlyOnPath(t, tg, "sh")
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	c.log = zap.NewNop()
	if _, closeFn, err := spindle.Dial(ctx, c, spindle.Options{}); err == nil {
		closeFn()
		t.Fatal("started without /proc's names and without uname: the fallback was not used")
	}
}

// A cached agent truncated after its memo was written is newer than the
// memo, so the stage checks its size (wc), removes it and uploads a fresh
// one without running the damaged file.
func TestTruncatedAgentAfterMemo(t *testing.T) {
	tg, c, files := coldStart(t)
	if up, _ := dial(t, c); up {
		t.Fatal("warm start uploaded")
	}
	memo := filepath.Join(tg.cacheDir(), "."+filepath.Base(files[0])+".ok")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(memo, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(files[0], 4096); err != nil {
		t.Fatal(err)
	}
	c.stale = 0
	if up, _ := dial(t, c); !up || c.stale != 0 {
		t.Fatalf("truncated agent: uploaded=%v stale retries=%d; want an upload on the first try", up, c.stale)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Size() <= 4096 {
		t.Fatalf("the cached agent was not replaced: %v, %v", fi, err)
	}
}

// TestRawUpload hides gzip and zstd from the stage's PATH: the agent
// travels raw.
func TestRawUpload(t *testing.T) {
	tg := newTarget(t)
	bin := t.TempDir()
	for _, p := range []string{"sh", "id", "uname", "mkdir", "chmod", "rm", "head", "wc", "mv"} {
		if err := os.Symlink(need(t, p), filepath.Join(bin, p)); err != nil {
			t.Fatal(err)
		}
	}
	tg.path = bin
	c := &connector{tg: tg, sh: loginShells[0], src: bootstrap.Default()}
	msg, cmdline := uploadWithLog(t, c)
	if !strings.HasSuffix(msg, " raw)") {
		t.Fatalf("not sent raw: %q", msg)
	}
	// Only gzip and zstd check what they unpack: a raw upload hashes
	// before its hello.
	if strings.Contains(cmdline, "-unpacked") {
		t.Errorf("a raw upload started the agent with -unpacked: %s", cmdline)
	}
}

// zstdOf compresses with the zstd program (level 3: the test need not
// wait for -19).
func zstdOf(t *testing.T) func([]byte) ([]byte, error) {
	t.Helper()
	zstd := need(t, "zstd")
	return func(data []byte) ([]byte, error) {
		cmd := exec.Command(zstd, "-3", "-q", "-c")
		cmd.Stdin = bytes.NewReader(data)
		return cmd.Output()
	}
}

// uploadWithLog starts an agent through c, logging at debug, and returns
// what "agent uploaded (…)" said and the agent's command line.
func uploadWithLog(t *testing.T, c *connector) (uploaded, cmdline string) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	c.log = zap.New(core)
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	cx, closeFn, err := spindle.Dial(ctx, &fixedLog{c, c.log}, spindle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if err := sys.Ping(ctx, cx); err != nil {
		t.Fatal(err)
	}
	up := logs.FilterMessageSnippet("agent uploaded (").All()
	if len(up) != 1 {
		t.Fatalf("want one upload logged: %v", logs.All())
	}
	return up[0].Message, agentCmdline(ctx, t, cx)
}

// TestZstdUpload: where the target has zstd and the agent a zstd form,
// the agent travels as zstd, is unpacked by zstd -dc (which checks its
// XXH64), and hashes itself after its hello, as after gzip. Without zstd
// on the target the same agent travels as gzip.
func TestZstdUpload(t *testing.T) {
	src := bootstrap.WithZstd(bootstrap.Default(), zstdOf(t))
	tg := newTarget(t)
	c := &connector{tg: tg, sh: loginShells[0], src: src}
	msg, cmdline := uploadWithLog(t, c)
	if !strings.HasSuffix(msg, " zstd)") || !strings.Contains(cmdline, " -unpacked") {
		t.Fatalf("with zstd on the target: %q, agent %s", msg, cmdline)
	}
	files := agentFiles(t, tg.cacheDir())
	if len(files) != 1 {
		t.Fatalf("cache holds %v", files)
	}
	waitForMemo(t, files[0]) // the self-check passed

	tg = newTarget(t)
	onlyOnPath(t, tg, "sh", "id", "uname", "mkdir", "chmod", "rm", "head", "gzip", "wc", "mv")
	c = &connector{tg: tg, sh: loginShells[0], src: src}
	if msg, _ := uploadWithLog(t, c); !strings.HasSuffix(msg, " gzip)") {
		t.Fatalf("without zstd on the target: %q", msg)
	}
}

// TestOverLocalPipe: over a local pipe the agent travels raw although the
// target offers zstd and gzip, and it checks its hash before its hello
// (no -unpacked), leaving the memo warm starts trust.
func TestOverLocalPipe(t *testing.T) {
	tg := newTarget(t)
	c := &connector{tg: tg, sh: loginShells[0], src: bootstrap.WithZstd(bootstrap.Default(), zstdOf(t)),
		opts: []bootstrap.StartOption{bootstrap.OverLocalPipe}}
	msg, cmdline := uploadWithLog(t, c)
	if !strings.HasSuffix(msg, " raw)") || strings.Contains(cmdline, " -unpacked") {
		t.Fatalf("over a local pipe: %q, agent %s", msg, cmdline)
	}
	files := agentFiles(t, tg.cacheDir())
	if len(files) != 1 {
		t.Fatalf("cache holds %v", files)
	}
	if _, ok := memoOf(files[0]); !ok {
		t.Fatal("no self-check memo: the raw upload was not checked before its hello")
	}
}

// TestCorruptZstd: zstd -dc refuses a damaged stream, the stage says it
// could not receive the agent, and nothing is left in the cache.
func TestCorruptZstd(t *testing.T) {
	compress := zstdOf(t)
	src := bootstrap.WithZstd(bootstrap.Default(), func(data []byte) ([]byte, error) {
		z, err := compress(data)
		if err == nil {
			z[len(z)/2] ^= 0x55
		}
		return z, err
	})
	tg := newTarget(t)
	c := &connector{tg: tg, sh: loginShells[0], src: src, log: zap.NewNop()}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	_, closeFn, err := spindle.Dial(ctx, c, spindle.Options{})
	if err == nil {
		closeFn()
		t.Fatal("started from a corrupt zstd stream")
	}
	if !strings.Contains(err.Error(), "could not receive the agent") || !strings.Contains(err.Error(), "zstd") {
		t.Fatalf("corrupt zstd stream: %v", err)
	}
	if left, _ := os.ReadDir(tg.cacheDir()); len(left) != 0 {
		t.Fatalf("left in the cache: %v", left)
	}
}

// Salted keeps the base's compressed forms, the salt appended as one
// more gzip member or zstd frame: gzip -dc and zstd -dc give the salted
// agent.
func TestSaltedKeepsCompressedForms(t *testing.T) {
	base := bootstrap.WithZstd(bootstrap.Default(), zstdOf(t))
	b, err := bootstrap.Salted(base).Agent(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	want, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"gzip", "zstd"} {
		payload, got, err := b.Payload([]string{format})
		if err != nil || got != format {
			t.Fatalf("%s: format %q, %v", format, got, err)
		}
		cmd := exec.Command(need(t, format), "-dc")
		cmd.Stdin = bytes.NewReader(payload)
		out, err := cmd.Output()
		if err != nil || !bytes.Equal(out, want) {
			t.Fatalf("%s -dc of the salted form: %d bytes (want %d), %v", format, len(out), len(want), err)
		}
	}
	frame := bootstrap.ZstdRawFrame([]byte("0123456789abcdef"))
	cmd := exec.Command(need(t, "zstd"), "-dc")
	cmd.Stdin = bytes.NewReader(frame)
	if out, err := cmd.Output(); err != nil || string(out) != "0123456789abcdef" {
		t.Fatalf("a raw frame alone: %q, %v", out, err)
	}
}

type fixedLog struct {
	*connector
	log *zap.Logger
}

func (f *fixedLog) Start(ctx stdctx.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	f.connector.log = f.log
	return f.connector.Start(ctx, req)
}

// coldStart starts an agent on a fresh target, which uploads it, and
// returns the target, its connector and the one cached agent file.
func coldStart(t *testing.T) (*target, *connector, []string) {
	t.Helper()
	tg := newTarget(t)
	c := &connector{tg: tg, sh: loginShells[0], src: bootstrap.Default()}
	if up, _ := dial(t, c); !up {
		t.Fatal("cold start did not upload")
	}
	files := agentFiles(t, tg.cacheDir())
	if len(files) != 1 {
		t.Fatalf("cache holds %v", files)
	}
	// The agent has exited (dial closed it), and an uploaded agent ends
	// its self-check before it exits: the memo is there.
	if _, ok := memoOf(files[0]); !ok {
		t.Fatalf("no self-check memo beside %s after the uploaded agent exited", files[0])
	}
	return tg, c, files
}

// memoOf returns the self-check memo beside an agent file, if any.
func memoOf(file string) (string, bool) {
	memo := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".ok")
	b, err := os.ReadFile(memo)
	return string(b), err == nil && strings.Contains(string(b), " ")
}

// waitForMemo waits until the agent file's self-check memo exists: an
// uploaded agent hashes itself after its hello (CheckUnpacked), so the
// memo comes a few milliseconds after the start returned.
func waitForMemo(t *testing.T, file string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m, ok := memoOf(file); ok {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no self-check memo beside %s 20 s after an upload", file)
		}
		time.Sleep(5 * time.Millisecond) // polling a file another process writes
	}
}

// agentCmdline is the command line of the agent behind cx.
func agentCmdline(ctx stdctx.Context, t *testing.T, cx rpc.Caller) string {
	t.Helper()
	return strings.ReplaceAll(agentProcFile(ctx, t, cx, "cmdline"), "\x00", " ")
}

// agentProcFile reads /proc/PID/name of the agent behind cx.
func agentProcFile(ctx stdctx.Context, t *testing.T, cx rpc.Caller, name string) string {
	t.Helper()
	info, err := sys.Info(ctx, cx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", info.PID, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUnpackedAgent: an uploaded (gzip) agent is started with -unpacked
// and hashes itself after its hello, leaving the memo a warm start
// trusts; a cached agent is started without it. An agent that does not
// hash to the name it was uploaded under removes itself and exits.
func TestUnpackedAgent(t *testing.T) {
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	tg := newTarget(t)
	c := &connector{tg: tg, sh: loginShells[0], src: bootstrap.Default()}
	for i, want := range []bool{true, false} {
		cx, closeFn, err := spindle.Dial(ctx, c, spindle.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cmdline := agentCmdline(ctx, t, cx)
		if got := strings.Contains(cmdline, " -unpacked"); got != want {
			t.Errorf("start %d: -unpacked=%v, want %v: %s", i, got, want, cmdline)
		}
		files := agentFiles(t, tg.cacheDir())
		if len(files) != 1 {
			t.Fatalf("cache holds %v", files)
		}
		waitForMemo(t, files[0])
		closeFn()
	}

	tg = newTarget(t)
	c = &connector{tg: tg, sh: loginShells[0], src: bootstrap.Mislabeled(bootstrap.Default())}
	cx, closeFn, err := spindle.Dial(ctx, c, spindle.Options{})
	if err != nil {
		// It may finish hashing, and exit, before its hello.
		t.Logf("mislabelled agent, dial: %v", err)
	} else {
		defer closeFn()
		select {
		case <-cx.Done():
		case <-ctx.Done():
			t.Fatal("a mislabelled agent is still running")
		}
	}
	if f := agentFiles(t, tg.cacheDir()); len(f) != 0 {
		t.Fatalf("a mislabelled agent was not removed: %v", f)
	}
}

// TestTamperedAgent: a cached agent whose bytes changed reports itself
// stale and removes itself; the retry uploads a fresh one.
func TestTamperedAgent(t *testing.T) {
	tg, c, files := coldStart(t)
	// The verified agent left its memo, which lets the next start skip the
	// hash; tampering must still be caught (the write changes its ctime).
	memo := filepath.Join(tg.cacheDir(), "."+filepath.Base(files[0])+".ok")
	if b, err := os.ReadFile(memo); err != nil || !strings.Contains(string(b), " ") {
		t.Fatalf("no self-check memo after a verified start: %q, %v", b, err)
	}
	if up, _ := dial(t, c); up {
		t.Fatal("warm start with a memo uploaded")
	}
	tamper(t, files[0])

	// Once by hand: the error is ErrStaleAgent and the file is gone.
	args := bootstrap.AgentArgs{ID: 7, Name: "tamper", Nonce: bootstrap.NewNonce()}
	cmdline, err := bootstrap.RemoteCommandDirs(args, c.src, tg.dirs)
	if err != nil {
		t.Fatal(err)
	}
	s := tg.start(loginShells[0], cmdline)
	_, err = bootstrap.RemoteStart(stdctx.Background(), s.stdin, s.stdout, args, c.src, "tamper", nil, s.close)
	if !errors.Is(err, bootstrap.ErrStaleAgent) || !errors.Is(err, bootstrap.ErrAgent) {
		t.Fatalf("tampered agent: got %v, want ErrStaleAgent", err)
	}
	t.Logf("tampered: %v", err)
	if s.closed.Load() == 0 {
		t.Fatal("closeFn not run")
	}
	if f := agentFiles(t, tg.cacheDir()); len(f) != 0 {
		t.Fatalf("stale agent not removed: %v", f)
	}

	// Tamper again and go through the connector: stale, retry, upload.
	if up, _ := dial(t, c); !up {
		t.Fatal("did not upload")
	}
	files = agentFiles(t, tg.cacheDir())
	tamper(t, files[0])
	c.stale = 0
	if up, _ := dial(t, c); !up || c.stale != 1 {
		t.Fatalf("retry after stale: uploaded=%v stale=%d", up, c.stale)
	}
	if up, _ := dial(t, c); up {
		t.Fatal("fresh agent not cached")
	}
}

// TestCrashingCachedAgent: a cached agent too damaged to check itself
// (here: a script that exits at once) dies before its hello; the start
// fails with ErrStaleAgent, and the retry removes it and uploads anew.
func TestCrashingCachedAgent(t *testing.T) {
	_, c, files := coldStart(t)
	st, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	// Same size (the stage checks it), but it cannot run.
	script := []byte("#!/bin/sh\nexit 7\n")
	crash := append(script, make([]byte, int(st.Size())-len(script))...)
	if err := os.WriteFile(files[0], crash, 0o700); err != nil {
		t.Fatal(err)
	}
	c.stale = 0
	if up, _ := dial(t, c); !up || c.stale != 1 {
		t.Fatalf("after a crashing cached agent: uploaded=%v stale=%d, want an upload on the one retry", up, c.stale)
	}
	if up, _ := dial(t, c); up {
		t.Fatal("the new agent was not cached")
	}
}

// tamper changes bytes near the end of an executable (where it still
// starts: a binary too broken to start cannot check itself, see RemoteStart).
func tamper(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	if _, err := f.WriteAt([]byte("tampered"), st.Size()-64); err != nil {
		t.Fatal(err)
	}
}

// TestNoise: login scripts printing before the stage are skipped, even a
// hello-looking line with another nonce.
func TestNoise(t *testing.T) {
	tg := newTarget(t)
	for _, cached := range []bool{false, true} {
		c := &connector{tg: tg, sh: loginShells[1], src: bootstrap.Default(),
			prefix: "echo Welcome to the machine; echo SPINDLE-HELLO 0000 {}; echo SPINDLE-NEED 0000 Linux x86_64 gzip; "}
		if up, _ := dial(t, c); up == cached {
			t.Fatalf("cached=%v but uploaded=%v", cached, up)
		}
	}
}

// TestUnusableDirs: symlinks, other users' directories, files, noexec
// mounts and unwritable directories are refused, each with its reason;
// the first usable candidate wins.
func TestUnusableDirs(t *testing.T) {
	tg := newTarget(t)
	root := t.TempDir()
	real := filepath.Join(root, "real")
	os.Mkdir(real, 0o700)
	link := filepath.Join(root, "link")
	os.Symlink(real, link)
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o600)
	words := []string{`"` + link + `"`, `""`, `"` + file + `"`}
	reasons := []string{link + ": a symlink", file + ": not a directory"}
	if os.Geteuid() == 0 {
		other := filepath.Join(root, "other")
		os.Mkdir(other, 0o700)
		if err := os.Chown(other, 65534, 65534); err == nil {
			words = append(words, `"`+other+`"`)
			reasons = append(reasons, other+": not owned by uid 0")
		}
	} else {
		t.Log("not root: cannot make a directory owned by another user; that case is not tested")
	}
	noexec := filepath.Join(root, "noexec")
	os.Mkdir(noexec, 0o700)
	if err := syscall.Mount("tmpfs", noexec, "tmpfs", syscall.MS_NOEXEC, "size=1m,mode=0700"); err == nil {
		t.Cleanup(func() { syscall.Unmount(noexec, syscall.MNT_DETACH) })
		words = append(words, `"`+noexec+`"`)
		reasons = append(reasons, noexec+": cannot run programs there (noexec?)")
	} else {
		t.Logf("cannot mount a noexec tmpfs (%v): that case is not tested", err)
	}
	tg.dirs = strings.Join(words, " ")

	args := bootstrap.AgentArgs{ID: 9, Name: "dirs", Nonce: bootstrap.NewNonce()}
	cmdline, err := bootstrap.RemoteCommandDirs(args, bootstrap.Default(), tg.dirs)
	if err != nil {
		t.Fatal(err)
	}
	s := tg.start(loginShells[0], cmdline)
	_, err = bootstrap.RemoteStart(stdctx.Background(), s.stdin, s.stdout, args, bootstrap.Default(), "dirs", nil, s.close)
	if err == nil || !errors.Is(err, bootstrap.ErrAgent) || !strings.Contains(err.Error(), "no usable agent cache directory") {
		t.Fatalf("got %v", err)
	}
	for _, r := range reasons {
		if !strings.Contains(err.Error(), r) {
			t.Errorf("error lacks %q: %v", r, err)
		}
	}
	t.Logf("unusable dirs: %v", err)

	// Add a usable candidate at the end: it is used.
	good := filepath.Join(root, "deep", "good")
	tg.dirs += ` "` + good + `"`
	c := &connector{tg: tg, sh: loginShells[0], src: bootstrap.Default()}
	if up, _ := dial(t, c); !up {
		t.Fatal("no upload")
	}
	if f := agentFiles(t, good); len(f) != 1 {
		t.Fatalf("agent not in %s: %v", good, f)
	}
	if up, _ := dial(t, c); up {
		t.Fatal("warm start uploaded again")
	}
}

// TestMissingPlatform: a source without an agent for the target's
// platform gives a clear error.
func TestMissingPlatform(t *testing.T) {
	path, _ := testagent.Build()
	err := startOnce(t, newTarget(t), bootstrap.FromFile(path, "plan9", "amd64"))
	want := runtime.GOOS + "/" + runtime.GOARCH
	if !errors.Is(err, bootstrap.ErrNoAgent) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want ErrNoAgent naming %s", err, want)
	}
	t.Logf("missing platform: %v", err)
}

// startOnce runs the stage through sh on tg and returns RemoteStart's
// error; the tests that use it expect one.
func startOnce(t *testing.T, tg *target, src bootstrap.Source) error {
	t.Helper()
	args := bootstrap.AgentArgs{ID: 3, Name: t.Name(), Nonce: bootstrap.NewNonce()}
	cmdline, err := bootstrap.RemoteCommandDirs(args, src, tg.dirs)
	if err != nil {
		t.Fatal(err)
	}
	s := tg.start(loginShells[0], cmdline)
	conn, err := bootstrap.RemoteStart(stdctx.Background(), s.stdin, s.stdout, args, src, t.Name(), nil, s.close)
	if err == nil {
		conn.Close()
	}
	return err
}

// SPINDLE_PLATFORM in the target's environment decides which agent the
// stage asks for, whatever /proc or uname say.
func TestPlatformOverride(t *testing.T) {
	tg := newTarget(t)
	tg.extraEnv = []string{bootstrap.PlatformEnv + "=Plan9/mips"}
	err := startOnce(t, tg, bootstrap.Default())
	if !errors.Is(err, bootstrap.ErrNoAgent) || !strings.Contains(err.Error(), "Plan9 mips") {
		t.Fatalf("got %v, want ErrNoAgent naming Plan9 mips", err)
	}
}

// TestCancel: cancelling ctx while the far end is silent runs closeFn and
// returns promptly.
func TestCancel(t *testing.T) {
	tg := newTarget(t)
	args := bootstrap.AgentArgs{ID: 3, Name: "cancel", Nonce: bootstrap.NewNonce()}
	s := tg.start(loginShells[0], "exec sleep 30")
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	// The sleep ignores stdin: closeFn must kill it.
	_, err := bootstrap.RemoteStart(ctx, s.stdin, s.stdout, args, bootstrap.Default(), "cancel", nil, func() error {
		s.closed.Add(1)
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		return s.cmd.Wait()
	})
	if !errors.Is(err, stdctx.DeadlineExceeded) || time.Since(t0) > 5*time.Second || s.closed.Load() != 1 {
		t.Fatalf("got %v after %v (closed %d)", err, time.Since(t0), s.closed.Load())
	}
}

// TestCancelWhileTheStreamLingers: closing stdin and running closeFn may
// not end the output stream (an SSH session's far end closes it only once
// its command exits, and a login shell may be stuck in its rc files):
// RemoteStart still returns when ctx ends, not when the stream does.
func TestCancelWhileTheStreamLingers(t *testing.T) {
	args := bootstrap.AgentArgs{ID: 3, Name: "linger", Nonce: bootstrap.NewNonce()}
	outR, outW := io.Pipe()
	_, inW := io.Pipe()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := bootstrap.RemoteStart(ctx, inW, outR, args, bootstrap.Default(), "linger", nil, func() error { return nil })
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, stdctx.DeadlineExceeded) {
			t.Errorf("got %v, want the deadline", err)
		}
	case <-time.After(20 * time.Second): // a hang, not a slow machine
		t.Fatal("RemoteStart still waits for the stream after its context ended")
	}
	outW.Close() // the far end gives up at last: the abandoned reader ends
}

// TestRemoteCommandShape: one line, exec sh -c '…', nothing a login shell
// could reinterpret; unsafe names are refused.
func TestRemoteCommandShape(t *testing.T) {
	args := bootstrap.AgentArgs{ID: 1, Name: "ssh:web1 → sudo:root", Nonce: bootstrap.NewNonce(), Verbosity: 2}
	cmd, err := bootstrap.RemoteCommand(args, bootstrap.Default())
	if err != nil {
		t.Fatal(err)
	}
	inner, ok := strings.CutPrefix(cmd, "exec sh -c '")
	if !ok || !strings.HasSuffix(inner, "'") {
		t.Fatalf("not exec sh -c '…': %s", cmd)
	}
	inner = inner[:len(inner)-1]
	if strings.ContainsAny(inner, "'!\\\n\r") {
		t.Fatalf("first stage contains a forbidden character: %s", cmd)
	}
	t.Logf("first stage: %d bytes", len(cmd))
	for _, bad := range []string{`a"b`, "a'b", "a$b", "a`b", "a!b", `a\b`, "a\nb", ""} {
		if _, err := bootstrap.RemoteCommand(bootstrap.AgentArgs{ID: 1, Name: bad, Nonce: "ab"}, bootstrap.Default()); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}

// TestArgsSHA256 round-trips the new flag.
func TestArgsSHA256(t *testing.T) {
	a := bootstrap.AgentArgs{ID: 2, Parent: 1, Name: "x", Nonce: "ab", Verbosity: 1, SHA256: strings.Repeat("0f", 32)}
	b, err := bootstrap.ParseAgentArgs(a.Argv())
	if err != nil || b != a {
		t.Fatalf("%+v %v", b, err)
	}
	a.SHA256 = "xyz"
	if _, err := bootstrap.ParseAgentArgs(a.Argv()); err == nil {
		t.Fatal("bad -sha256 accepted")
	}
}

// TestWireSize checks what travels for the agents `make build` embeds
// (gzip -9, and zstd -19 when the build had zstd): at most 4 MiB, and the
// zstd form unpacks to the binary its manifest names.
func TestWireSize(t *testing.T) {
	gzs, _ := filepath.Glob("agents/spindle-agent-*.gz")
	if len(gzs) == 0 {
		testkit.Unavailable(t, "no embedded agents in bootstrap/agents: run `make build` (make test does)")
	}
	for _, p := range gzs {
		gz, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes, gzip -9 %d bytes (%.1f%%)", filepath.Base(p), len(data), len(gz), 100*float64(len(gz))/float64(len(data)))
		if len(gz) > 4<<20 {
			t.Errorf("%s: %d bytes > 4 MiB on the wire", p, len(gz))
		}
		zp := strings.TrimSuffix(p, ".gz") + ".zst"
		zst, err := os.ReadFile(zp)
		if err != nil {
			t.Logf("%s: no zstd form (the build had no zstd)", filepath.Base(p))
			continue
		}
		cmd := exec.Command(need(t, "zstd"), "-dc")
		cmd.Stdin = bytes.NewReader(zst)
		if out, err := cmd.Output(); err != nil || !bytes.Equal(out, data) {
			t.Errorf("%s does not unpack to the gzip form's binary: %d bytes, %v", zp, len(out), err)
		}
		t.Logf("%s: zstd -19 %d bytes (%.1f%%)", filepath.Base(zp), len(zst), 100*float64(len(zst))/float64(len(data)))
		if len(zst) > 4<<20 {
			t.Errorf("%s: %d bytes > 4 MiB on the wire", zp, len(zst))
		}
	}
}

// BenchmarkSelfCheck measures the agent's startup self-check (hashing its
// own executable).
func BenchmarkSelfCheck(b *testing.B) {
	path, err := testagent.Build()
	if err != nil {
		b.Fatal(err)
	}
	bin, err := bootstrap.FromFile(path, runtime.GOOS, runtime.GOARCH).Agent(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		b.Fatal(err)
	}
	for _, check := range []bool{false, true} {
		b.Run(fmt.Sprintf("sha256=%v", check), func(b *testing.B) {
			args := bootstrap.AgentArgs{ID: 1, Name: "bench", Nonce: "ab"}
			if check {
				args.SHA256 = bin.Hash
			}
			for b.Loop() {
				// stdin is /dev/null: the agent says hello and exits.
				out, _ := exec.Command(path, args.Argv()...).Output()
				if !bytes.HasPrefix(out, []byte(bootstrap.HelloPrefix)) {
					b.Fatalf("no hello: %s", out)
				}
			}
		})
	}
}

func TestSaltedSourceChangesTheHashOnly(t *testing.T) {
	base := bootstrap.Default()
	plain, err := base.Agent(runtime.GOOS, runtime.GOARCH) // TestMain built it
	if err != nil {
		t.Fatal(err)
	}
	s := bootstrap.Salted(base)
	a, err := s.Agent(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := s.Agent(runtime.GOOS, runtime.GOARCH)
	ad, err := a.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	pd, err := plain.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash == plain.Hash || again != a || len(ad) != len(pd)+16 || a.Size != len(ad) || !bytes.Equal(ad[:len(pd)], pd) {
		t.Fatalf("salted agent: hash %s (plain %s), %d bytes (plain %d)", a.Hash[:8], plain.Hash[:8], len(ad), len(pd))
	}
}
