package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
)

// Tree copies: PutTree and GetTree copy a directory tree like `cp -r src
// dst` where dst is the directory to create or fill. They pipeline: the
// directories are created level by level, parents before children, each
// level's mkdirs in flight together; then up to Parallel files and
// symlinks are in flight at once (each file one fs.Put, inline or
// streamed, or one fs.Read or streamed fs.Get); last, directory modes are
// set, children before parents. A copy never pays one round trip per file
// in sequence: GetTree lists the remote tree with one fs.Walk.
//
// Regular files, directories and symlinks are copied (symlinks as
// symlinks, their targets unchanged); any other kind of file (a named
// pipe, a socket, a device) fails the copy before anything is written.
// Every file is written atomically (a hidden temporary file renamed into
// place). The first error cancels the transfers still in flight and is
// returned, naming the file.
//
// Modes: with Preserve, files keep their mode (permissions, setuid, setgid,
// sticky) and modification time, directories their mode (set after their
// content, so a read-only directory can be filled; existing directories
// get it too). Without Preserve, a file or a directory that the copy
// creates gets the source's permissions less group and other write, and
// without setuid, setgid and sticky (what cp gives under the usual umask
// 022), a file its modification time now; directories that exist already
// keep their mode. Ownership and directories' modification times are not
// copied.

// DefaultTreeParallel is the number of transfers PutTree and GetTree keep
// in flight when TreeOptions.Parallel is 0.
const DefaultTreeParallel = 32

// TreeOptions tune PutTree and GetTree (and PutOne and GetOne).
type TreeOptions struct {
	// Preserve keeps the mode and modification time of files (and the mode
	// of directories).
	Preserve bool
	// Parallel is the number of transfers in flight; 0 means
	// DefaultTreeParallel.
	Parallel int
	// Progress, if set, is called with byte counts as data moves. It must
	// be safe for concurrent calls.
	Progress func(n int64)
	// Total, if set, is called once by PutTree and GetTree, before any
	// data moves, with the number of files (regular files and symlinks)
	// and bytes that the copy will move (for a progress bar's total).
	Total func(files int, bytes int64)
	// SHA256, if set, is the sha256 of PutOne's source, taken beforehand:
	// a file copied to many targets (spindle cp --to) is then hashed once
	// instead of once per copy, and each target checks what it received
	// against that one hash, so a source that changed since it was hashed
	// fails the copy (ErrSourceChanged) instead of leaving the targets
	// with different content. PutTree ignores it.
	SHA256 []byte
}

// TreeResult says what a tree copy did.
type TreeResult struct {
	// Files counts the regular files and symlinks copied, Dirs the
	// directories created or filled (the destination itself included).
	Files, Dirs int
	// Bytes is the content of the regular files copied.
	Bytes int64
}

// PutTree copies the local directory src (a symlink to one is followed)
// to the directory dst on c, which is created if missing (its parent must
// exist) and filled if it exists: dst's content mirrors src's.
func PutTree(ctx context.Context, c rpc.Caller, src, dst string, opts TreeOptions) (*TreeResult, error) {
	const op = "fs.PutTree"
	var ents []WalkEntry
	root, err := walkTree(ctx, src, MaxWalkEntries, func(e *WalkEntry) error {
		ents = append(ents, *e)
		return nil
	})
	if errors.Is(err, errTooMany) {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: listing %s: %w", op, src, err)
	}
	opts.SHA256 = nil // one file's
	t := &treeCopy{op: op, opts: opts, dst: &remoteDst{c: c, opts: &opts},
		srcPath: func(rel string) string { return filepath.Join(src, filepath.FromSlash(rel)) },
		dstPath: func(rel string) string { return path.Join(dst, rel) },
	}
	return t.run(ctx, src, dst, root.Mode(), ents)
}

// GetTree copies the directory src on c (a symlink to one is followed) to
// the local directory dst, which is created if missing (its parent must
// exist) and filled if it exists: dst's content mirrors src's. The remote
// tree is listed with one fs.Walk (at most MaxWalkEntries entries), whose
// entries are checked so that nothing is written outside dst.
func GetTree(ctx context.Context, c rpc.Caller, src, dst string, opts TreeOptions) (*TreeResult, error) {
	const op = "fs.GetTree"
	root, ents, err := listDir(ctx, op, c, src)
	if err != nil {
		return nil, err
	}
	t := &treeCopy{op: op, opts: opts, dst: &localDst{c: c, opts: &opts},
		srcPath: func(rel string) string { return path.Join(src, rel) },
		dstPath: func(rel string) string { return filepath.Join(dst, filepath.FromSlash(rel)) },
	}
	return t.run(ctx, src, dst, root.FileMode(), ents)
}

// listDir lists the directory src on c with one fs.Walk, for op.
func listDir(ctx context.Context, op string, c rpc.Caller, src string) (*FileInfo, []WalkEntry, error) {
	var ents []WalkEntry
	root, err := Walk(ctx, c, src, MaxWalkEntries, func(e *WalkEntry) error {
		ents = append(ents, *e)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: listing %s: %w", op, src, err)
	}
	if !root.IsDir {
		return nil, nil, fmt.Errorf("%s: %s is not a directory", op, src)
	}
	return root, ents, nil
}

// PutOne copies the local file src (a symlink is followed) to the file
// dst on c, as PutTree copies each file: atomically, with
// opts.Preserve's and opts.Progress's effects (Parallel and Total are not
// used). dst's directory must exist.
func PutOne(ctx context.Context, c rpc.Caller, src, dst string, opts TreeOptions) (*TreeResult, error) {
	n, err := (&remoteDst{c: c, opts: &opts}).file(ctx, &WalkEntry{}, src, dst)
	if err != nil {
		return nil, fmt.Errorf("fs.PutOne: copying %s to %s: %w", src, dst, err)
	}
	return &TreeResult{Files: 1, Bytes: n}, nil
}

// GetOne copies the file src on c (a symlink is followed) to the local
// file dst, as GetTree copies each file: atomically, with opts.Preserve's
// and opts.Progress's effects (Parallel and Total are not used). dst's
// directory must exist.
func GetOne(ctx context.Context, c rpc.Caller, src, dst string, opts TreeOptions) (*TreeResult, error) {
	n, err := (&localDst{c: c, opts: &opts}).file(ctx, &WalkEntry{}, src, dst)
	if err != nil {
		return nil, fmt.Errorf("fs.GetOne: copying %s to %s: %w", src, dst, err)
	}
	return &TreeResult{Files: 1, Bytes: n}, nil
}

// copyMode is the mode a copy gives a file or directory whose source has
// mode m (see the comment at the top of this file).
func copyMode(m iofs.FileMode, preserve bool) iofs.FileMode {
	if preserve {
		return m & iofs.FileMode(modeBits)
	}
	return m.Perm() & 0o755
}

// treeDst is the side a tree copy writes to.
type treeDst interface {
	// mkdir creates the directory p with exactly mode. An existing
	// directory is no error (created is false, mode is its mode);
	// anything else at p is.
	mkdir(ctx context.Context, p string, mode iofs.FileMode) (created bool, cur iofs.FileMode, err error)
	chmod(ctx context.Context, p string, mode iofs.FileMode) error
	// file copies the regular file src to dst and returns its size; e is
	// src's listing entry (its Size a hint).
	file(ctx context.Context, e *WalkEntry, src, dst string) (int64, error)
	symlink(ctx context.Context, target, dst string) error
}

// treeCopy is one PutTree or GetTree.
type treeCopy struct {
	op               string
	opts             TreeOptions
	dst              treeDst
	srcPath, dstPath func(rel string) string
}

// dirFix is a directory whose mode is set once its content is in place.
type dirFix struct {
	path  string
	mode  iofs.FileMode
	depth int
}

func (t *treeCopy) run(ctx context.Context, srcRoot, dstRoot string, rootMode iofs.FileMode, ents []WalkEntry) (*TreeResult, error) {
	parallel := t.opts.Parallel
	if parallel <= 0 {
		parallel = DefaultTreeParallel
	}
	preserve := t.opts.Preserve

	// Plan: directories by depth, then files and symlinks.
	var levels [][]*WalkEntry
	var leaves []*WalkEntry
	var files int
	var bytes int64
	for i := range ents {
		e := &ents[i]
		m := e.FileMode()
		switch {
		case m.IsDir():
			d := strings.Count(e.Path, "/")
			for len(levels) <= d {
				levels = append(levels, nil)
			}
			levels[d] = append(levels[d], e)
		case m.IsRegular():
			files++
			bytes += e.Size
			leaves = append(leaves, e)
		case m&iofs.ModeSymlink != 0:
			files++
			leaves = append(leaves, e)
		default:
			return nil, fmt.Errorf("%s: %s: cannot copy a %s (only regular files, directories and symlinks)", t.op, t.srcPath(e.Path), kindName(m))
		}
	}
	if t.opts.Total != nil {
		t.opts.Total(files, bytes)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := &TreeResult{}
	var mu sync.Mutex
	var fixes []dirFix
	mkdir := func(ctx context.Context, p string, m iofs.FileMode, depth int) error {
		want := copyMode(m, preserve)
		created, cur, err := t.dst.mkdir(ctx, p, want|0o700)
		if err != nil {
			return fmt.Errorf("%s: creating directory %s: %w", t.op, p, err)
		}
		mu.Lock()
		defer mu.Unlock()
		res.Dirs++
		if (created || preserve) && cur != want {
			fixes = append(fixes, dirFix{path: p, mode: want, depth: depth})
		}
		return nil
	}
	if err := mkdir(ctx, dstRoot, rootMode, -1); err != nil {
		return nil, err
	}
	for d, level := range levels {
		err := pipeline(ctx, parallel, level, func(ctx context.Context, e *WalkEntry) error {
			return mkdir(ctx, t.dstPath(e.Path), e.FileMode(), d)
		})
		if err != nil {
			return nil, err
		}
	}

	var nfiles atomic.Int64
	var nbytes atomic.Int64
	err := pipeline(ctx, parallel, leaves, func(ctx context.Context, e *WalkEntry) error {
		src, dst := t.srcPath(e.Path), t.dstPath(e.Path)
		if e.FileMode()&iofs.ModeSymlink != 0 {
			if err := t.dst.symlink(ctx, e.Target, dst); err != nil {
				return fmt.Errorf("%s: creating symlink %s → %s: %w", t.op, dst, e.Target, err)
			}
			nfiles.Add(1)
			return nil
		}
		n, err := t.dst.file(ctx, e, src, dst)
		if err != nil {
			return fmt.Errorf("%s: copying %s to %s: %w", t.op, src, dst, err)
		}
		nfiles.Add(1)
		nbytes.Add(n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Files, res.Bytes = int(nfiles.Load()), nbytes.Load()

	// Directory modes, deepest first: a parent that loses its search
	// permission must not hide its children's chmod.
	sort.SliceStable(fixes, func(i, j int) bool { return fixes[i].depth > fixes[j].depth })
	for i := 0; i < len(fixes); {
		j := i
		for j < len(fixes) && fixes[j].depth == fixes[i].depth {
			j++
		}
		err := pipeline(ctx, parallel, fixes[i:j], func(ctx context.Context, f dirFix) error {
			if err := t.dst.chmod(ctx, f.path, f.mode); err != nil {
				return fmt.Errorf("%s: setting the mode of directory %s: %w", t.op, f.path, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		i = j
	}
	return res, nil
}

// pipeline runs fn on every item with up to parallel calls in flight. The
// first error cancels the others' context, stops the rest and is returned.
func pipeline[T any](ctx context.Context, parallel int, items []T, fn func(context.Context, T) error) error {
	if len(items) == 0 {
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	for range min(parallel, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(items) {
					return
				}
				if err := fn(ctx, items[i]); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if int(next.Load()) < len(items) {
		return ctx.Err() // the caller's context ended
	}
	return nil
}

func kindName(m iofs.FileMode) string {
	switch {
	case m&iofs.ModeNamedPipe != 0:
		return "named pipe"
	case m&iofs.ModeSocket != 0:
		return "socket"
	case m&iofs.ModeCharDevice != 0:
		return "character device"
	case m&iofs.ModeDevice != 0:
		return "device"
	}
	return "special file (" + m.Type().String() + ")"
}

// progressReader reports the bytes read through it.
type progressReader struct {
	r  io.Reader
	fn func(int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.fn(int64(n))
	}
	return n, err
}

// progressWriter reports the bytes written through it.
type progressWriter struct {
	w  io.Writer
	fn func(int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if n > 0 {
		p.fn(int64(n))
	}
	return n, err
}

// ---- the remote side (PutTree) ----

type remoteDst struct {
	c    rpc.Caller
	opts *TreeOptions
}

func (r *remoteDst) mkdir(ctx context.Context, p string, mode iofs.FileMode) (bool, iofs.FileMode, error) {
	fi, err := Mkdir(ctx, r.c, p, uint32(mode), false)
	if err == nil {
		return true, fi.FileMode() & iofs.FileMode(modeBits), nil
	}
	if !errors.Is(err, errkind.ErrExists) {
		return false, 0, err
	}
	st, serr := Stat(ctx, r.c, p)
	switch {
	case serr != nil:
		return false, 0, err
	case !st.IsDir:
		return false, 0, errkind.Errorf(errkind.ErrExists, "%s exists and is not a directory", p)
	}
	return false, st.FileMode() & iofs.FileMode(modeBits), nil
}

func (r *remoteDst) chmod(ctx context.Context, p string, mode iofs.FileMode) error {
	_, err := Chmod(ctx, r.c, p, uint32(mode))
	return err
}

func (r *remoteDst) symlink(ctx context.Context, target, dst string) error {
	return r.c.Call(ctx, MethodSymlink, &SymlinkArgs{Path: dst, Target: target}, nil)
}

func (r *remoteDst) file(ctx context.Context, _ *WalkEntry, src, dst string) (int64, error) {
	f, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file (%v)", src, st.Mode().Type())
	}
	mode := copyMode(st.Mode(), r.opts.Preserve)
	po := PutOptions{WriteOptions: WriteOptions{Mode: uint32(mode)}}
	if r.opts.Preserve {
		po.MTime = st.ModTime().UnixNano()
	}
	if sum := r.opts.SHA256; sum != nil {
		return r.putHashed(ctx, src, dst, f, st.Size(), po, sum)
	}
	return r.put(ctx, dst, f, st.Size(), po, st.Size() > InlineLimit, nil)
}

// putHashed is file for a source whose sha256 was taken beforehand
// (TreeOptions.SHA256): a streamed copy sends sum as its checksum, and
// the agent checks the bytes against it; a small one, sent inside the
// call, is checked here.
func (r *remoteDst) putHashed(ctx context.Context, src, dst string, f *os.File, size int64, po PutOptions, sum []byte) (int64, error) {
	changed := func(err error) error {
		if err != nil && strings.Contains(err.Error(), ErrChecksum.Error()) {
			return fmt.Errorf("%s: %w (%v)", src, ErrSourceChanged, err)
		}
		return err
	}
	if size > InlineLimit {
		n, err := r.put(ctx, dst, f, size, po, true, func() []byte { return sum })
		return n, changed(err)
	}
	data, err := io.ReadAll(io.LimitReader(f, InlineLimit+1))
	if err != nil {
		return 0, err
	}
	if got := sha256.Sum256(data); !bytes.Equal(got[:], sum) {
		return 0, fmt.Errorf("%s: %w", src, ErrSourceChanged)
	}
	return r.put(ctx, dst, bytes.NewReader(data), int64(len(data)), po, false, nil)
}

// put writes size bytes from rd to dst with fs.Put and reports them to
// opts.Progress: as they are read when streamed, else once written. sum,
// if set, is their sha256 (see put).
func (r *remoteDst) put(ctx context.Context, dst string, rd io.Reader, size int64, po PutOptions, streamed bool, sum func() []byte) (int64, error) {
	progress := r.opts.Progress
	if progress != nil && streamed {
		rd = &progressReader{r: rd, fn: progress}
	}
	if _, err := put(ctx, r.c, dst, rd, size, po, sum); err != nil {
		return 0, err
	}
	if po.Mode == 0 {
		// fs.Put reads mode 0 as "the default": set it explicitly.
		if _, err := Chmod(ctx, r.c, dst, 0); err != nil {
			return 0, err
		}
	}
	if progress != nil && !streamed && size > 0 {
		progress(size)
	}
	return size, nil
}

// ---- the local side (GetTree) ----

type localDst struct {
	c     rpc.Caller
	opts  *TreeOptions
	stale staleSweep // what killed gets left in the directories written to
}

func (l *localDst) mkdir(_ context.Context, p string, mode iofs.FileMode) (bool, iofs.FileMode, error) {
	err := os.Mkdir(p, mode)
	if err == nil {
		// Exactly mode, whatever the umask.
		if err := os.Chmod(p, mode); err != nil {
			return true, 0, err
		}
		return true, mode, nil
	}
	if !errors.Is(err, iofs.ErrExist) {
		return false, 0, err
	}
	st, serr := os.Stat(p)
	switch {
	case serr != nil:
		return false, 0, err
	case !st.IsDir():
		return false, 0, errkind.Errorf(errkind.ErrExists, "%s exists and is not a directory", p)
	}
	return false, st.Mode() & iofs.FileMode(modeBits), nil
}

func (l *localDst) chmod(_ context.Context, p string, mode iofs.FileMode) error {
	return os.Chmod(p, mode)
}

func (l *localDst) symlink(_ context.Context, target, dst string) error {
	l.stale.dir(filepath.Dir(dst))
	return replaceSymlink(target, dst)
}

func (l *localDst) file(ctx context.Context, e *WalkEntry, src, dst string) (int64, error) {
	preserve, progress := l.opts.Preserve, l.opts.Progress
	m := &fileMeta{mode: copyMode(e.FileMode(), preserve), uid: -1, gid: -1}
	apply := func(fi *FileInfo) {
		m.mode = copyMode(fi.FileMode(), preserve)
		if preserve {
			m.mtime = fi.ModTime
		}
	}
	if st, err := os.Lstat(dst); err == nil && st.IsDir() {
		return 0, errkind.Errorf(errkind.ErrExists, "%s: is a directory", dst)
	}
	l.stale.dir(filepath.Dir(dst))
	var n int64
	fill := func(f *os.File) error {
		if e.Size <= InlineLimit {
			// Small: one message, no circuit.
			var rr ReadResult
			err := l.c.Call(ctx, MethodRead, &ReadArgs{Path: src, MaxSize: InlineLimit}, &rr)
			if err == nil {
				if _, err := f.Write(rr.Data); err != nil {
					return err
				}
				n = int64(len(rr.Data))
				apply(&rr.Info)
				if progress != nil && n > 0 {
					progress(n)
				}
				return nil
			}
			if !errors.Is(err, errkind.ErrTooLarge) {
				return err
			}
			// It grew since it was listed: stream it.
		}
		var w io.Writer = f
		if progress != nil {
			w = &progressWriter{w: f, fn: progress}
		}
		r, err := Get(ctx, l.c, src, w)
		if err != nil {
			return err
		}
		n = r.Info.Size
		apply(&r.Info)
		return nil
	}
	if err := atomicReplace(ctx, dst, fill, m); err != nil {
		return 0, err
	}
	return n, nil
}
