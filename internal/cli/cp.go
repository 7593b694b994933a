package cli

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/daemon/proto"
	"github.com/spindle-rpc/spindle/services/fs"
	"github.com/spindle-rpc/spindle/target"
	"go.uber.org/zap"
)

// A cp argument is a local path or TARGET:PATH, a path on a target:
//
//   - An argument that starts with '/' or '.' is a local path.
//   - Otherwise it is split at the first ":/" whose left part is a valid
//     TARGET (target.Parse accepts it): the left part is the TARGET, the
//     rest, from the '/', the absolute PATH on it. The left part may hold
//     ':' and ',' itself: "ssh:web1:2222:/etc/motd", "[::1]:22:/tmp/x",
//     "bastion,web1,sudo:postgres:/var/lib/x" split after the port, the
//     bracket and the become hop. Splitting at the first such ":/" means a
//     PATH may contain ":/" ("local:/tmp/a:/b" is /tmp/a:/b on local).
//   - An argument that has a ":/" but no valid TARGET before any of them
//     ("dokcer:app1:/etc") is an error, the TARGET's, so that a mistyped
//     TARGET is not taken for a local path.
//   - An argument with no ":/" whose part before some ':' is a valid
//     TARGET ("web1:notes", "local:") is an error: a remote PATH must be
//     absolute.
//   - Anything else is a local path. Write ./NAME for a local path that
//     does not start with '/' or '.' and has a colon.

// copyEndpoint is one side of a copy.
type copyEndpoint struct {
	Target string // "" for a local path
	Path   string
}

func (e copyEndpoint) remote() bool { return e.Target != "" }

func (e copyEndpoint) String() string {
	if e.Target == "" {
		return e.Path
	}
	return e.Target + ":" + e.Path
}

// parseCopyArg splits a cp argument (see the rule above).
func parseCopyArg(s string) (copyEndpoint, error) {
	if s == "" {
		return copyEndpoint{}, errors.New("empty path")
	}
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") {
		return copyEndpoint{Path: s}, nil
	}
	var firstErr error
	for i := 0; i+1 < len(s); i++ {
		if s[i] != ':' || s[i+1] != '/' {
			continue
		}
		_, err := target.Parse(s[:i])
		if err == nil {
			return copyEndpoint{Target: s[:i], Path: s[i+1:]}, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		// Most likely a mistyped TARGET: better an error than a local
		// path named after it.
		return copyEndpoint{}, fmt.Errorf("%w (for a local path write ./%s)", firstErr, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		if _, err := target.Parse(s[:i]); err == nil {
			return copyEndpoint{}, fmt.Errorf("%q: the path on %s must be absolute (TARGET:/PATH); for a local file whose name has a colon write ./%s", s, s[:i], s)
		}
	}
	return copyEndpoint{Path: s}, nil
}

type cpOptions struct {
	recursive bool
	preserve  bool
	parallel  int
}

func newCpCmd(g *globals) *cobra.Command {
	var o cpOptions
	var to []string
	var fanout int
	c := &cobra.Command{
		Use:               "cp [-r] [-p] [--parallel N] [--to TARGET...] SRC DST",
		ValidArgsFunction: g.completeCopy,
		Short:             "Copy files and directory trees to, from or between targets",
		Long: `Copy SRC to DST, where one of them or both are on a target, written
TARGET:PATH with PATH absolute. TARGET is anything 'spindle run' takes,
chains included (-J applies to both sides); the argument is split at the
first ":/" that follows a valid TARGET, so TARGET may hold ':' and ','
(ssh:web1:2222:/etc/motd, [::1]:22:/tmp/x, bastion,web1,sudo:postgres:/x).
A local path that starts with '/' or '.' is always local: write ./a:b for
a local file whose name has a colon.

Like cp: a DST that is an existing directory receives SRC inside it
(DST/NAME); otherwise DST is the new name. A directory SRC needs -r; its
copy mirrors SRC's content, symlinks as symlinks. Files are written
atomically (a temporary file renamed into place) and checked with sha256;
up to --parallel files travel at once. -p keeps modes and modification
times (and directories' modes); without it, copied files and new
directories get the source's permission bits less group/other write and
setuid/setgid/sticky (like cp under umask 022), and files the current time.
Ownership is not copied. Between two targets the data passes through
this machine (like scp -3), streamed, and is checked at both ends; hops
that both TARGETs begin with are connected once (bastion,web1:/x and
bastion,web2:/y share one connection to bastion).

A progress bar with bytes, throughput and ETA is drawn on standard error
when it is a terminal; otherwise cp prints nothing but errors. The exit
status is 0 on success, 1 if the copy failed, 2 on bad arguments, 255 if
the target cannot be reached (or the connection is lost).

--to TARGET (repeated, or @FILE for the targets FILE lists, as 'spindle
run' takes them) copies SRC to DST on every one of them, DST then a plain
absolute path: like pdcp, --fanout targets at once, on connections made
in parallel that share the hops their chains begin with (-J bastion: one
login to the bastion, whose agent starts every hop). SRC is checked once;
a file is hashed once, and every target checks what it received against
that hash (a file that changes meanwhile fails the copies); one progress
bar counts every copy. Each target that failed is named on
standard error with why, a last line lists them, and the exit status is
the largest (1 a copy failed, 255 a target not reached).

--persist DURATION (or SPINDLE_PERSIST) keeps the connections open after
the copy, as for 'spindle run' (with --to, every target's copy goes
through the daemon, without a progress bar).`,
		Example: `  spindle cp ./app.conf web1:/etc/app/                 # into an existing directory
  spindle cp -p web1:/etc/motd ./motd                   # keep mode and mtime
  spindle cp -r ./site ssh:deploy@web1:2222:/srv/site   # a tree, to a port
  spindle cp -r -J bastion web1,sudo:/var/lib/app ./backup
  spindle cp local,sudo:/etc/shadow /tmp/shadow         # through sudo on this machine
  spindle cp -r --parallel 64 docker:app1:/data ./data  # from a container
  spindle cp ./dump.sql '[::1]:2222:/tmp/'              # IPv6 with a port
  spindle cp -r web1:/srv/site web2:/srv/               # between two targets
  spindle cp --to @hosts.txt ./app.conf /etc/app/       # to every host listed
  spindle cp -r -J bastion --to web1 --to web2 ./site /srv/`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return &usageError{cmd: c.CommandPath(), err: fmt.Errorf("cp needs SRC and DST, got %d arguments", len(args))}
			}
			if o.parallel < 1 {
				return &usageError{cmd: c.CommandPath(), err: fmt.Errorf("--parallel must be at least 1, got %d", o.parallel)}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if len(to) > 0 {
				return g.copyToMany(c.Context(), &o, args[0], args[1], to, fanout)
			}
			src, dst, err := parseCopyArgs(args[0], args[1])
			if err != nil {
				return &usageError{cmd: c.CommandPath(), err: err}
			}
			if g.persist > 0 {
				if handled, err := g.copyPersistent(&o, src, dst); handled {
					return err
				}
			}
			ctx, sig, stop := SignalContext(c.Context())
			defer stop()
			return runCopy(ctx, g, &o, src, dst, sig)
		},
	}
	f := c.Flags()
	f.BoolVarP(&o.recursive, "recursive", "r", false, "copy directories and their content")
	f.BoolVarP(&o.preserve, "preserve", "p", false, "keep modes and modification times")
	f.IntVar(&o.parallel, "parallel", fs.DefaultTreeParallel, "files in flight at once")
	f.StringArrayVar(&to, "to", nil, "copy SRC to the path DST on this TARGET (repeat it, or @FILE: the targets FILE lists)")
	f.IntVar(&fanout, "fanout", defaultFanout, "with --to: how many targets to connect to and copy to at once")
	persistFlag(c, g)
	return c
}

// copyPersistent runs the copy through the daemon (see runPersistent).
func (g *globals) copyPersistent(o *cpOptions, src, dst copyEndpoint) (handled bool, err error) {
	req, err := copyRequest(o, src, dst)
	if err != nil {
		return true, err
	}
	_, req.Progress = ttyFd(g.stderr)
	return g.runPersistent("", nil, persistOpts{copy: req})
}

// copyRequest is the daemon's request for a copy; local paths go as
// absolute ones (the daemon runs in /).
func copyRequest(o *cpOptions, src, dst copyEndpoint) (*proto.Copy, error) {
	abs := func(e copyEndpoint) (copyEndpoint, error) {
		if e.remote() {
			return e, nil
		}
		p, err := filepath.Abs(e.Path)
		if err == nil && strings.HasSuffix(e.Path, "/") && !strings.HasSuffix(p, "/") {
			p += "/" // "into this directory", which Abs would drop
		}
		e.Path = p
		return e, err
	}
	var err error
	if src, err = abs(src); err != nil {
		return nil, err
	}
	if dst, err = abs(dst); err != nil {
		return nil, err
	}
	return &proto.Copy{
		SrcTarget: src.Target, SrcPath: src.Path, DstTarget: dst.Target, DstPath: dst.Path,
		Recursive: o.recursive, Preserve: o.preserve, Parallel: o.parallel,
	}, nil
}

// parseCopyArgs parses SRC and DST and checks that at least one is remote.
func parseCopyArgs(srcArg, dstArg string) (src, dst copyEndpoint, err error) {
	if src, err = parseCopyArg(srcArg); err != nil {
		return src, dst, fmt.Errorf("SRC %v", err)
	}
	if dst, err = parseCopyArg(dstArg); err != nil {
		return src, dst, fmt.Errorf("DST %v", err)
	}
	if !src.remote() && !dst.remote() {
		return src, dst, errors.New("SRC and DST are both local: one of them must be TARGET:/PATH")
	}
	return src, dst, nil
}

// runCopy connects to the remote side (or both) and copies.
func runCopy(ctx stdctx.Context, g *globals, o *cpOptions, src, dst copyEndpoint, sig func() syscall.Signal) error {
	c, err := newCopyJob(g, o, src, dst, sig)
	if err != nil {
		return err
	}
	var targets []string
	for _, e := range []copyEndpoint{src, dst} {
		if e.remote() {
			targets = append(targets, e.Target)
		}
	}
	s, cxs, err := g.connectAll(ctx, targets...)
	if err != nil {
		return err
	}
	defer s.closeAfter(sig)
	var from, to *spindle.Context
	switch {
	case src.remote() && dst.remote():
		from, to = cxs[0], cxs[1]
	case src.remote():
		from = cxs[0]
	default:
		to = cxs[0]
	}
	return c.run(ctx, from, to, newCopyProgress(g.stderr, path.Base(src.Path)), s.log)
}

// copyJob is one cp, its local side checked, waiting for its contexts.
type copyJob struct {
	o        *cpOptions
	src, dst copyEndpoint
	srcInfo  os.FileInfo // a local source's
	// srcSum is a local source file's sha256, taken once for all the
	// copies of cp --to (fs.TreeOptions.SHA256); nil: each copy hashes.
	srcSum []byte
	fail   func(error) error
}

// newCopyJob checks a local source before anything connects.
func newCopyJob(g *globals, o *cpOptions, src, dst copyEndpoint, sig func() syscall.Signal) (*copyJob, error) {
	name := func(e copyEndpoint) string {
		if g.via != "" && e.remote() {
			return g.via + "," + e.String() // the whole chain, as it is connected
		}
		return e.String()
	}
	what := name(src) + " → " + name(dst)
	c := &copyJob{o: o, src: src, dst: dst, fail: func(err error) error { return copyFailure(what, err, sig()) }}
	if !src.remote() {
		st, err := os.Stat(src.Path)
		if err != nil {
			return nil, c.fail(err)
		}
		if err := checkSource(src.Path, st.IsDir(), st.Mode().IsRegular(), o.recursive); err != nil {
			return nil, c.fail(err)
		}
		c.srcInfo = st
	}
	return c, nil
}

// run copies from the context from (nil: the source is local) to to (nil:
// local), drawing progress on bar (nil: none).
func (c *copyJob) run(ctx stdctx.Context, from, to *spindle.Context, bar *copyProgress, log *zap.Logger) error {
	opts := fs.TreeOptions{Preserve: c.o.preserve, Parallel: c.o.parallel, SHA256: c.srcSum}
	if bar != nil {
		opts.Progress = bar.add
		opts.Total = func(_ int, n int64) { bar.start(n) }
	}
	var res *fs.TreeResult
	var err error
	switch {
	case from != nil && to != nil:
		res, err = relay(ctx, from, c.src.Path, to, c.dst.Path, c.o, opts, bar)
	case from != nil:
		res, err = download(ctx, from, c.src.Path, c.dst.Path, c.o, opts, bar)
	default:
		res, err = upload(ctx, to, c.src.Path, c.srcInfo, c.dst.Path, opts, bar)
	}
	bar.done(err)
	if err != nil {
		return c.fail(err)
	}
	log.Sugar().Infof("copied %d files, %d directories, %d bytes", res.Files, res.Dirs, res.Bytes)
	return nil
}

// checkSource refuses what cp refuses: a directory without -r, and
// anything that is neither a directory nor a regular file.
func checkSource(p string, isDir, isRegular, recursive bool) error {
	switch {
	case isDir && !recursive:
		return fmt.Errorf("%s is a directory (use -r to copy a tree)", p)
	case !isDir && !isRegular:
		return fmt.Errorf("%s is not a regular file or a directory", p)
	}
	return nil
}

// into returns where a copy of src lands given dst: inside dst when it is
// an existing directory, dst itself otherwise.
func into(dst, srcBase string, dstIsDir bool, join func(...string) string) string {
	if !dstIsDir || srcBase == "/" || srcBase == "." || srcBase == ".." {
		return dst
	}
	return join(dst, srcBase)
}

// landing returns where a copy lands given dst and how looking dst up went
// (statErr): inside dst when it is an existing directory, dst itself when
// it does not exist (unless it ends in '/' and a file is copied).
func landing(dst, srcBase string, srcIsDir, dstIsDir bool, statErr error, join func(...string) string) (string, error) {
	switch {
	case statErr == nil:
		return into(dst, srcBase, dstIsDir, join), nil
	case !errors.Is(statErr, spindle.ErrNotFound) && !errors.Is(statErr, os.ErrNotExist):
		return "", statErr
	case !srcIsDir && strings.HasSuffix(dst, "/"):
		return "", fmt.Errorf("%s: no such directory", dst)
	}
	return dst, nil
}

func upload(ctx stdctx.Context, cx *spindle.Context, src string, st os.FileInfo, dst string, opts fs.TreeOptions, bar *copyProgress) (*fs.TreeResult, error) {
	fi, err := fs.Stat(ctx, cx, dst)
	if dst, err = landing(dst, filepath.Base(src), st.IsDir(), fi != nil && fi.IsDir, err, path.Join); err != nil {
		return nil, err
	}
	if st.IsDir() {
		return fs.PutTree(ctx, cx, src, dst, opts)
	}
	bar.start(st.Size())
	return fs.PutOne(ctx, cx, src, dst, opts)
}

func download(ctx stdctx.Context, cx *spindle.Context, src, dst string, o *cpOptions, opts fs.TreeOptions, bar *copyProgress) (*fs.TreeResult, error) {
	fi, err := fs.Stat(ctx, cx, src)
	if err != nil {
		return nil, err
	}
	if err := checkSource(src, fi.IsDir, fi.FileMode().IsRegular(), o.recursive); err != nil {
		return nil, err
	}
	st, err := os.Stat(dst)
	if dst, err = landing(dst, path.Base(src), fi.IsDir, st != nil && st.IsDir(), err, filepath.Join); err != nil {
		return nil, err
	}
	if fi.IsDir {
		return fs.GetTree(ctx, cx, src, dst, opts)
	}
	bar.start(fi.Size)
	return fs.GetOne(ctx, cx, src, dst, opts)
}

// relay copies between two targets through this process, as scp -3 does.
func relay(ctx stdctx.Context, from *spindle.Context, src string, to *spindle.Context, dst string, o *cpOptions, opts fs.TreeOptions, bar *copyProgress) (*fs.TreeResult, error) {
	fi, err := fs.Stat(ctx, from, src)
	if err != nil {
		return nil, err
	}
	if err := checkSource(src, fi.IsDir, fi.FileMode().IsRegular(), o.recursive); err != nil {
		return nil, err
	}
	dfi, err := fs.Stat(ctx, to, dst)
	if dst, err = landing(dst, path.Base(src), fi.IsDir, dfi != nil && dfi.IsDir, err, path.Join); err != nil {
		return nil, err
	}
	if fi.IsDir {
		return fs.CopyTree(ctx, from, src, to, dst, opts)
	}
	bar.start(fi.Size)
	return fs.CopyOne(ctx, from, src, to, dst, opts)
}

// copyFailure maps a failed copy to the exit status: 128+N if signal N
// cancelled it, 255 if the connection was lost, 1 otherwise.
func copyFailure(what string, err error, got syscall.Signal) error {
	cancelled := errors.Is(err, spindle.ErrCanceled) || errors.Is(err, stdctx.Canceled) || errors.Is(err, spindle.ErrDisconnected)
	if got != 0 && cancelled {
		return &exitError{code: exitSignalBase + int(got)}
	}
	err = fmt.Errorf("cp %s: %w", what, err)
	if errors.Is(err, spindle.ErrDisconnected) {
		return &exitError{code: exitConnect, err: err}
	}
	return &exitError{code: exitFailure, err: err}
}

// copyProgress draws a progress bar on a terminal; a nil *copyProgress
// (standard error is not a terminal) draws nothing.
type copyProgress struct {
	w    io.Writer
	desc string
	// copies is how many times the source is copied (cp --to: once per
	// target), 1 for one copy; the bar counts them all.
	copies int
	mu     sync.Mutex // the copies start and add at once
	bar    *progressbar.ProgressBar
}

// newCopyProgress returns a progress drawer on w, or nil if w is not a
// terminal.
func newCopyProgress(w io.Writer, desc string) *copyProgress {
	if _, tty := ttyFd(w); !tty {
		return nil
	}
	return &copyProgress{w: w, desc: desc, copies: 1}
}

// start draws the bar for total bytes (each copy's: the source's size);
// it runs before any data moves. Every copy calls it, the first draws.
func (p *copyProgress) start(total int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil || total <= 0 {
		return
	}
	w := p.w
	p.bar = progressbar.NewOptions64(total*int64(p.copies),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(p.desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		progressbar.OptionSetRenderBlankState(true),
	)
}

// add counts n bytes moved; safe for concurrent calls.
func (p *copyProgress) add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	bar := p.bar
	p.mu.Unlock()
	if bar != nil {
		bar.Add64(n) //nolint:errcheck // drawing is best effort
	}
}

// done finishes the bar (full on success, as it stands on failure) and
// ends its line.
func (p *copyProgress) done(err error) {
	if p == nil || p.copies > 1 {
		return // the last copy's end is not the bar's: see finish
	}
	p.finish(err)
}

// finish finishes the bar of all the copies.
func (p *copyProgress) finish(err error) {
	if p == nil || p.bar == nil {
		return
	}
	if err == nil {
		p.bar.Finish() //nolint:errcheck // drawing is best effort
		return
	}
	p.bar.Exit() //nolint:errcheck // drawing is best effort
}
