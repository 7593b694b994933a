// Package fs is the agent's "fs" service: small-file operations on the
// agent's filesystem, with atomic writes. Each file travels inside one
// message, so Read and Write are for files of up to 3 MiB; bigger transfers
// stream over the call's circuit (fs.Put, fs.Get: stream.go).
//
// Every path must be absolute (a bad_args error otherwise): the agent's
// working directory means nothing to a caller. Missing files give not_found
// errors, permission problems permission errors, existing targets exists
// errors (rpc.ToRemote classifies them).
//
// Methods (register them on an agent with Register); msgpack keys in
// brackets. Modes are Go io/fs.FileMode bits (permissions plus fs.ModeSetuid,
// fs.ModeSetgid, fs.ModeSticky; FileInfo also carries the type bits), times
// Unix nanoseconds.
//
//	FileInfo {Name string [name], Size int64 [size], Mode uint32 [mode],
//	          ModTime int64 [mtime], IsDir bool [dir], IsSymlink bool [link],
//	          LinkTarget string [target], UID int [uid], GID int [gid]}
//
//	fs.Stat   StatArgs {Path [path], NoFollow bool [nofollow]} → FileInfo
//	          Without NoFollow a symlink is followed (FileInfo describes its
//	          target) but still reported by IsSymlink and LinkTarget.
//	fs.Read   ReadArgs {Path [path], MaxSize int64 [max]}
//	          → ReadResult {Data []byte [data], Info FileInfo [info]}
//	          MaxSize defaults to 1 MiB and is capped at 3 MiB; a bigger
//	          regular file is a too_large error. Only regular files.
//	fs.Write  WriteArgs {Path [path], Data []byte [data], Mode uint32 [mode],
//	          UID *int [uid], GID *int [gid], User string [user],
//	          Group string [group], MkdirAll bool [mkdir]} → FileInfo
//	          Atomic: the data goes to a hidden temporary file
//	          ".<name>.spindle-tmp-<pid>-<start>-<random>" in the
//	          destination directory (created 0600, locked by its writer;
//	          see RemoveStale), which is chown-ed, chmod-ed and fsync-ed,
//	          then renamed over the destination, and the directory fsync-ed; on
//	          any error the temporary file is removed. A reader sees the old
//	          or the new content, never a mix. Mode 0 means 0644 for a new
//	          file and the old mode for a replaced one. UID/GID, or User/Group
//	          names resolved on the agent, set the owner; when none is given
//	          a replaced file keeps its owner where the agent may set it. A
//	          symlink at Path is followed: its target is replaced. MkdirAll
//	          creates missing parent directories (0755). A directory or
//	          special file at Path is an exists error.
//	fs.Mkdir  MkdirArgs {Path [path], Mode uint32 [mode], Parents bool
//	          [parents]} → FileInfo
//	          Mode defaults to 0755; an explicit mode is applied exactly
//	          (whatever the umask) to a directory this call creates. Without
//	          Parents an existing path is an exists error.
//	fs.Remove RemoveArgs {Path [path], Recursive bool [recursive],
//	          MissingOK bool [missing_ok]} → RemoveResult {Removed bool
//	          [removed]}
//	          Without Recursive only files, symlinks and empty directories
//	          go. Removing "/" recursively is refused.
//	fs.List   ListArgs {Path [path]} → []FileInfo, sorted by name, symlinks
//	          not followed; more than 100,000 entries is a too_large error.
//	fs.Chmod  ChmodArgs {Path [path], Mode uint32 [mode], required} → FileInfo
//	fs.Chown  ChownArgs {Path [path], UID int [uid], GID int [gid] (-1 or
//	          absent: unchanged), User string [user], Group string [group]
//	          (names or numbers, resolved on the agent), NoFollow bool
//	          [nofollow]} → FileInfo
//
// The client helpers Stat, Lstat, Read, Write, Mkdir, Remove, List, Chmod
// and Chown call these methods through any rpc.Caller.
//
// Streaming transfers (fs.Put, fs.Get, fs.Checksum) are described in
// stream.go; the tree methods in walk.go:
//
//	fs.Walk    WalkArgs {Path [path], Max int [max]} → WalkResult, with a
//	           circuit carrying length-prefixed WalkEntry records {Path
//	           [p], Mode [m], Size [s], ModTime [t], Target [l]}: the
//	           whole tree under Path in one round trip (at most
//	           MaxWalkEntries entries).
//	fs.Symlink SymlinkArgs {Path [path], Target [target]} → FileInfo
//	           Creates (or atomically replaces) a symlink.
//
// PutTree and GetTree (tree.go) copy directory trees like `cp -r`,
// pipelining many small files: up to TreeOptions.Parallel transfers in
// flight; PutOne and GetOne copy one file the same way.
package fs
