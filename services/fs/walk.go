package fs

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/rpc"
)

// Tree methods: a recursive listing in one round trip and symlink
// creation, for PutTree and GetTree.
//
//	fs.Walk     WalkArgs {Path [path], Max int [max]} → WalkResult {Root
//	            FileInfo [root], Entries int [entries]}, with a circuit.
//	            Lists the tree under Path (Path itself excluded; a symlink
//	            at Path is followed, it must be a directory), parents before
//	            children, each directory's entries in name order, symlinks
//	            not followed. On the circuit, for each entry: a 4-byte
//	            big-endian length (1 to MaxWalkRecord), then a msgpack
//	            WalkEntry of that length; the reply counts the entries. Max
//	            bounds the entries (0 or more than MaxWalkEntries:
//	            MaxWalkEntries); beyond it the call is a too_large error.
//	fs.Symlink  SymlinkArgs {Path [path], Target [target]} → FileInfo
//	            Creates a symlink at Path pointing to Target (stored as
//	            given, absolute or relative); an existing file or symlink at
//	            Path is replaced atomically (a hidden temporary link renamed
//	            over it), an existing directory is an exists error.

// Method names.
const (
	MethodWalk    = "fs.Walk"
	MethodSymlink = "fs.Symlink"
)

// Limits of fs.Walk.
const (
	// MaxWalkEntries bounds the entries of one fs.Walk.
	MaxWalkEntries = 1_000_000
	// MaxWalkRecord bounds one encoded WalkEntry on the circuit (a path
	// and a link target of PATH_MAX each fit with room to spare).
	MaxWalkRecord = 16 << 10
)

// WalkArgs are the arguments of fs.Walk.
type WalkArgs struct {
	Path string `msgpack:"path"`
	Max  int    `msgpack:"max,omitempty"`
}

// WalkResult is the reply of fs.Walk.
type WalkResult struct {
	Root    FileInfo `msgpack:"root"`
	Entries int      `msgpack:"entries"`
}

// WalkEntry is one entry of a tree listing.
type WalkEntry struct {
	// Path is relative to the listed root, '/'-separated, clean, without
	// ".." (filepath.IsLocal holds).
	Path string `msgpack:"p"`
	// Mode holds Go io/fs.FileMode bits (type bits and permissions).
	Mode uint32 `msgpack:"m"`
	// Size is a regular file's size in bytes.
	Size int64 `msgpack:"s,omitempty"`
	// ModTime is the modification time in Unix nanoseconds.
	ModTime int64 `msgpack:"t"`
	// Target is a symlink's content.
	Target string `msgpack:"l,omitempty"`
}

// FileMode returns Mode as an io/fs.FileMode.
func (e *WalkEntry) FileMode() iofs.FileMode { return iofs.FileMode(e.Mode) }

// SymlinkArgs are the arguments of fs.Symlink.
type SymlinkArgs struct {
	Path   string `msgpack:"path"`
	Target string `msgpack:"target"`
}

func registerTree(reg *rpc.Registry) {
	reg.Handle(MethodWalk, handleWalk)
	reg.Handle(MethodSymlink, handleSymlink)
}

// errTooMany is returned by walkTree past its bound.
var errTooMany = errors.New("too many entries")

// walkTree lists the tree under root (a directory, or a symlink to one)
// depth first, parents before children, in name order, without following
// symlinks, and calls fn for each entry. It stops after max entries with
// errTooMany. Errors name the path they concern.
func walkTree(ctx context.Context, root string, max int, fn func(*WalkEntry) error) (iofs.FileInfo, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, &iofs.PathError{Op: "walk", Path: root, Err: syscall.ENOTDIR}
	}
	n := 0
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, d := range ents {
			full := filepath.Join(dir, d.Name())
			info, err := d.Info()
			if errors.Is(err, iofs.ErrNotExist) {
				continue // removed since the directory was read
			}
			if err != nil {
				return err
			}
			if n++; n > max {
				return fmt.Errorf("%s: %w (the limit is %d)", root, errTooMany, max)
			}
			e := &WalkEntry{Path: d.Name(), Mode: uint32(info.Mode()), ModTime: info.ModTime().UnixNano()}
			if rel != "" {
				e.Path = rel + "/" + d.Name()
			}
			switch {
			case info.Mode().IsRegular():
				e.Size = info.Size()
			case info.Mode()&iofs.ModeSymlink != 0:
				if e.Target, err = os.Readlink(full); err != nil {
					if errors.Is(err, iofs.ErrNotExist) {
						n--
						continue
					}
					return err
				}
			}
			if err := fn(e); err != nil {
				return err
			}
			if info.IsDir() {
				if err := walk(full, e.Path); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return st, walk(root, "")
}

func handleWalk(ctx context.Context, call *rpc.Call) (any, error) {
	var a WalkArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if err := checkPath(MethodWalk, a.Path); err != nil {
		return nil, err
	}
	if call.Circuit == nil {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s needs a circuit (use fs.Walk's client helper)", MethodWalk)
	}
	max := a.Max
	if max <= 0 || max > MaxWalkEntries {
		max = MaxWalkEntries
	}
	w := bufio.NewWriterSize(call.Circuit, 64<<10)
	count := 0
	var hdr [4]byte
	st, err := walkTree(ctx, a.Path, max, func(e *WalkEntry) error {
		b, err := wire.Marshal(e)
		if err != nil {
			return err
		}
		if len(b) > MaxWalkRecord {
			return fmt.Errorf("%s: entry of %d bytes is larger than the %d-byte record limit", e.Path, len(b), MaxWalkRecord)
		}
		binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
		w.Write(hdr[:])
		if _, err := w.Write(b); err != nil {
			return err
		}
		count++
		return nil
	})
	if errors.Is(err, errTooMany) {
		return nil, errkind.Errorf(errkind.ErrTooLarge, "%s %s: more than %d entries", MethodWalk, a.Path, max)
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return nil, walkErr(MethodWalk, a.Path, err)
	}
	return &WalkResult{Root: toInfo(filepath.Base(a.Path), st), Entries: count}, nil
}

// walkErr is wrap for errors that may concern a path below p: that path
// is kept in the message.
func walkErr(method, p string, err error) error {
	var pe *iofs.PathError
	if errors.As(err, &pe) && pe.Path != p {
		return fmt.Errorf("%s %s: %s %s: %w", method, p, pe.Op, pe.Path, pe.Err)
	}
	return wrap(method, p, err)
}

// Walk lists the tree under root on c (see fs.Walk) and calls fn with each
// entry, parents before children. max bounds the entries (0 means
// MaxWalkEntries). Entries are checked as they arrive: a path that is not
// local, repeated, or whose parent was not listed as a directory before
// it is an error, so a caller can join entries to a local directory
// safely. It returns the root's description.
func Walk(ctx context.Context, c rpc.Caller, root string, max int, fn func(*WalkEntry) error) (*FileInfo, error) {
	if max <= 0 || max > MaxWalkEntries {
		max = MaxWalkEntries
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.Stream(ctx, MethodWalk, &WalkArgs{Path: root, Max: max})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	n, broken, rerr := decodeWalk(bufio.NewReaderSize(st, 64<<10), root, max, fn)
	if rerr != nil {
		// Stop the agent's walk and collect its reply.
		if !broken {
			cancel()
			st.Close()
		}
		if werr := st.Wait(nil); broken && werr != nil {
			return nil, werr
		}
		return nil, rerr
	}
	var res WalkResult
	if err := st.Wait(&res); err != nil {
		return nil, err
	}
	if res.Entries != n {
		return nil, fmt.Errorf("%s %s: the agent listed %d entries but sent %d", MethodWalk, root, res.Entries, n)
	}
	return &res.Root, nil
}

// decodeWalk reads the listing stream of fs.Walk from an agent that may be
// hostile: records of a 4-byte big-endian length and a msgpack WalkEntry,
// each checked by checkEntry before fn sees it, at most max of them. It
// returns how many it passed to fn, whether the stream broke off (the
// agent's reply then says why), and the first error.
func decodeWalk(r io.Reader, root string, max int, fn func(*WalkEntry) error) (n int, broken bool, err error) {
	seen := map[string]bool{} // every path so far
	dirs := map[string]bool{"": true}
	var hdr [4]byte
	buf := make([]byte, MaxWalkRecord)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err != io.EOF {
				return n, true, fmt.Errorf("%s %s: the listing broke off: %w", MethodWalk, root, err)
			}
			return n, false, nil
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if size == 0 || size > MaxWalkRecord {
			return n, false, fmt.Errorf("%s %s: bad record length %d", MethodWalk, root, size)
		}
		if _, err := io.ReadFull(r, buf[:size]); err != nil {
			return n, true, fmt.Errorf("%s %s: the listing broke off: %w", MethodWalk, root, err)
		}
		var e WalkEntry
		if err := wire.Unmarshal(buf[:size], &e); err != nil {
			return n, false, fmt.Errorf("%s %s: bad entry: %w", MethodWalk, root, err)
		}
		if n+1 > max {
			return n, false, errkind.Errorf(errkind.ErrTooLarge, "%s %s: more than %d entries", MethodWalk, root, max)
		}
		if err := checkEntry(&e, seen, dirs); err != nil {
			return n, false, fmt.Errorf("%s %s: %w", MethodWalk, root, err)
		}
		n++
		if err := fn(&e); err != nil {
			return n, false, err
		}
	}
}

// checkEntry refuses an entry that could lead a caller outside the tree:
// a path that is not local and clean, a repeated path, or one whose parent
// is not a directory listed before it.
func checkEntry(e *WalkEntry, seen, dirs map[string]bool) error {
	p := e.Path
	if p == "" || !filepath.IsLocal(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0) {
		return fmt.Errorf("entry %q is not a clean relative path", p)
	}
	if seen[p] {
		return fmt.Errorf("entry %q is listed twice", p)
	}
	parent := ""
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		parent = p[:i]
	}
	if !dirs[parent] {
		return fmt.Errorf("entry %q comes before its directory", p)
	}
	seen[p] = true
	if e.FileMode().IsDir() {
		dirs[p] = true
	}
	return nil
}

func handleSymlink(_ context.Context, call *rpc.Call) (any, error) {
	var a SymlinkArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if err := checkPath(MethodSymlink, a.Path); err != nil {
		return nil, err
	}
	if a.Target == "" || strings.IndexByte(a.Target, 0) >= 0 {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s %s: the target must be non-empty and without NUL bytes", MethodSymlink, a.Path)
	}
	p := filepath.Clean(a.Path)
	if err := replaceSymlink(a.Target, p); err != nil {
		var ke interface{ Is(error) bool }
		if errors.As(err, &ke) {
			return nil, fmt.Errorf("%s %s: %w", MethodSymlink, a.Path, err)
		}
		return nil, wrap(MethodSymlink, a.Path, err)
	}
	fi, err := statPath(p, true)
	if err != nil {
		return nil, wrap(MethodSymlink, a.Path, err)
	}
	return &fi, nil
}

// replaceSymlink makes p a symlink to target: a new link under a hidden
// temporary name in p's directory, renamed over p. A directory at p is
// an exists error.
func replaceSymlink(target, p string) error {
	if st, err := os.Lstat(p); err == nil && st.IsDir() {
		return errkind.Errorf(errkind.ErrExists, "is a directory")
	}
	dir := filepath.Dir(p)
	leave := journalEnter(dir)
	defer leave()
	for range 10 {
		tmp, err := tempName(dir, filepath.Base(p))
		if err != nil {
			return err
		}
		err = os.Symlink(target, tmp)
		if errors.Is(err, iofs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = os.Rename(tmp, p)
		if err != nil {
			os.Remove(tmp)
		}
		return err
	}
	return errors.New("cannot create a unique temporary symlink")
}
