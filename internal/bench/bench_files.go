package bench

import (
	"bytes"
	stdctx "context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/fs"
)

// The "files" group of `spindle-bench`: copying files to the ssh group's
// target with fs.Put (one connection, streamed over a circuit) against
// OpenSSH's `ssh host 'cat > f'` (the raw floor), scp and sftp, all three
// multiplexed over a warm ControlMaster so that no row pays a connection
// set-up; a tree of 1,000 files of 4 KiB against `scp -r`; a file
// through one bastion hop against `scp -J`; and a file copied between two
// remote paths through this process against `scp -3`. At 0 and 10 ms.
// "files_big" adds 1 GiB, with the controller's and the agent's peak RSS
// over idle.

type fileSize struct {
	label string
	bytes int64
}

var (
	fileSizes = []fileSize{{"1m", 1 << 20}, {"100m", 100 << 20}}
	bigSize   = fileSize{"1g", 1 << 30}
)

const (
	treeFiles    = 1000
	treeFileSize = 4 << 10
)

func filesCases() []benchCase {
	var cs []benchCase
	for _, ms := range []int{0, 10} {
		sfx := latencySuffix(ms)
		sizes := append(append([]fileSize{}, fileSizes...), bigSize)
		for _, fsz := range sizes {
			group := "files"
			if fsz == bigSize {
				group = "files_big"
			}
			for _, tool := range []string{"ssh_cat", "scp", "sftp"} {
				name := "put_" + fsz.label
				if tool != "ssh_cat" {
					name += "_" + tool
				}
				cs = append(cs, benchCase{
					Name: name + sfx, Group: group, Latency: ms, Baseline: tool + sfx, N: 1,
					Spindle: func(e *benchEnv, n int) (float64, error) { return e.filesPut(ms, fsz, n, false) },
					Base:    func(e *benchEnv, n int) (float64, error) { return e.filesOpenSSH(ms, fsz, n, tool, false) },
					Finish:  throughput(fsz.bytes, fsz == bigSize),
				})
			}
			if fsz == bigSize {
				continue
			}
			for _, tool := range []string{"ssh_cat", "scp"} {
				name := "get_" + fsz.label
				if tool != "ssh_cat" {
					name += "_" + tool
				}
				cs = append(cs, benchCase{
					Name: name + sfx, Group: group, Latency: ms, Baseline: tool + sfx, N: 1,
					Spindle: func(e *benchEnv, n int) (float64, error) { return e.filesGet(ms, fsz, n, "") },
					Base:    func(e *benchEnv, n int) (float64, error) { return e.filesGet(ms, fsz, n, tool) },
					Finish:  throughput(fsz.bytes, false),
				})
			}
			if fsz == fileSizes[1] {
				cs = append(cs, filesHashedCases(ms, fsz)...)
				cs = append(cs, filesFloorCases(ms, fsz)...)
			}
			cs = append(cs, benchCase{
				Name: "copy_" + fsz.label + "_between" + sfx, Group: group, Latency: ms, Baseline: "scp_3" + sfx, N: 1,
				Spindle: func(e *benchEnv, n int) (float64, error) { return e.filesRelay(ms, fsz, n, false) },
				Base:    func(e *benchEnv, n int) (float64, error) { return e.filesRelay(ms, fsz, n, true) },
				Finish:  throughput(fsz.bytes, false),
			}, benchCase{
				Name: "put_" + fsz.label + "_via" + sfx, Group: group, Latency: ms, Baseline: "scp_jump" + sfx, N: 1,
				Spindle: func(e *benchEnv, n int) (float64, error) { return e.filesPut(ms, fsz, n, true) },
				Base:    func(e *benchEnv, n int) (float64, error) { return e.filesOpenSSH(ms, fsz, n, "scp", true) },
				Finish:  throughput(fsz.bytes, false),
			})
		}
		cs = append(cs, benchCase{
			Name: "put_tree_1000x4k" + sfx, Group: "files", Latency: ms, Baseline: "scp_r" + sfx, N: 1,
			Spindle: func(e *benchEnv, n int) (float64, error) { return e.filesTree(ms, n, false) },
			Base:    func(e *benchEnv, n int) (float64, error) { return e.filesTree(ms, n, true) },
		}, benchCase{
			Name: "get_tree_1000x4k" + sfx, Group: "files", Latency: ms, Baseline: "scp_r" + sfx, N: 1,
			Spindle: func(e *benchEnv, n int) (float64, error) { return e.filesGetTree(ms, n, false) },
			Base:    func(e *benchEnv, n int) (float64, error) { return e.filesGetTree(ms, n, true) },
		})
	}
	return cs
}

func init() { benchCases = append(benchCases, filesCases()...) }

// throughput adds MB/s to a row, and with rss the peak RSS growth that
// the last Spindle round measured.
func throughput(size int64, rss bool) func(e *benchEnv, r *benchResult) {
	return func(e *benchEnv, r *benchResult) {
		if r.SpindleNS > 0 {
			r.SpindleMBps = round1(float64(size) / (1 << 20) / (r.SpindleNS / 1e9))
		}
		if r.BaselineNS > 0 {
			r.BaselineMBps = round1(float64(size) / (1 << 20) / (r.BaselineNS / 1e9))
		}
		if rss && e.files != nil {
			r.RSSControllerMiB = round1(float64(e.files.rssCtl) / (1 << 20))
			if e.files.rssAgent >= 0 {
				r.RSSAgentMiB = round1(float64(e.files.rssAgent) / (1 << 20))
			}
		}
	}
}

// filesDirPrefix names the files groups' temp directories.
const filesDirPrefix = "spindle-bench-files-"

// filesBench holds the local sources and the remote directory.
type filesBench struct {
	local  string // local temp dir with the sources
	remote string // remote temp dir (absolute)
	cx     *spindle.Context
	// Peak RSS growth over idle during the last Spindle put, bytes; -1
	// when the agent's /proc is not on this machine.
	rssCtl, rssAgent int64
	// The floor rows' bytes, hashed from memory (bench_files_floor.go).
	floorData []byte
}

func (e *benchEnv) filesSetup(ms int) (*filesBench, *sshPath, error) {
	p := e.sshPath(ms)
	if p.err != nil {
		return nil, nil, p.err
	}
	if e.files == nil {
		cx, err := e.sshPath(0).context(e.ctx)
		if err != nil {
			return nil, nil, err
		}
		remoteParent, localParent := "/tmp", ""
		if d := e.sshFlags.filesDir; d != "" {
			remoteParent, localParent = d, d
		}
		res, err := exec.Run(e.ctx, cx, exec.Cmd{Argv: []string{"mktemp", "-d", filepath.Join(remoteParent, filesDirPrefix+"XXXXXX")}})
		if err != nil || res.ExitCode != 0 {
			return nil, nil, fmt.Errorf("mktemp on the target: %v %s", err, res.Stderr)
		}
		local, err := os.MkdirTemp(localParent, filesDirPrefix)
		if err != nil {
			return nil, nil, err
		}
		e.files = &filesBench{local: local, remote: strings.TrimSpace(string(res.Stdout)), cx: cx}
	}
	// Every row starts with clean page caches on both sides, untimed: the
	// 100 MiB that the previous row (Spindle's or OpenSSH's) left dirty
	// would otherwise be written back during this one, and an ext4 fsync
	// in data=ordered mode waits for other files' dirty data too, so
	// whichever row ran after a plain `cat > f` paid for its write-back.
	syscall.Sync()
	if res, err := exec.Run(e.ctx, e.files.cx, exec.Cmd{Argv: []string{"sync"}}); err != nil || res.ExitCode != 0 {
		return nil, nil, fmt.Errorf("sync on the target: %v", err)
	}
	return e.files, p, nil
}

// source is the local file of that size, made on first use (random bytes:
// nothing compresses).
func (f *filesBench) source(fsz fileSize) (string, error) {
	path := filepath.Join(f.local, "src-"+fsz.label)
	if st, err := os.Stat(path); err == nil && st.Size() == fsz.bytes {
		return path, nil
	}
	out, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.CopyN(out, rand.Reader, fsz.bytes); err != nil {
		out.Close()
		return "", err
	}
	return path, out.Close()
}

func (e *benchEnv) filesPut(ms int, fsz fileSize, n int, via bool) (float64, error) {
	f, p, err := e.filesSetup(ms)
	if err != nil {
		return 0, err
	}
	src, err := f.source(fsz)
	if err != nil {
		return 0, err
	}
	cx, err := p.context(e.ctx)
	if via {
		cx, err = e.viaHop(ms)
	}
	if err != nil {
		return 0, err
	}
	dst := f.remote + "/spindle-" + fsz.label
	stop := f.watchRSS(cx)
	d, err := timePerOp(n, func() error {
		_, err := fs.PutFile(e.ctx, cx, src, dst, false, fs.PutOptions{})
		return err
	})
	stop()
	return d, err
}

func (e *benchEnv) filesOpenSSH(ms int, fsz fileSize, n int, tool string, via bool) (float64, error) {
	f, p, err := e.filesSetup(ms)
	if err != nil {
		return 0, err
	}
	src, err := f.source(fsz)
	if err != nil {
		return 0, err
	}
	dst := f.remote + "/" + tool + "-" + fsz.label
	if via {
		if err := p.jumpTrue(e.ctx); err != nil { // the jump master, untimed
			return 0, err
		}
	} else if err := p.warmMaster(e.ctx); err != nil {
		return 0, err
	}
	op, err := f.floorCopy(tool, fsz, func(tool string) error { return p.copyWith(e.ctx, tool, src, dst, via, false) })
	if err != nil {
		return 0, err
	}
	return timePerOp(n, op)
}

func (e *benchEnv) filesTree(ms int, n int, openssh bool) (float64, error) {
	f, p, err := e.filesSetup(ms)
	if err != nil {
		return 0, err
	}
	tree, err := f.localTree()
	if err != nil {
		return 0, err
	}
	if openssh {
		if err := p.warmMaster(e.ctx); err != nil {
			return 0, err
		}
		i := 0
		return timePerOp(n, func() error {
			i++
			return p.copyWith(e.ctx, "scp", tree, fmt.Sprintf("%s/scp-tree-%d", f.remote, i), false, true)
		})
	}
	cx, err := p.context(e.ctx)
	if err != nil {
		return 0, err
	}
	i := 0
	return timePerOp(n, func() error {
		i++
		_, err := fs.PutTree(e.ctx, cx, tree, fmt.Sprintf("%s/spindle-tree-%d", f.remote, i), fs.TreeOptions{})
		return err
	})
}

// remoteSource is a file of that size on the target for the get rows,
// put there (untimed) on first use.
func (f *filesBench) remoteSource(ctx stdctx.Context, fsz fileSize) (string, error) {
	dst := f.remote + "/get-src-" + fsz.label
	if st, err := fs.Stat(ctx, f.cx, dst); err == nil && st.Size == fsz.bytes {
		return dst, nil
	}
	src, err := f.source(fsz)
	if err != nil {
		return "", err
	}
	_, err = fs.PutFile(ctx, f.cx, src, dst, false, fs.PutOptions{})
	return dst, err
}

// remoteTree is the tree of the put rows on the target, put there
// (untimed) on first use.
func (f *filesBench) remoteTree(ctx stdctx.Context) (string, error) {
	dst := f.remote + "/get-tree-src"
	if _, err := fs.Stat(ctx, f.cx, dst); err == nil {
		return dst, nil
	}
	tree, err := f.localTree()
	if err != nil {
		return "", err
	}
	_, err = fs.PutTree(ctx, f.cx, tree, dst, fs.TreeOptions{})
	return dst, err
}

// remoteFileRow prepares a row that reads the remote file of that size:
// the files set-up, the file, and for an OpenSSH baseline a warm master.
func (e *benchEnv) remoteFileRow(ms int, fsz fileSize, openssh bool) (*filesBench, *sshPath, string, error) {
	f, p, err := e.filesSetup(ms)
	if err != nil {
		return nil, nil, "", err
	}
	src, err := f.remoteSource(e.ctx, fsz)
	if err == nil && openssh {
		err = p.warmMaster(e.ctx)
	}
	return f, p, src, err
}

// filesGet copies a remote file of that size to a local one: with
// fs.GetFile when tool is "", else with that OpenSSH tool.
func (e *benchEnv) filesGet(ms int, fsz fileSize, n int, tool string) (float64, error) {
	f, p, src, err := e.remoteFileRow(ms, fsz, tool != "")
	if err != nil {
		return 0, err
	}
	if tool != "" {
		dst := filepath.Join(f.local, "get-"+tool+"-"+fsz.label)
		op, err := f.floorCopy(tool, fsz, func(tool string) error { return p.copyFrom(e.ctx, tool, src, dst, false) })
		if err != nil {
			return 0, err
		}
		return timePerOp(n, op)
	}
	cx, err := p.context(e.ctx)
	if err != nil {
		return 0, err
	}
	dst := filepath.Join(f.local, "get-spindle-"+fsz.label)
	return timePerOp(n, func() error {
		_, err := fs.GetFile(e.ctx, cx, src, dst, false)
		return err
	})
}

// filesRelay copies a remote file to another name on the same target
// through this process: fs.CopyOne from one connection to a second one
// (two agents, as between two hosts; every byte crosses the loopback
// twice), or (openssh) `scp -3 host:src host:dst` over the ControlMaster.
func (e *benchEnv) filesRelay(ms int, fsz fileSize, n int, openssh bool) (float64, error) {
	_, p, src, err := e.remoteFileRow(ms, fsz, openssh)
	if err != nil {
		return 0, err
	}
	if openssh {
		dst := src + ".scp3"
		return timePerOp(n, func() error {
			cmd := osexec.CommandContext(e.ctx, "scp", append(append([]string{"-q", "-3"}, p.muxArgs(false)...), p.dest+":"+src, p.dest+":"+dst)...)
			return runTool(cmd, "scp -3", src, dst)
		})
	}
	from, err := p.context(e.ctx)
	if err != nil {
		return 0, err
	}
	to, err := p.secondContext(e.ctx)
	if err != nil {
		return 0, err
	}
	dst := src + ".spindle"
	return timePerOp(n, func() error {
		_, err := fs.CopyOne(e.ctx, from, src, to, dst, fs.TreeOptions{})
		return err
	})
}

// filesGetTree copies the remote tree into a fresh local directory each
// round, with fs.GetTree or (openssh) `scp -r`.
func (e *benchEnv) filesGetTree(ms int, n int, openssh bool) (float64, error) {
	f, p, err := e.filesSetup(ms)
	if err != nil {
		return 0, err
	}
	src, err := f.remoteTree(e.ctx)
	if err != nil {
		return 0, err
	}
	i := 0
	dst := func(who string) string {
		i++
		return filepath.Join(f.local, fmt.Sprintf("get-%s-tree-%d", who, i))
	}
	if openssh {
		if err := p.warmMaster(e.ctx); err != nil {
			return 0, err
		}
		return timePerOp(n, func() error { return p.copyFrom(e.ctx, "scp", src, dst("scp"), true) })
	}
	cx, err := p.context(e.ctx)
	if err != nil {
		return 0, err
	}
	return timePerOp(n, func() error {
		_, err := fs.GetTree(e.ctx, cx, src, dst("spindle"), fs.TreeOptions{})
		return err
	})
}

// localTree is the local tree of the tree rows, made on first use.
func (f *filesBench) localTree() (string, error) {
	tree := filepath.Join(f.local, "tree")
	if _, err := os.Stat(tree); err == nil {
		return tree, nil
	}
	return tree, makeTree(tree)
}

// makeTree writes treeFiles files of treeFileSize in 10 directories.
func makeTree(dir string) error {
	buf := make([]byte, treeFileSize)
	for i := 0; i < treeFiles; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%10))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		rand.Read(buf)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%04d", i)), buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// copyWith copies src to dst on the path's target with an OpenSSH tool,
// over the path's ControlMaster (or, via, the ssh -J one).
func (p *sshPath) copyWith(ctx stdctx.Context, tool, src, dst string, via, recursive bool) error {
	common := p.muxArgs(via)
	var cmd *osexec.Cmd
	switch tool {
	case "ssh_cat":
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		cmd = sshRemote(ctx, common, p.dest, "cat > "+shellQuote(dst))
		cmd.Stdin = in
	case hashedCat:
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		h := sha256.New()
		cmd = sshRemote(ctx, common, p.dest, hashedCatPut(shellQuote(dst)))
		cmd.Stdin = io.TeeReader(in, h)
		return runHashed(cmd, h, src, dst)
	case "scp":
		args := append([]string{"-q"}, common...)
		if recursive {
			args = append(args, "-r")
		}
		cmd = osexec.CommandContext(ctx, "scp", append(args, src, p.dest+":"+dst)...)
	case "sftp":
		batch := fmt.Sprintf("put %s %s\n", src, dst)
		cmd = osexec.CommandContext(ctx, "sftp", append(append([]string{"-q", "-b", "-"}, common...), p.dest)...)
		cmd.Stdin = strings.NewReader(batch)
	default:
		return fmt.Errorf("unknown tool %q", tool)
	}
	return runTool(cmd, tool, src, dst)
}

// muxArgs are the OpenSSH options that ride the path's ControlMaster (or,
// via, the ssh -J one).
func (p *sshPath) muxArgs(via bool) []string {
	cm := p.cm
	if via {
		cm = p.jumpCM
	}
	args := append([]string{"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ControlMaster=auto",
		"-o", "ControlPath=" + cm, "-o", "ControlPersist=60"}, p.sshArgs...)
	if via {
		args = append(args, "-J", p.dest)
	}
	return args
}

// sshRemote is `ssh -T OPTIONS DEST REMOTE`, the files rows' pipe to the
// target.
func sshRemote(ctx stdctx.Context, opts []string, dest, remote string) *osexec.Cmd {
	return osexec.CommandContext(ctx, "ssh", append(append([]string{"-T"}, opts...), dest, remote)...)
}

// runTool runs an OpenSSH copy, its stderr in the error.
func runTool(cmd *osexec.Cmd, tool, src, dst string) error {
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s → %s: %v: %s", tool, src, dst, err, bytes.TrimSpace(errb.Bytes()))
	}
	return nil
}

// copyFrom copies src on the path's target to the local dst with an
// OpenSSH tool, over the path's ControlMaster.
func (p *sshPath) copyFrom(ctx stdctx.Context, tool, src, dst string, recursive bool) error {
	common := p.muxArgs(false)
	var cmd *osexec.Cmd
	switch tool {
	case "ssh_cat":
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		defer out.Close()
		cmd = sshRemote(ctx, common, p.dest, "cat "+shellQuote(src))
		cmd.Stdout = out
	case hashedCat:
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		defer out.Close()
		h := sha256.New()
		cmd = sshRemote(ctx, common, p.dest, hashedCatGet(shellQuote(src)))
		cmd.Stdout = io.MultiWriter(out, h)
		if err := runHashed(cmd, h, src, dst); err != nil {
			return err
		}
		return out.Sync()
	case "scp":
		args := append([]string{"-q"}, common...)
		if recursive {
			args = append(args, "-r")
		}
		cmd = osexec.CommandContext(ctx, "scp", append(args, p.dest+":"+src, dst)...)
	default:
		return fmt.Errorf("unknown tool %q", tool)
	}
	return runTool(cmd, tool, src, dst)
}

// watchRSS samples this process's and (when it runs on this machine) the
// agent's RSS every 20 ms until stop, and records the peak growth over
// the values at the start.
func (f *filesBench) watchRSS(cx *spindle.Context) (stop func()) {
	agentPID := cx.Hello().PID
	if _, err := os.Stat("/proc/" + strconv.Itoa(agentPID)); err != nil {
		agentPID = 0
	}
	ctl0, agent0 := rss(os.Getpid()), rss(agentPID)
	var peakCtl, peakAgent atomic.Int64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if v := rss(os.Getpid()) - ctl0; v > peakCtl.Load() {
				peakCtl.Store(v)
			}
			if agentPID != 0 {
				if v := rss(agentPID) - agent0; v > peakAgent.Load() {
					peakAgent.Store(v)
				}
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		f.rssCtl, f.rssAgent = peakCtl.Load(), peakAgent.Load()
		if agentPID == 0 {
			f.rssAgent = -1
		}
	}
}

// rss is a process's resident set in bytes (0 if unknown).
func rss(pid int) int64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func (f *filesBench) close(ctx stdctx.Context) {
	if f.remote != "" && strings.HasPrefix(filepath.Base(f.remote), filesDirPrefix) {
		exec.Run(ctx, f.cx, exec.Cmd{Argv: []string{"rm", "-rf", f.remote}}) //nolint:errcheck // best effort
	}
	os.RemoveAll(f.local)
}

// The hashed rows (put_100m_hashed, get_100m_hashed): Spindle against
// OpenSSH doing what Spindle's put and get do beyond a raw copy (README:
// a sha256 computed while streaming and checked at the far end, the
// destination fsynced), with the quickest tools at hand: `cat` over the
// ControlMaster, sha256 here in Go (SHA-NI where the CPU has it) as the
// bytes pass, and `openssl dgst` (else sha256sum) on the target, its hash
// checked against ours. put_100m and get_100m compare with the raw copy,
// which does neither; these rows say what the two guarantees cost when
// OpenSSH is made to give them.

// hashedCat is the hashed rows' tool for copyWith and copyFrom.
const hashedCat = "hashed_cat"

// sha256Remote is a shell function printing a file's (or stdin's) sha256
// first on its line, with openssl where the target has it.
const sha256Remote = `s() { if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256 -r "$@"; else sha256sum "$@"; fi; }; `

// hashedCatPut writes stdin to dst (quoted) while hashing it, fsyncs
// dst, and prints the hash on stderr. Through sh, since the login shell
// may be fish or tcsh.
func hashedCatPut(dst string) string {
	return "sh -c " + shellQuote(sha256Remote+"tee "+dst+" | s >&2 && sync "+dst)
}

// hashedCatGet hashes src (quoted) onto stderr while cat sends it.
func hashedCatGet(src string) string {
	return "sh -c " + shellQuote(sha256Remote+"s "+src+" >&2 & cat "+src+"; wait")
}

// runHashed runs a hashed_cat copy and checks that the target's hash,
// the first word it printed on stderr, is h's.
func runHashed(cmd *osexec.Cmd, h hash.Hash, src, dst string) error {
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s → %s: %v: %s", hashedCat, src, dst, err, bytes.TrimSpace(errb.Bytes()))
	}
	got := strings.Fields(errb.String())
	if want := hex.EncodeToString(h.Sum(nil)); len(got) == 0 || got[0] != want {
		return fmt.Errorf("%s %s → %s: the target's sha256 %q is not %s", hashedCat, src, dst, errb.String(), want)
	}
	return nil
}

// filesHashedCases are the hashed rows for fsz at ms.
func filesHashedCases(ms int, fsz fileSize) []benchCase {
	sfx := latencySuffix(ms)
	return []benchCase{{
		Name: "put_" + fsz.label + "_hashed" + sfx, Group: "files", Latency: ms, Baseline: hashedCat + sfx, N: 1,
		Spindle: func(e *benchEnv, n int) (float64, error) { return e.filesPut(ms, fsz, n, false) },
		Base:    func(e *benchEnv, n int) (float64, error) { return e.filesOpenSSH(ms, fsz, n, hashedCat, false) },
		Finish:  throughput(fsz.bytes, false),
	}, {
		Name: "get_" + fsz.label + "_hashed" + sfx, Group: "files", Latency: ms, Baseline: hashedCat + sfx, N: 1,
		Spindle: func(e *benchEnv, n int) (float64, error) { return e.filesGet(ms, fsz, n, "") },
		Base:    func(e *benchEnv, n int) (float64, error) { return e.filesGet(ms, fsz, n, hashedCat) },
		Finish:  throughput(fsz.bytes, false),
	}}
}
