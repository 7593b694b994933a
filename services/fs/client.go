package fs

import (
	"context"

	"github.com/spindle-rpc/spindle/rpc"
)

// Stat describes path on c, following a symlink (see fs.Stat).
func Stat(ctx context.Context, c rpc.Caller, path string) (*FileInfo, error) {
	return callInfo(ctx, c, MethodStat, &StatArgs{Path: path})
}

// Lstat describes path on c without following a symlink.
func Lstat(ctx context.Context, c rpc.Caller, path string) (*FileInfo, error) {
	return callInfo(ctx, c, MethodStat, &StatArgs{Path: path, NoFollow: true})
}

// Read returns the content of the file at path on c. maxSize bounds the
// file's size (0 means DefaultReadSize, at most MaxReadSize); a larger file
// is an errkind.ErrTooLarge error.
func Read(ctx context.Context, c rpc.Caller, path string, maxSize int64) ([]byte, error) {
	var res ReadResult
	if err := c.Call(ctx, MethodRead, &ReadArgs{Path: path, MaxSize: maxSize}, &res); err != nil {
		return nil, err
	}
	if res.Data == nil {
		res.Data = []byte{}
	}
	return res.Data, nil
}

// WriteOptions tune Write. The zero value writes a 0644 file (or keeps the
// mode and owner of the file it replaces) into an existing directory.
type WriteOptions struct {
	// Mode is the file's mode (io/fs.FileMode permission, setuid, setgid and
	// sticky bits); 0 means NewMode (0: 0644) for a new file, the old
	// mode otherwise.
	Mode, NewMode uint32
	// UID and GID, or User and Group names, set the owner.
	UID, GID    *int
	User, Group string
	// MkdirAll creates missing parent directories.
	MkdirAll bool
}

// Write atomically replaces the file at path on c with data.
func Write(ctx context.Context, c rpc.Caller, path string, data []byte, opts WriteOptions) (*FileInfo, error) {
	if data == nil {
		data = []byte{}
	}
	return callInfo(ctx, c, MethodWrite, &WriteArgs{
		Path: path, Data: data, Mode: opts.Mode, NewMode: opts.NewMode,
		UID: opts.UID, GID: opts.GID, User: opts.User, Group: opts.Group,
		MkdirAll: opts.MkdirAll,
	})
}

// Mkdir creates the directory path on c with mode (0 means 0755); parents
// creates missing parents and accepts an existing directory.
func Mkdir(ctx context.Context, c rpc.Caller, path string, mode uint32, parents bool) (*FileInfo, error) {
	return callInfo(ctx, c, MethodMkdir, &MkdirArgs{Path: path, Mode: mode, Parents: parents})
}

// RemoveOptions tune Remove.
type RemoveOptions struct {
	// Recursive removes a directory with its content.
	Recursive bool
	// MissingOK makes a missing path no error.
	MissingOK bool
}

// Remove removes path on c and reports whether it existed.
func Remove(ctx context.Context, c rpc.Caller, path string, opts RemoveOptions) (removed bool, err error) {
	var res RemoveResult
	err = c.Call(ctx, MethodRemove, &RemoveArgs{Path: path, Recursive: opts.Recursive, MissingOK: opts.MissingOK}, &res)
	return res.Removed, err
}

// List returns the entries of the directory path on c, sorted by name.
func List(ctx context.Context, c rpc.Caller, path string) ([]FileInfo, error) {
	var res []FileInfo
	if err := c.Call(ctx, MethodList, &ListArgs{Path: path}, &res); err != nil {
		return nil, err
	}
	return res, nil
}

// Chmod sets the mode of path on c.
func Chmod(ctx context.Context, c rpc.Caller, path string, mode uint32) (*FileInfo, error) {
	return callInfo(ctx, c, MethodChmod, &ChmodArgs{Path: path, Mode: mode})
}

// ChownOptions say what Chown changes; nil ids and empty names leave the
// owner or group alone.
type ChownOptions struct {
	UID, GID    *int
	User, Group string
	// NoFollow changes a symlink itself rather than its target.
	NoFollow bool
}

// Chown changes the owner and group of path on c.
func Chown(ctx context.Context, c rpc.Caller, path string, opts ChownOptions) (*FileInfo, error) {
	a := &ChownArgs{Path: path, UID: -1, GID: -1, User: opts.User, Group: opts.Group, NoFollow: opts.NoFollow}
	if opts.UID != nil {
		a.UID = *opts.UID
	}
	if opts.GID != nil {
		a.GID = *opts.GID
	}
	return callInfo(ctx, c, MethodChown, a)
}

func callInfo(ctx context.Context, c rpc.Caller, method string, args any) (*FileInfo, error) {
	var fi FileInfo
	if err := c.Call(ctx, method, args, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}
