package bootstrap

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle/internal/printable"
	"github.com/spindle-rpc/spindle/version"
	"go.uber.org/zap"
)

// PlatformEnv names the variable that, set to SYSTEM/MACHINE as uname -s
// and -m would print them (say Linux/aarch64) in a target's environment,
// makes the first stage ask for that platform's agent instead of the one
// it detects: for a target whose kernel names an architecture its agent
// should not be built for, and for tests that pass one machine off as
// another.
const PlatformEnv = "SPINDLE_PLATFORM"

const (
	// NeedPrefix starts the line the first stage prints when the agent is
	// not cached: `SPINDLE-NEED <nonce> <system> <machine> <decompressors>`
	// (/proc/sys/kernel/{ostype,arch}, else uname -s and -m).
	NeedPrefix = "SPINDLE-NEED"
	// SendPrefix starts the controller's answer to a NEED line:
	// `SPINDLE-SEND <nbytes> <format> <sha256>`, then exactly nbytes.
	SendPrefix = "SPINDLE-SEND"
)

// The cache directories the first stage tries, in order, as sh words ($u is
// the uid). An empty word (unset variable) is skipped. CacheDirs is the Go
// twin used by Materialize.
//
// $XDG_RUNTIME_DIR comes last, although it is the conventional place: it lives
// only as long as the user's sessions (pam_systemd, like the XDG base
// directory spec, removes it when the last one ends, 10 s later by
// default), and an SSH connection of Spindle's is often the user's only
// session. Where sshd runs PAM with logind (Debian's, Ubuntu's, Fedora's
// default), an agent cached there was gone by the next run, so every run
// was a cold start uploading the agent again. /dev/shm is RAM-backed too
// and lasts until reboot; the checks that make it safe (owned, not a
// symlink, 0700) are the same for every entry.
const stageDirs = `"/dev/shm/spindle-$u" "${HOME:+$HOME/.cache/spindle}" "/tmp/spindle-$u" "${XDG_RUNTIME_DIR:+$XDG_RUNTIME_DIR/spindle}"`

// unamePlatform maps Go's names to what `uname -s` and `uname -m` print
// (sh case patterns, also matched with path.Match on the controller).
var (
	unameOS = []struct{ goos, pattern string }{
		{"linux", "Linux"}, {"darwin", "Darwin"}, {"freebsd", "FreeBSD"},
		{"openbsd", "OpenBSD"}, {"netbsd", "NetBSD"}, {"dragonfly", "DragonFly"},
		{"illumos", "SunOS"}, {"aix", "AIX"},
	}
	unameArch = []struct {
		goarch   string
		patterns []string
	}{
		{"amd64", []string{"x86_64", "amd64"}},
		{"arm64", []string{"aarch64", "arm64"}},
		{"386", []string{"i386", "i486", "i586", "i686", "i86pc"}},
		{"arm", []string{"armv5*", "armv6*", "armv7*", "armv8l", "arm"}},
		{"riscv64", []string{"riscv64"}},
		{"ppc64le", []string{"ppc64le"}},
		{"ppc64", []string{"ppc64", "powerpc"}},
		{"s390x", []string{"s390x"}},
		{"loong64", []string{"loongarch64"}},
	}
)

// goPlatform maps uname -s/-m output to a Go platform.
func goPlatform(sys, machine string) (goos, goarch string, ok bool) {
	for _, o := range unameOS {
		if o.pattern == sys {
			goos = o.goos
		}
	}
	for _, a := range unameArch {
		for _, p := range a.patterns {
			if m, _ := path.Match(p, machine); m && goarch == "" {
				goarch = a.goarch
			}
		}
	}
	return goos, goarch, goos != "" && goarch != ""
}

// stagePlatforms lists the platforms src can supply, as case arms that set
// the expected agent name and hash.
func stagePlatforms(src Source) string {
	var b strings.Builder
	eachPlatform(src, func(_, _ string, bin *Binary, osPattern string, archPatterns []string) {
		for i, p := range archPatterns {
			if i > 0 {
				b.WriteString("|")
			}
			b.WriteString(osPattern + "/" + p)
		}
		fmt.Fprintf(&b, ") a=%s; h=%s; b=%d;; ", AgentFileName(bin), bin.Hash, bin.Size)
	})
	return b.String()
}

// eachPlatform calls fn with every agent src supplies for a platform that
// a first stage recognises.
func eachPlatform(src Source, fn func(goos, goarch string, bin *Binary, osPattern string, archPatterns []string)) {
	for _, o := range unameOS {
		for _, a := range unameArch {
			if o.goos != "linux" && a.goarch != "amd64" && a.goarch != "arm64" {
				continue
			}
			if bin, err := src.Agent(o.goos, a.goarch); err == nil && isHex(bin.Hash, 64) && bin.Size > 0 {
				fn(o.goos, a.goarch, bin, o.pattern, a.patterns)
			}
		}
	}
}

// RemoteCommand returns the one-line first stage to run as the remote
// command of a fresh session (SSH exec request, `sudo … sh -c`, `docker exec
// -i … sh -c`): `exec sh -c '…'` with no `!`, `\` or embedded single quote, so it
// survives any login shell (sh, bash, dash, zsh, fish, tcsh, busybox ash).
//
// The stage (PROTOCOL.md section 10) finds the agent for the target's
// system and machine names (/proc/sys/kernel, else uname) in the first
// private cache directory that holds it and execs it with args plus
// -sha256 (no round trip); otherwise it picks the first usable cache
// directory, prints a SPINDLE-NEED line, receives the agent (RemoteStart
// answers), installs it and execs it. The command
// names every platform src can supply; others are requested anyway and
// RemoteStart reports that no agent exists for them.
//
// args.Name may not contain quotes, `$`, backquotes, `!`, `\` or control
// characters (it travels inside the command line).
func RemoteCommand(args AgentArgs, src Source) (string, error) {
	return remoteCommand(args, src, stageDirs)
}

// RemoteScript is RemoteCommand's script alone, for hops that take an argv
// rather than a command line: `sudo -u USER -- sh -c SCRIPT`.
func RemoteScript(args AgentArgs, src Source) (string, error) {
	cmd, err := remoteCommand(args, src, stageDirs)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(strings.TrimPrefix(cmd, "exec sh -c '"), "'"), nil
}

// errNoSource is returned when a caller passes no agent source.
var errNoSource = fmt.Errorf("%w: no agent source given (the controller passes bootstrap.Default(), an agent bootstrap.Self())", ErrNoAgent)

func remoteCommand(args AgentArgs, src Source, dirs string) (string, error) {
	return remoteCommandProc(args, src, dirs, "/proc/sys/kernel")
}

// remoteCommandProc is remoteCommand reading the platform's names (ostype,
// arch) from kernelDir, for tests of the uname fallback.
func remoteCommandProc(args AgentArgs, src Source, dirs, kernelDir string) (string, error) {
	if src == nil {
		// Never Default() here: agents run this code too, and must not
		// link the controller's embedded agents into their binary.
		return "", errNoSource
	}
	if !isHex(args.Nonce, len(args.Nonce)) || args.Nonce == "" {
		return "", fmt.Errorf("bootstrap: nonce %q is not hex", args.Nonce)
	}
	if args.Name == "" || strings.ContainsFunc(args.Name, func(r rune) bool {
		return r < ' ' || r == 0x7f || strings.ContainsRune("\"'`$\\!", r)
	}) {
		return "", fmt.Errorf("bootstrap: context name %q cannot travel in the first stage's command line (no quotes, $, `, !, \\ or control characters)", args.Name)
	}
	if !safeWord(version.Version) {
		return "", fmt.Errorf("bootstrap: version %q is not a safe file name part", version.Version)
	}
	a := args
	a.SHA256 = ""
	// Warm: the expected agent in any usable directory, run at once. A
	// file of the wrong size (truncated: too damaged to even run and report
	// itself stale) is removed, so the cold path replaces it. A fresh start
	// removes it (and its self-check memo) whatever it looks like.
	// The size check costs a process (wc), so it is skipped when the
	// self-check memo, which every start that trusts it touches, is newer
	// than the agent file: nothing wrote to the file since an agent ran
	// from it. (If something did and reset its mtime, the agent's own
	// check, keyed on the ctime, still catches it; a file too truncated
	// to run ends the stream before the hello, which the parent treats as
	// stale, as below.)
	warm := `test -n "$a" && for d; do k "$d" && test -f "$d/$a" && test -O "$d/$a" && ` +
		`{ { test "$d/.$a.ok" -nt "$d/$a" || test $(($(wc -c < "$d/$a"))) -eq "$b"; } && x "$d/$a" "$h"; rm -f "$d/$a"; }; done; `
	if args.Fresh {
		warm = `test -n "$a" && for d; do k "$d" && rm -f "$d/$a" "$d/.$a.ok"; done; `
	}
	// x DIR/AGENT HASH: run the agent; exec is final (a failed exec ends
	// the shell too).
	// A third argument (-unpacked, or nothing: unquoted, it vanishes) is
	// passed on.
	run := fmt.Sprintf(`x() { `+stageProcs+`exec "$1" -id %d -parent %d -name "%s" -nonce %s -v %d -sha256 "$2" $3; }; `,
		a.ID, a.Parent, a.Name, a.Nonce, a.Verbosity)
	// The effective uid from /proc with builtins only (a process start
	// saved per hop), else from id.
	script := "umask 077; n=" + args.Nonce + "; " +
		`u=; while read k r e x; do test "$k" = Uid: && { u=$e; break; }; done 2>/dev/null < /proc/self/status; test -n "$u" || u=$(id -u); ` +
		// The platform from the kernel's own names, read by the shell
		// (Linux 6.1+): no process. Else uname, which costs a fork and
		// an exec on every start (a tenth of the CPU of twenty hops
		// started at once: BENCHMARKS.md, "Agent delivery and start").
		// The two differ only under a
		// 32-bit personality or qemu-user emulation, where /proc names
		// the kernel's architecture: a static agent built for it runs
		// there natively, whatever the target's programs are built for
		// (uname would ask for linux/386 or linux/arm, which Spindle
		// does not build).
		// SPINDLE_PLATFORM=SYSTEM/MACHINE in the target's environment
		// overrides both (PlatformEnv).
		`s=; m=; test -z "$` + PlatformEnv + `" || { s=${` + PlatformEnv + `%%/*}; m=${` + PlatformEnv + `#*/}; }; ` +
		`test -n "$s" && test -n "$m" || { read -r s < ` + kernelDir + `/ostype; read -r m < ` + kernelDir + `/arch; } 2>/dev/null; ` +
		`test -n "$s" && test -n "$m" || { set -- $(uname -s -m); s=$1; m=$2; }; ` +
		"case $s/$m in " + stagePlatforms(src) + "*) a=; h=; b=;; esac; " +
		run +
		// k DIR: usable unless empty, a symlink, not a directory or not ours
		// (reasons collect in $w).
		`k() { test -n "$1" || return 1; test -L "$1" && { w="$w $1: a symlink;"; return 1; }; ` +
		`test -d "$1" || { w="$w $1: not a directory;"; return 1; }; ` +
		`test -O "$1" || { w="$w $1: not owned by uid $u;"; return 1; }; }; ` +
		"set -- " + dirs + "; " +
		warm +
		// Cold: ask for the agent first, so that the probe's processes run
		// while the request travels (a cold start waits one round trip
		// for the agent, not that plus the probe). The controller reads an
		// error line after the request even while it is still sending.
		`z=; for c in gzip xz zstd; do command -v $c >/dev/null 2>&1 && z=$z$c,; done; ` +
		`echo "SPINDLE-NEED $n $s $m ${z:-none}"; ` +
		// The first directory we can create, own, write and run from.
		// The probe is the temp file itself: empty and executable, it runs
		// (as an empty script) unless the filesystem is noexec. Nothing
		// the probe starts may read stdin: the agent is arriving there.
		`w=; t=; i=; for d; do test -n "$d" || continue; test -d "$d" || mkdir -p "$d" 2>/dev/null; k "$d" || continue; ` +
		`p="$d/.agent-$$"; { : > "$p"; } 2>/dev/null || { w="$w $d: not writable;"; continue; }; ` +
		`chmod 700 "$d" "$p" && "$p" < /dev/null 2>/dev/null && { t=$p; break; }; rm -f "$p"; w="$w $d: cannot run programs there (noexec?);"; done; ` +
		`test -n "$t" || { echo "SPINDLE-ERROR $n no usable agent cache directory for uid $u (each must be a directory owned by the user, not a symlink, writable, allowing exec):$w"; exit 1; }; ` +
		`read -r l c f h || { rm -f "$t"; exit 1; }; ` +
		`test "$l" = SPINDLE-SEND || { rm -f "$t"; echo "SPINDLE-ERROR $n unexpected answer to SPINDLE-NEED: $l"; exit 1; }; ` +
		// gzip and zstd checked what they unpacked (CRC-32 or XXH64, and
		// length): the agent may hash itself after its hello (-unpacked).
		// A raw upload is checked before, as a cached agent is.
		`case $f in gzip|zstd) head -c "$c" | $f -dc > "$t" && i=-unpacked;; raw) head -c "$c" > "$t" && test $(($(wc -c < "$t"))) -eq "$c";; *) false;; esac || ` +
		`{ rm -f "$t"; echo "SPINDLE-ERROR $n could not receive the agent ($c bytes, $f) into $t: needs head -c, and $f -dc unless raw"; exit 1; }; ` +
		"a=agent-" + version.Version + "-${h%${h#????????????????}}; " +
		`mv -f "$t" "$d/$a" || { rm -f "$t"; echo "SPINDLE-ERROR $n could not install the agent as $d/$a"; exit 1; }; ` +
		`x "$d/$a" "$h" $i`
	if strings.ContainsAny(script, "'\\!\n\r") {
		return "", fmt.Errorf("bootstrap: first stage would contain a quote, backslash, ! or newline")
	}
	// exec: the login shell that runs the command line becomes the stage's
	// sh instead of forking it (dash, for one, would fork).
	return "exec sh -c '" + script + "'", nil
}

func safeWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._+-", r)) {
			return false
		}
	}
	return true
}

// RemoteStart runs the controller's side of the first stage (the command
// from RemoteCommand, same args and src) over a started remote command's
// stdio: it skips login noise (logged at debug, at most 1 MiB), answers a
// SPINDLE-NEED with the agent for the platform named (in the form
// Binary.Payload picks), and returns a Conn positioned after the hello. It
// logs at info level whether the agent was cached or uploaded, with sizes
// and times. opts adjust it (OverLocalPipe).
//
// Ownership: RemoteStart owns stdin and closeFn from the call on. On
// success the Conn's Close closes stdin and runs closeFn (once). On any
// error, and when ctx is cancelled (which also breaks a blocked read or
// write), stdin has been closed and closeFn has run before RemoteStart
// returns: the session is gone.
//
// Errors: a SPINDLE-ERROR line from the stage wraps ErrAgent with the
// stage's text (control characters replaced); a platform src cannot supply wraps ErrNoAgent.
// A cached agent that fails its self-check (SPINDLE-STALE: corrupt or
// mixed-up file) removes itself and RemoteStart returns an error wrapping
// ErrStaleAgent (and ErrAgent); so does a cached agent that died before
// its hello (too damaged to check itself). The caller retries ONCE, with
// a fresh session and a RemoteCommand for args with Fresh set, when
// errors.Is(err, ErrStaleAgent): that start removes any cached file and
// uploads the agent. A fresh start's failure is reported as is.
func RemoteStart(ctx context.Context, stdin io.WriteCloser, stdout io.Reader, args AgentArgs, src Source, name string, log *zap.Logger, closeFn func() error, opts ...StartOption) (*Conn, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if src == nil {
		stdin.Close()
		if closeFn != nil {
			closeFn()
		}
		return nil, errNoSource
	}
	w := newOnceCloser(stdin)
	var once sync.Once
	var closeErr error
	release := func() error {
		once.Do(func() {
			w.Close()
			if closeFn != nil {
				closeErr = closeFn()
			}
		})
		return closeErr
	}
	stop := context.AfterFunc(ctx, func() { release() })
	rs := &remoteStart{w: w, args: args, src: src, log: log, name: name, begin: time.Now()}
	for _, o := range opts {
		o(rs)
	}
	br := bufio.NewReaderSize(stdout, 64<<10)
	// The hello is read by a goroutine of its own, so that ctx ends the
	// wait at once: closing the session does not end a read of its output
	// until the far end closes it too, and sshd does that only when the
	// command exits, so a login shell stuck in its rc files held a
	// connect past its timeout for as long as it slept. Abandoned, the
	// goroutine ends with the stream (the caller closes its connection, or
	// the far end its session).
	type helloRead struct {
		hello *Hello
		err   error
	}
	read := make(chan helloRead, 1)
	go func() {
		h, err := readHello(ctx, br, args.Nonce, log, rs.line)
		read <- helloRead{h, err}
	}()
	var hello *Hello
	var err error
	select {
	case r := <-read:
		hello, err = r.hello, r.err
	case <-ctx.Done():
		release()
		return nil, ctx.Err() // the controller names the context
	}
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err == nil && rs.sendErr != nil {
		err = rs.sendErr // a hello after a failed upload: not to be trusted
	}
	if err != nil {
		release()
		if ctx.Err() != nil {
			err = ctx.Err()
		} else if errors.Is(err, ErrNoHello) && rs.sendErr != nil {
			err = fmt.Errorf("%w (%w)", rs.sendErr, err)
		} else if errors.Is(err, ErrNoHello) && !rs.sent && !args.Fresh {
			// The stage ran a cached agent that died before its hello,
			// too broken to check itself (or the stage failed early):
			// the caller's one retry removes the file and uploads anew.
			err = fmt.Errorf("%w: %w (the cached agent died before its hello: damaged?)", err, ErrStaleAgent)
		}
		return nil, err // the controller names the context
	}
	if rs.sent {
		log.Info(fmt.Sprintf("agent uploaded (%s %s)", mib(rs.wire), rs.format),
			zap.String("context", name), zap.String("platform", rs.platform),
			zap.Int("wire_bytes", rs.wire), zap.Int("agent_bytes", rs.size),
			zap.Duration("send", rs.sendTime), zap.Duration("total", time.Since(rs.begin)))
	} else {
		log.Info("agent cached", zap.String("context", name),
			zap.String("platform", hello.OS+"/"+hello.Arch), zap.Duration("total", time.Since(rs.begin)))
	}
	return NewConn(hello, afterHello(br, stdout), w, release), nil
}

// A StartOption adjusts RemoteStart.
type StartOption func(*remoteStart)

// OverLocalPipe tells RemoteStart that the first stage's stdin is a pipe
// on the parent's own machine (sudo, su, doas, a container on this host),
// so the agent is sent uncompressed whatever the target offers. An agent
// starting such a hop has no compressed copy of its own binary: gzip -6 of
// its 7 MB cost it 250 ms of CPU on a fast machine (a cold sudo hop took
// 330 ms in all; gzipChunks and runtimeGzipLevel now cut that to about 30
// ms on two CPUs), and the
// child 40 ms to unpack, where the raw bytes cross a pipe in milliseconds
// and the child hashes them in 5 (it checks a raw upload before its
// hello).
var OverLocalPipe StartOption = func(rs *remoteStart) { rs.localPipe = true }

type remoteStart struct {
	w         io.Writer
	args      AgentArgs
	src       Source
	log       *zap.Logger
	name      string
	begin     time.Time
	sent      bool
	platform  string
	format    string
	wire      int
	size      int
	sendTime  time.Duration
	sendErr   error // the upload's write failed (reported if no better error comes)
	localPipe bool  // OverLocalPipe
}

// line handles the first stage's requests (line starts at the marker);
// anything else is noise. Words from the target reach errors printable.
func (rs *remoteStart) line(line string) (bool, error) {
	f := strings.Fields(line)
	if len(f) < 2 || f[1] != rs.args.Nonce {
		return false, nil
	}
	switch f[0] {
	case StalePrefix:
		actual := ""
		if len(f) > 2 {
			actual = f[2]
		}
		return true, fmt.Errorf("%w: %w: the cached agent hashes to %s, not the expected build; it removed itself: start again to upload a fresh one", ErrAgent, ErrStaleAgent, printable.String(actual))
	case NeedPrefix:
		if len(f) < 5 {
			return true, fmt.Errorf("%w: malformed request %q", ErrAgent, line)
		}
		if rs.sent {
			return true, fmt.Errorf("%w: the first stage asked for the agent twice", ErrAgent)
		}
		return true, rs.send(f[2], f[3], strings.Split(f[4], ","))
	}
	return false, nil
}

func (rs *remoteStart) send(sys, machine string, decompressors []string) error {
	goos, goarch, ok := goPlatform(sys, machine)
	if !ok {
		return fmt.Errorf("%w for %s %s (uname -s, uname -m): not a platform Spindle knows how to build for", ErrNoAgent, printable.String(sys), printable.String(machine))
	}
	rs.platform = goos + "/" + goarch
	bin, err := rs.src.Agent(goos, goarch)
	if err != nil {
		return fmt.Errorf("the target is %s/%s: %w", goos, goarch, err)
	}
	if rs.localPipe {
		decompressors = nil // raw: see OverLocalPipe
	}
	payload, format, err := bin.Payload(decompressors)
	if err != nil {
		return err
	}
	rs.log.Debug("sending agent", zap.String("context", rs.name), zap.String("platform", rs.platform),
		zap.String("format", format), zap.Int("bytes", len(payload)))
	t0 := time.Now()
	// A failed write ends nothing yet: the stage asks before it has
	// found a directory for the agent, and when it finds none it prints
	// why and exits, which is what the user needs to read. The next
	// lines say; sendErr is reported only if they do not.
	if _, err := fmt.Fprintf(rs.w, "%s %d %s %s\n", SendPrefix, len(payload), format, bin.Hash); err != nil {
		rs.sendErr = fmt.Errorf("send agent: %w", err)
	} else if _, err := rs.w.Write(payload); err != nil {
		rs.sendErr = fmt.Errorf("send agent: %w", err)
	}
	rs.sent, rs.format, rs.wire, rs.size, rs.sendTime = true, format, len(payload), bin.Size, time.Since(t0)
	return nil
}

func mib(n int) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

// gzipped returns b's gzip form: the one the build embedded (gzip -9), or
// one made once per binary (by hash) and kept for the process's lifetime.
func gzipped(b *Binary) ([]byte, error) {
	if gz, err := b.compressed(); gz != nil || err != nil {
		return gz, err
	}
	e, _ := gzCache.LoadOrStore(b.Hash, &gzEntry{})
	ent := e.(*gzEntry)
	ent.once.Do(func() {
		data, err := b.Bytes()
		if err != nil {
			ent.err = err
			return
		}
		ent.data, ent.err = gzipChunks(data, runtimeGzipLevel)
	})
	return ent.data, ent.err
}

// runtimeGzipLevel is how hard an agent compresses its own binary for a
// cold hop, on the hop's critical path. On the 7 MB linux/amd64 agent
// (fast AMD instance, one CPU): level 1 takes 61 ms for 3.29 MB, level 6
// 184 ms for 2.96 MB, and gzip -dc unpacks either in 40 ms. The 0.33 MB
// more cost less than the 120 ms of CPU saved on any link faster than
// about 3 MB/s, and a hop's link (bastion to host) is most often a LAN.
// Level 9 would save another 0.3 % in 3.4x level 6's time.
const runtimeGzipLevel = gzip.BestSpeed

var gzCache sync.Map // hash → *gzEntry

type gzEntry struct {
	once sync.Once
	data []byte
	err  error
}

type onceCloser struct {
	io.WriteCloser
	// busy keeps Close from running while a Write is in flight: x/crypto's
	// ssh channel races when CloseWrite and Write run at once (found by
	// -race when an agent died mid-transfer). It is a channel, not a
	// mutex, so that Close can give up on a Write stuck on a peer that
	// stopped reading: the session's close, which follows, ends that Write.
	busy chan struct{}
	once sync.Once
	err  error
}

func newOnceCloser(w io.WriteCloser) *onceCloser {
	return &onceCloser{WriteCloser: w, busy: make(chan struct{}, 1)}
}

// closeWriteWait is how long Close waits for a Write in flight.
const closeWriteWait = 2 * time.Second

func (c *onceCloser) Write(p []byte) (int, error) {
	c.busy <- struct{}{}
	defer func() { <-c.busy }()
	return c.WriteCloser.Write(p)
}

func (c *onceCloser) Close() error {
	c.once.Do(func() {
		t := time.NewTimer(closeWriteWait)
		defer t.Stop()
		select {
		case c.busy <- struct{}{}:
			defer func() { <-c.busy }()
			c.err = c.WriteCloser.Close()
		case <-t.C:
		}
	})
	return c.err
}
