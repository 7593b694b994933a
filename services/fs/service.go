package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
)

// Method names.
const (
	MethodStat   = "fs.Stat"
	MethodRead   = "fs.Read"
	MethodWrite  = "fs.Write"
	MethodMkdir  = "fs.Mkdir"
	MethodRemove = "fs.Remove"
	MethodList   = "fs.List"
	MethodChmod  = "fs.Chmod"
	MethodChown  = "fs.Chown"
)

// Limits.
const (
	// DefaultReadSize is fs.Read's MaxSize when none is given.
	DefaultReadSize = 1 << 20
	// MaxReadSize caps fs.Read's MaxSize so that the reply fits one frame.
	MaxReadSize = 3 << 20
	// MaxListEntries bounds the entries fs.List returns.
	MaxListEntries = 100_000
)

// TempInfix is part of the name of atomic writes' temporary files:
// ".<name>" + TempInfix + "<writer's pid>-<its start time>-<random hex>".
const TempInfix = ".spindle-tmp-"

// modeBits are the FileMode bits a caller may set.
const modeBits = uint32(iofs.ModePerm | iofs.ModeSetuid | iofs.ModeSetgid | iofs.ModeSticky)

// noMode marks an absent required mode.
const noMode = math.MaxUint32

// FileInfo describes one file.
type FileInfo struct {
	Name string `msgpack:"name"`
	Size int64  `msgpack:"size"`
	// Mode holds Go io/fs.FileMode bits (type bits and permissions).
	Mode uint32 `msgpack:"mode"`
	// ModTime is the modification time in Unix nanoseconds.
	ModTime   int64 `msgpack:"mtime"`
	IsDir     bool  `msgpack:"dir,omitempty"`
	IsSymlink bool  `msgpack:"link,omitempty"`
	// LinkTarget is the symlink's content when IsSymlink.
	LinkTarget string `msgpack:"target,omitempty"`
	UID        int    `msgpack:"uid"`
	GID        int    `msgpack:"gid"`
}

// FileMode returns Mode as an io/fs.FileMode.
func (fi *FileInfo) FileMode() iofs.FileMode { return iofs.FileMode(fi.Mode) }

// Time returns ModTime as a time.Time.
func (fi *FileInfo) Time() time.Time { return time.Unix(0, fi.ModTime) }

// StatArgs are the arguments of fs.Stat.
type StatArgs struct {
	Path     string `msgpack:"path"`
	NoFollow bool   `msgpack:"nofollow,omitempty"`
}

// ReadArgs are the arguments of fs.Read.
type ReadArgs struct {
	Path string `msgpack:"path"`
	// MaxSize is the largest file accepted; 0 means DefaultReadSize, and
	// values above MaxReadSize are lowered to it.
	MaxSize int64 `msgpack:"max,omitempty"`
}

// ReadResult is the result of fs.Read.
type ReadResult struct {
	Data []byte   `msgpack:"data"`
	Info FileInfo `msgpack:"info"`
}

// WriteArgs are the arguments of fs.Write.
type WriteArgs struct {
	Path string `msgpack:"path"`
	Data []byte `msgpack:"data"`
	// Mode is the new file's mode; 0 means NewMode (0: 0644) for a new
	// file and the old mode for a replaced one.
	Mode    uint32 `msgpack:"mode,omitempty"`
	NewMode uint32 `msgpack:"newmode,omitempty"`
	// UID and GID, or User and Group names, set the owner when given.
	UID      *int   `msgpack:"uid,omitempty"`
	GID      *int   `msgpack:"gid,omitempty"`
	User     string `msgpack:"user,omitempty"`
	Group    string `msgpack:"group,omitempty"`
	MkdirAll bool   `msgpack:"mkdir,omitempty"`
}

// MkdirArgs are the arguments of fs.Mkdir.
type MkdirArgs struct {
	Path    string `msgpack:"path"`
	Mode    uint32 `msgpack:"mode,omitempty"` // default 0755
	Parents bool   `msgpack:"parents,omitempty"`
}

// RemoveArgs are the arguments of fs.Remove.
type RemoveArgs struct {
	Path      string `msgpack:"path"`
	Recursive bool   `msgpack:"recursive,omitempty"`
	MissingOK bool   `msgpack:"missing_ok,omitempty"`
}

// RemoveResult is the result of fs.Remove.
type RemoveResult struct {
	// Removed is false when the path did not exist (and MissingOK was set).
	Removed bool `msgpack:"removed"`
}

// ListArgs are the arguments of fs.List.
type ListArgs struct {
	Path string `msgpack:"path"`
}

// ChmodArgs are the arguments of fs.Chmod.
type ChmodArgs struct {
	Path string `msgpack:"path"`
	Mode uint32 `msgpack:"mode"` // required
}

// ChownArgs are the arguments of fs.Chown. An absent UID or GID, or -1,
// leaves it unchanged; note that a Go zero value 0 means root.
type ChownArgs struct {
	Path     string `msgpack:"path"`
	UID      int    `msgpack:"uid"`
	GID      int    `msgpack:"gid"`
	User     string `msgpack:"user,omitempty"`
	Group    string `msgpack:"group,omitempty"`
	NoFollow bool   `msgpack:"nofollow,omitempty"`
}

// Register adds the fs methods to reg.
func Register(reg *rpc.Registry) {
	reg.Handle(MethodStat, handleStat)
	reg.Handle(MethodRead, handleRead)
	reg.Handle(MethodWrite, handleWrite)
	reg.Handle(MethodMkdir, handleMkdir)
	reg.Handle(MethodRemove, handleRemove)
	reg.Handle(MethodList, handleList)
	reg.Handle(MethodChmod, handleChmod)
	reg.Handle(MethodChown, handleChown)
	registerStream(reg)
	registerTree(reg)
}

// checkPath refuses paths that are not absolute.
func checkPath(method, p string) error {
	switch {
	case p == "":
		return errkind.Errorf(errkind.ErrBadArgs, "%s: a path is required", method)
	case strings.IndexByte(p, 0) >= 0:
		return errkind.Errorf(errkind.ErrBadArgs, "%s: path %q contains a NUL byte", method, p)
	case !filepath.IsAbs(p):
		return errkind.Errorf(errkind.ErrBadArgs, "%s: path %q is not absolute (the agent's working directory is not meaningful to a caller)", method, p)
	}
	return nil
}

func checkMode(method string, mode uint32) error {
	if mode&^modeBits != 0 {
		return errkind.Errorf(errkind.ErrBadArgs, "%s: mode %#o has bits other than permissions, setuid, setgid and sticky", method, mode)
	}
	return nil
}

// wrap prefixes an error with the method and path, keeping its kind.
func wrap(method, p string, err error) error {
	if err == nil {
		return nil
	}
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		// Name the operation, not the path twice.
		return fmt.Errorf("%s %s: %s: %w", method, p, pe.Op, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%s %s: %s: %w", method, p, le.Op, le.Err)
	}
	return fmt.Errorf("%s %s: %w", method, p, err)
}

func toInfo(name string, st iofs.FileInfo) FileInfo {
	fi := FileInfo{
		Name:    name,
		Size:    st.Size(),
		Mode:    uint32(st.Mode()),
		ModTime: st.ModTime().UnixNano(),
		IsDir:   st.IsDir(),
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		fi.UID, fi.GID = int(sys.Uid), int(sys.Gid)
	}
	return fi
}

// statPath describes p. A symlink is reported as one; unless noFollow the
// other fields describe its target.
func statPath(p string, noFollow bool) (FileInfo, error) {
	lst, err := os.Lstat(p)
	if err != nil {
		return FileInfo{}, err
	}
	name := filepath.Base(p)
	if lst.Mode()&iofs.ModeSymlink == 0 {
		return toInfo(name, lst), nil
	}
	target, err := os.Readlink(p)
	if err != nil {
		return FileInfo{}, err
	}
	fi := toInfo(name, lst)
	if !noFollow {
		st, err := os.Stat(p)
		if err != nil {
			return FileInfo{}, err
		}
		fi = toInfo(name, st)
	}
	fi.IsSymlink, fi.LinkTarget = true, target
	return fi, nil
}

func handleStat(_ context.Context, call *rpc.Call) (any, error) {
	var a StatArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if err := checkPath(MethodStat, a.Path); err != nil {
		return nil, err
	}
	fi, err := statPath(a.Path, a.NoFollow)
	if err != nil {
		return nil, wrap(MethodStat, a.Path, err)
	}
	return &fi, nil
}

func handleRead(_ context.Context, call *rpc.Call) (any, error) {
	var a ReadArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if err := checkPath(MethodRead, a.Path); err != nil {
		return nil, err
	}
	max := a.MaxSize
	switch {
	case max < 0:
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: negative MaxSize %d", MethodRead, max)
	case max == 0:
		max = DefaultReadSize
	case max > MaxReadSize:
		max = MaxReadSize
	}
	// O_NONBLOCK: opening a FIFO must not hang the call; it is refused below.
	f, err := os.OpenFile(a.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, wrap(MethodRead, a.Path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, wrap(MethodRead, a.Path, err)
	}
	if st.IsDir() {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s %s: is a directory (use fs.List)", MethodRead, a.Path)
	}
	if !st.Mode().IsRegular() {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s %s: not a regular file (%v)", MethodRead, a.Path, st.Mode().Type())
	}
	tooLarge := func(size int64) error {
		return errkind.Errorf(errkind.ErrTooLarge, "%s %s: file of %d bytes is larger than the %d-byte limit: use a circuit transfer for large files", MethodRead, a.Path, size, max)
	}
	if st.Size() > max {
		return nil, tooLarge(st.Size())
	}
	// Files in /proc and the like report size 0: read up to max+1 bytes.
	buf := make([]byte, 0, min(max, st.Size()+512)+1)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > max {
				return nil, tooLarge(int64(len(buf)))
			}
			buf = append(buf, 0)[:len(buf)]
		}
		lim := min(int64(cap(buf)), max+1)
		n, err := f.Read(buf[len(buf):lim])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return nil, tooLarge(int64(len(buf)))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, wrap(MethodRead, a.Path, err)
		}
	}
	fi := toInfo(filepath.Base(a.Path), st)
	return &ReadResult{Data: buf, Info: fi}, nil
}

// lookupUser resolves a user name (or a numeric id) on the agent.
func lookupUser(method, name string) (int, error) {
	u, err := user.Lookup(name)
	if err == nil {
		if id, err := strconv.Atoi(u.Uid); err == nil {
			return id, nil
		}
	}
	if id, err := strconv.Atoi(name); err == nil && id >= 0 {
		return id, nil
	}
	return 0, errkind.Errorf(errkind.ErrBadArgs, "%s: no user named %q on the agent", method, name)
}

// lookupGroup resolves a group name (or a numeric id) on the agent.
func lookupGroup(method, name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err == nil {
		if id, err := strconv.Atoi(g.Gid); err == nil {
			return id, nil
		}
	}
	if id, err := strconv.Atoi(name); err == nil && id >= 0 {
		return id, nil
	}
	return 0, errkind.Errorf(errkind.ErrBadArgs, "%s: no group named %q on the agent", method, name)
}

// owner combines a numeric id (-1 = unset) and a name into one id.
func owner(method, what string, id int, name string, lookup func(string, string) (int, error)) (int, error) {
	if id < -1 {
		return 0, errkind.Errorf(errkind.ErrBadArgs, "%s: invalid %s id %d", method, what, id)
	}
	if name == "" {
		return id, nil
	}
	byName, err := lookup(method, name)
	if err != nil {
		return 0, err
	}
	if id != -1 && id != byName {
		return 0, errkind.Errorf(errkind.ErrBadArgs, "%s: %s %q is id %d, not %d: give the id or the name", method, what, name, byName, id)
	}
	return byName, nil
}

// testHookBeforeRename, when set by a test, runs just before fs.Write's
// rename; an error it returns fails the write.
var testHookBeforeRename func(tmp string) error

func handleWrite(ctx context.Context, call *rpc.Call) (any, error) {
	var a WriteArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	wt, err := resolveWrite(MethodWrite, &a)
	if err != nil {
		return nil, err
	}
	fill := func(f *os.File) error { _, err := f.Write(a.Data); return err }
	if err := atomicReplace(ctx, wt.dest, fill, wt.meta()); err != nil {
		return nil, wrap(MethodWrite, a.Path, err)
	}
	fi, err := statPath(wt.path, false)
	if err != nil {
		return nil, wrap(MethodWrite, a.Path, err)
	}
	return &fi, nil
}

// writeTarget is where and how an atomic write lands.
type writeTarget struct {
	path, dest string // as given (cleaned), and after following a symlink
	mode       iofs.FileMode
	uid, gid   int
	keepOwner  bool
}

// resolveWrite checks a write's arguments and works out its destination,
// mode and owner (shared by fs.Write and fs.Put).
func resolveWrite(method string, a *WriteArgs) (*writeTarget, error) {
	if err := checkPath(method, a.Path); err != nil {
		return nil, err
	}
	if err := checkMode(method, a.Mode); err != nil {
		return nil, err
	}
	if err := checkMode(method, a.NewMode); err != nil {
		return nil, err
	}
	p := filepath.Clean(a.Path)
	if p == "/" || strings.HasSuffix(a.Path, "/") {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: path %q names a directory, not a file", method, a.Path)
	}
	uid, gid := -1, -1
	if a.UID != nil {
		uid = *a.UID
	}
	if a.GID != nil {
		gid = *a.GID
	}
	uid, err := owner(method, "user", uid, a.User, lookupUser)
	if err != nil {
		return nil, err
	}
	gid, err = owner(method, "group", gid, a.Group, lookupGroup)
	if err != nil {
		return nil, err
	}
	if a.MkdirAll {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, wrap(method, a.Path, err)
		}
	}
	// Follow a symlink at p: replace the file it points to, not the link.
	dest := p
	if lst, err := os.Lstat(p); err == nil && lst.Mode()&iofs.ModeSymlink != 0 {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dest = real
		}
	}
	old, err := os.Stat(dest)
	switch {
	case err == nil && old.IsDir():
		return nil, errkind.Errorf(errkind.ErrExists, "%s %s: is a directory", method, a.Path)
	case err == nil && !old.Mode().IsRegular():
		return nil, errkind.Errorf(errkind.ErrExists, "%s %s: exists and is not a regular file (%v)", method, a.Path, old.Mode().Type())
	case err != nil && !errors.Is(err, iofs.ErrNotExist):
		return nil, wrap(method, a.Path, err)
	case err != nil:
		old = nil
	}
	mode := iofs.FileMode(a.Mode)
	if a.Mode == 0 {
		switch {
		case old != nil:
			mode = old.Mode() & iofs.FileMode(modeBits)
		case a.NewMode != 0:
			mode = iofs.FileMode(a.NewMode)
		default:
			mode = 0o644
		}
	}
	// Keep a replaced file's owner unless told otherwise (best effort: only
	// root may give a file away).
	keepOwner := false
	if uid == -1 && gid == -1 && old != nil {
		if sys, ok := old.Sys().(*syscall.Stat_t); ok {
			uid, gid, keepOwner = int(sys.Uid), int(sys.Gid), true
		}
	}
	return &writeTarget{path: p, dest: dest, mode: mode, uid: uid, gid: gid, keepOwner: keepOwner}, nil
}

func (wt *writeTarget) meta() *fileMeta {
	return &fileMeta{mode: wt.mode, uid: wt.uid, gid: wt.gid, keepOwner: wt.keepOwner}
}

// fileMeta is what atomicReplace sets on the new file once fill has
// written it (fill may still change it: a download learns the remote
// file's mode and mtime only at the end).
type fileMeta struct {
	mode      iofs.FileMode
	uid, gid  int   // -1: leave alone
	keepOwner bool  // a failed chown is no error
	mtime     int64 // Unix ns; 0: leave alone
}

// createTemp creates dir/.<base>.spindle-tmp-<pid>-<start>-<random>, mode
// 0600, locked by this process until it is closed (see stale.go).
func createTemp(dir, base string) (*os.File, error) {
	for range 10 {
		name, err := tempName(dir, base)
		if err != nil {
			return nil, err
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, 0o600)
		if errors.Is(err, iofs.ErrExist) {
			continue
		}
		if err == nil {
			lockTemp(f)
		}
		return f, err
	}
	return nil, errors.New("cannot create a unique temporary file")
}

// atomicWrite replaces dest with data through a temporary file in the same
// directory. uid/gid -1 leave the owner alone; with keepOwner a failed
// chown is ignored.
func atomicWrite(ctx context.Context, dest string, data []byte, mode iofs.FileMode, uid, gid int, keepOwner bool) error {
	fill := func(f *os.File) error { _, err := f.Write(data); return err }
	return atomicReplace(ctx, dest, fill, &fileMeta{mode: mode, uid: uid, gid: gid, keepOwner: keepOwner})
}

// atomicReplace replaces dest with what fill writes into a hidden
// temporary file in the same directory: then m's owner, mode and mtime
// (read after fill) set, data fsynced, then renamed over dest and the directory
// fsynced (shared with concurrent writers: syncDir). On any error the
// temporary file is removed, and dest is as it was. Before the temporary
// file exists, its directory is recorded in the journal (if the agent
// keeps one), so that an agent killed mid-write has it removed by the
// next agent that starts.
func atomicReplace(ctx context.Context, dest string, fill func(*os.File) error, m *fileMeta) (err error) {
	dir := filepath.Dir(dest)
	leave := journalEnter(dir)
	defer leave()
	f, err := createTemp(dir, filepath.Base(dest))
	if err != nil {
		// Name the directory, not the temporary file nobody asked for.
		var pe *iofs.PathError
		if errors.As(err, &pe) {
			if errors.Is(pe.Err, syscall.ENOENT) {
				return fmt.Errorf("no such directory %s: %w", dir, pe.Err)
			}
			return fmt.Errorf("cannot create a file in %s: %w", dir, pe.Err)
		}
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp) // before the close drops the lock
			f.Close()
		}
	}()
	if err = fill(f); err != nil {
		return err
	}
	if m.uid != -1 || m.gid != -1 {
		// Before the chmod: chown clears setuid and setgid bits.
		if cerr := f.Chown(m.uid, m.gid); cerr != nil && !m.keepOwner {
			return cerr
		}
	}
	if err = f.Chmod(m.mode); err != nil {
		return err
	}
	if m.mtime != 0 {
		t := time.Unix(0, m.mtime)
		if err = os.Chtimes(tmp, t, t); err != nil {
			return err
		}
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = ctx.Err(); err != nil {
		return err
	}
	if testHookBeforeRename != nil {
		if err = testHookBeforeRename(tmp); err != nil {
			return err
		}
	}
	old := holdOld(dest)
	if err = os.Rename(tmp, dest); err != nil {
		if old != nil {
			old.Close()
		}
		return err
	}
	if old != nil {
		go old.Close() // frees the replaced file's blocks, off the reply's path
	}
	// Closed only now: until the rename, f's lock tells RemoveStale that
	// the temporary file is being written.
	if err = f.Close(); err != nil {
		return fmt.Errorf("written, but closing it failed: %w", err)
	}
	// The rename is done: the new content is in place. Make it durable.
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("written, but syncing the directory failed: %w", err)
	}
	return nil
}

// holdOldMin is the size from which holdOld keeps a replaced file open.
const holdOldMin = 1 << 20

// holdOld opens dest, when it is a regular file of at least holdOldMin
// bytes, so that the rename over it does not free its blocks: the last
// close does, and the caller does that on another goroutine. On ext4,
// renaming over a 100 MiB file took 15 ms of a 650 ms fs.GetFile, all
// spent freeing extents. Nil when there is nothing worth holding or it
// cannot be opened (the rename then frees it, as before).
func holdOld(dest string) *os.File {
	fi, err := os.Lstat(dest)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < holdOldMin {
		return nil
	}
	f, err := os.OpenFile(dest, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return f
}

func handleMkdir(_ context.Context, call *rpc.Call) (any, error) {
	var a MkdirArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if err := checkPath(MethodMkdir, a.Path); err != nil {
		return nil, err
	}
	if err := checkMode(MethodMkdir, a.Mode); err != nil {
		return nil, err
	}
	mode := iofs.FileMode(a.Mode)
	if a.Mode == 0 {
		mode = 0o755
	}
	created := true
	var err error
	if a.Parents {
		if st, serr := os.Stat(a.Path); serr == nil && st.IsDir() {
			created = false
		} else if serr == nil {
			return nil, errkind.Errorf(errkind.ErrExists, "%s %s: exists and is not a directory", MethodMkdir, a.Path)
		} else {
			err = os.MkdirAll(a.Path, mode)
		}
	} else {
		err = os.Mkdir(a.Path, mode)
	}
	if err != nil {
		return nil, wrap(MethodMkdir, a.Path, err)
	}
	// An explicit mode is applied exactly, whatever the umask.
	if created && a.Mode != 0 {
		if err := os.Chmod(a.Path, mode|iofs.ModeDir); err != nil {
			return nil, wrap(MethodMkdir, a.Path, err)
		}
	}
	fi, err := statPath(a.Path, false)
	if err != nil {
		return nil, wrap(MethodMkdir, a.Path, err)
	}
	return &fi, nil
}

func handleRemove(_ context.Context, call *rpc.Call) (any, error) {
	var a RemoveArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if err := checkPath(MethodRemove, a.Path); err != nil {
		return nil, err
	}
	if filepath.Clean(a.Path) == "/" {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: refusing to remove /", MethodRemove)
	}
	if _, err := os.Lstat(a.Path); err != nil {
		if errors.Is(err, iofs.ErrNotExist) && a.MissingOK {
			return &RemoveResult{}, nil
		}
		return nil, wrap(MethodRemove, a.Path, err)
	}
	var err error
	if a.Recursive {
		err = os.RemoveAll(a.Path)
	} else {
		err = os.Remove(a.Path)
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return nil, errkind.Errorf(errkind.ErrBadArgs, "%s %s: directory not empty (set Recursive)", MethodRemove, a.Path)
		}
	}
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) && a.MissingOK {
			return &RemoveResult{}, nil // removed by someone else meanwhile
		}
		return nil, wrap(MethodRemove, a.Path, err)
	}
	return &RemoveResult{Removed: true}, nil
}

func handleList(ctx context.Context, call *rpc.Call) (any, error) {
	var a ListArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if err := checkPath(MethodList, a.Path); err != nil {
		return nil, err
	}
	d, err := os.Open(a.Path)
	if err != nil {
		return nil, wrap(MethodList, a.Path, err)
	}
	defer d.Close()
	st, err := d.Stat()
	if err != nil {
		return nil, wrap(MethodList, a.Path, err)
	}
	if !st.IsDir() {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s %s: not a directory", MethodList, a.Path)
	}
	out := []FileInfo{}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ents, err := d.ReadDir(1024)
		for _, e := range ents {
			if len(out) >= MaxListEntries {
				return nil, errkind.Errorf(errkind.ErrTooLarge, "%s %s: more than %d entries", MethodList, a.Path, MaxListEntries)
			}
			info, ierr := e.Info()
			if errors.Is(ierr, iofs.ErrNotExist) {
				continue // removed since the directory was read
			}
			if ierr != nil {
				return nil, wrap(MethodList, filepath.Join(a.Path, e.Name()), ierr)
			}
			fi := toInfo(e.Name(), info)
			if info.Mode()&iofs.ModeSymlink != 0 {
				fi.IsSymlink = true
				fi.LinkTarget, _ = os.Readlink(filepath.Join(a.Path, e.Name()))
			}
			out = append(out, fi)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, wrap(MethodList, a.Path, err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func handleChmod(_ context.Context, call *rpc.Call) (any, error) {
	a := ChmodArgs{Mode: noMode}
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if err := checkPath(MethodChmod, a.Path); err != nil {
		return nil, err
	}
	if a.Mode == noMode {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: a mode is required", MethodChmod)
	}
	if err := checkMode(MethodChmod, a.Mode); err != nil {
		return nil, err
	}
	if err := os.Chmod(a.Path, iofs.FileMode(a.Mode)); err != nil {
		return nil, wrap(MethodChmod, a.Path, err)
	}
	fi, err := statPath(a.Path, false)
	if err != nil {
		return nil, wrap(MethodChmod, a.Path, err)
	}
	return &fi, nil
}

func handleChown(_ context.Context, call *rpc.Call) (any, error) {
	a := ChownArgs{UID: -1, GID: -1}
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if err := checkPath(MethodChown, a.Path); err != nil {
		return nil, err
	}
	uid, err := owner(MethodChown, "user", a.UID, a.User, lookupUser)
	if err != nil {
		return nil, err
	}
	gid, err := owner(MethodChown, "group", a.GID, a.Group, lookupGroup)
	if err != nil {
		return nil, err
	}
	if a.NoFollow {
		err = os.Lchown(a.Path, uid, gid)
	} else {
		err = os.Chown(a.Path, uid, gid)
	}
	if err != nil {
		return nil, wrap(MethodChown, a.Path, err)
	}
	fi, err := statPath(a.Path, a.NoFollow)
	if err != nil {
		return nil, wrap(MethodChown, a.Path, err)
	}
	return &fi, nil
}
