package fs

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
	"golang.org/x/sys/unix"
)

// Streaming transfers: files of any size, in constant memory, checked end
// to end with sha256.
//
//	fs.Put      PutArgs → PutResult. A file of up to InlineLimit bytes
//	            travels in PutArgs.Data (no circuit: one message). A larger
//	            one travels on the call's circuit: exactly Size bytes, then
//	            the 32-byte sha256 of those bytes, computed by the sender as
//	            it reads. The agent writes through a hidden temporary file
//	            in the destination directory (as fs.Write), hashing as it
//	            goes, and renames it into place only if the size and hash
//	            match; anything else (a short stream, a mismatch, a full
//	            disk, a cancelled call) removes the temporary file and
//	            leaves the old file as it was.
//	fs.Get      GetArgs → GetResult, with a circuit: the agent writes an
//	            8-byte big-endian size, then that many bytes, then their
//	            32-byte sha256; the reply describes the file.
//	fs.Checksum ChecksumArgs → ChecksumResult: a file's sha256, so that a
//	            caller can skip copying what is already there.
//
// Back-pressure is the circuit's: yamux's window on every hop, so no hop
// holds more than a window of a file.

// Method names.
const (
	MethodPut      = "fs.Put"
	MethodGet      = "fs.Get"
	MethodChecksum = "fs.Checksum"
)

// InlineLimit is the largest file fs.Put carries inside the call itself.
const InlineLimit = 128 << 10

// copyBuffer is the size of the buffers files stream through.
const copyBuffer = 256 << 10

// PutArgs are the arguments of fs.Put.
type PutArgs struct {
	Path     string `msgpack:"path"`
	Data     []byte `msgpack:"data,omitempty"` // inline content (no circuit)
	Size     int64  `msgpack:"size"`           // bytes on the circuit
	SHA256   []byte `msgpack:"sha256,omitempty"`
	Mode     uint32 `msgpack:"mode,omitempty"`
	NewMode  uint32 `msgpack:"newmode,omitempty"` // WriteArgs.NewMode
	UID      *int   `msgpack:"uid,omitempty"`
	GID      *int   `msgpack:"gid,omitempty"`
	User     string `msgpack:"user,omitempty"`
	Group    string `msgpack:"group,omitempty"`
	MkdirAll bool   `msgpack:"mkdir,omitempty"`
	MTime    int64  `msgpack:"mtime,omitempty"` // Unix ns; 0 = now
}

// PutResult is the result of fs.Put.
type PutResult struct {
	Info   FileInfo `msgpack:"info"`
	SHA256 string   `msgpack:"sha256"` // hex
}

// GetArgs are the arguments of fs.Get.
type GetArgs struct {
	Path string `msgpack:"path"`
}

// GetResult is the result of fs.Get.
type GetResult struct {
	Info   FileInfo `msgpack:"info"`
	SHA256 string   `msgpack:"sha256"` // hex
}

// ChecksumArgs are the arguments of fs.Checksum.
type ChecksumArgs struct {
	Path string `msgpack:"path"`
}

// ChecksumResult is the result of fs.Checksum.
type ChecksumResult struct {
	SHA256 string `msgpack:"sha256"` // hex
	Size   int64  `msgpack:"size"`
}

// ErrChecksum is wrapped when the bytes that arrived are not the bytes
// that were sent.
var ErrChecksum = errors.New("checksum mismatch")

// ErrSourceChanged is wrapped when a local source no longer hashes to the
// sha256 taken before its copies began (TreeOptions.SHA256).
var ErrSourceChanged = errors.New("the source changed since it was hashed for its copies")

// HashFile returns the sha256 of the local file at path, reading it with
// ctx's cancellation honoured between reads (as fs.Checksum does there).
func HashFile(ctx context.Context, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, &ctxReader{ctx: ctx, r: f}, make([]byte, copyBuffer)); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

func registerStream(reg *rpc.Registry) {
	reg.Handle(MethodPut, handlePut)
	reg.Handle(MethodGet, handleGet)
	reg.Handle(MethodChecksum, handleChecksum)
}

func handlePut(ctx context.Context, call *rpc.Call) (any, error) {
	var a PutArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	wt, err := resolveWrite(MethodPut, &WriteArgs{Path: a.Path, Mode: a.Mode, NewMode: a.NewMode, UID: a.UID, GID: a.GID,
		User: a.User, Group: a.Group, MkdirAll: a.MkdirAll})
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	var fill func(f *os.File) error
	switch {
	case call.Circuit == nil:
		if len(a.SHA256) > 0 {
			sum := sha256.Sum256(a.Data)
			if string(sum[:]) != string(a.SHA256) {
				return nil, errkind.Errorf(errkind.ErrBadArgs, "%s %s: %v: the data does not hash to the sha256 sent with it", MethodPut, a.Path, ErrChecksum)
			}
		}
		h.Write(a.Data)
		fill = func(f *os.File) error { _, err := f.Write(a.Data); return err }
	case a.Size < 0:
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: negative size", MethodPut)
	default:
		fill = func(f *os.File) error { return receive(ctx, f, call.Circuit, a.Size, h) }
	}
	m := wt.meta()
	m.mtime = a.MTime
	if err := atomicReplace(ctx, wt.dest, fill, m); err != nil {
		var ke interface{ Is(error) bool }
		if errors.As(err, &ke) { // already an rpc error with a kind
			return nil, fmt.Errorf("%s %s: %w", MethodPut, a.Path, err)
		}
		return nil, wrap(MethodPut, a.Path, err)
	}
	fi, err := statPath(wt.path, false)
	if err != nil {
		return nil, wrap(MethodPut, a.Path, err)
	}
	return &PutResult{Info: fi, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// receive copies exactly size bytes from circ into f, hashing them, and
// checks the sha256 trailer that follows.
func receive(ctx context.Context, f *os.File, circ io.Reader, size int64, h hash.Hash) error {
	n, err := copyHashed(&writeBehind{f: f}, io.LimitReader(circ, size), h, copyBuffer)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	if n != size {
		return fmt.Errorf("transfer interrupted after %d of %d bytes", n, size)
	}
	var trailer [sha256.Size]byte
	if _, err := io.ReadFull(circ, trailer[:]); err != nil {
		return fmt.Errorf("transfer interrupted before its checksum: %w", err)
	}
	if sum := h.Sum(nil); string(sum) != string(trailer[:]) {
		return errkind.Errorf(errkind.ErrRemote, "%v: received %x, sender computed %x", ErrChecksum, sum, trailer)
	}
	return nil
}

func handleGet(ctx context.Context, call *rpc.Call) (any, error) {
	var a GetArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if err := checkPath(MethodGet, a.Path); err != nil {
		return nil, err
	}
	if call.Circuit == nil {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s needs a circuit (use fs.Get's client helper)", MethodGet)
	}
	f, err := os.Open(a.Path)
	if err != nil {
		return nil, wrap(MethodGet, a.Path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, wrap(MethodGet, a.Path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s %s: not a regular file (%v)", MethodGet, a.Path, st.Mode().Type())
	}
	size := st.Size()
	// A caller that stops reading (its disk is full) cancels the call: a
	// write blocked on the circuit's window must then give up.
	stop := context.AfterFunc(ctx, func() { call.Circuit.SetWriteDeadline(time.Now()) })
	defer stop()
	w := bufio.NewWriterSize(call.Circuit, 64<<10)
	var hdr [8]byte
	binary.BigEndian.PutUint64(hdr[:], uint64(size))
	w.Write(hdr[:])
	h := sha256.New()
	n, err := copyHashed(w, io.LimitReader(f, size), h, copyBuffer)
	if err == nil && n != size {
		err = fmt.Errorf("the file shrank while it was read (%d of %d bytes)", n, size)
	}
	if err != nil {
		return nil, wrap(MethodGet, a.Path, err)
	}
	sum := h.Sum(nil)
	w.Write(sum)
	if err := w.Flush(); err != nil {
		return nil, wrap(MethodGet, a.Path, err)
	}
	return &GetResult{Info: toInfo(filepath.Base(a.Path), st), SHA256: hex.EncodeToString(sum)}, nil
}

func handleChecksum(ctx context.Context, call *rpc.Call) (any, error) {
	var a ChecksumArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if err := checkPath(MethodChecksum, a.Path); err != nil {
		return nil, err
	}
	f, err := os.Open(a.Path)
	if err != nil {
		return nil, wrap(MethodChecksum, a.Path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		if err == nil {
			return nil, errkind.Errorf(errkind.ErrBadArgs, "%s %s: not a regular file", MethodChecksum, a.Path)
		}
		return nil, wrap(MethodChecksum, a.Path, err)
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, &ctxReader{ctx: ctx, r: f}, make([]byte, copyBuffer))
	if err != nil {
		return nil, wrap(MethodChecksum, a.Path, err)
	}
	return &ChecksumResult{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// writeBehind starts the kernel's write-back of each few MiB as soon as
// they are written (sync_file_range, SYNC_FILE_RANGE_WRITE: it does not
// wait), so that the fsync before the rename, which the atomic write
// needs, finds little left to do instead of the whole file.
//
// It also drops what is safely on disk from the page cache, a few chunks
// behind (sync_file_range waiting for that range's write-back, then
// POSIX_FADV_DONTNEED): a large file then occupies a window of
// dropBehind bytes of cache instead of its whole size, and its pages are
// reused for the chunks that follow. Without that, an atomic write of a
// big file fills fresh memory while the old file's cache is still held,
// which costs more than the copy where memory not touched lately is
// expensive to touch again: on the CI VMs (free page reporting to the
// host), writing 1 GiB into a new file takes 2.4 s against 0.4 s into
// the truncated old one (dd). The data still reaches the disk before
// the fsync as before; the waits only start once the disk has fallen
// dropBehind bytes behind the network, where the fsync would wait
// anyway.
type writeBehind struct {
	f       *os.File
	off     int64 // bytes written
	flushed int64 // bytes handed to write-back
	dropped int64 // bytes written back and dropped from the cache
}

const (
	writeBehindChunk = 8 << 20
	dropBehind       = 4 * writeBehindChunk
)

func (w *writeBehind) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.flushed >= writeBehindChunk {
		// Best effort, all of it: a filesystem without these (tmpfs,
		// whose pages are the file) just syncs at the end.
		fd := int(w.f.Fd())
		unix.SyncFileRange(fd, w.flushed, w.off-w.flushed, unix.SYNC_FILE_RANGE_WRITE)
		w.flushed = w.off
		if end := w.flushed - dropBehind; end > w.dropped {
			unix.SyncFileRange(fd, w.dropped, end-w.dropped,
				unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
			unix.Fadvise(fd, w.dropped, end-w.dropped, unix.FADV_DONTNEED)
			w.dropped = end
		}
	}
	return n, err
}

// ctxReader stops a long read when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ---- client helpers ----

// PutOptions tune Put. The zero value writes a 0644 file (or keeps the
// mode and owner of the file it replaces) into an existing directory.
type PutOptions struct {
	WriteOptions
	// MTime, if not zero, is the file's modification time (Unix ns).
	MTime int64
}

// Put atomically replaces the file at path on c with size bytes read from
// r, streamed (in constant memory) when larger than InlineLimit.
func Put(ctx context.Context, c rpc.Caller, path string, r io.Reader, size int64, opts PutOptions) (*PutResult, error) {
	return put(ctx, c, path, r, size, opts, nil)
}

// put is Put. A streamed put hashes what it sends, unless sum is set: it
// then gives the sha256 of those bytes once they were all read (CopyOne
// has its fs.Get's, of the same bytes, and saves hashing them twice).
func put(ctx context.Context, c rpc.Caller, path string, r io.Reader, size int64, opts PutOptions, sum func() []byte) (*PutResult, error) {
	a := &PutArgs{Path: path, Size: size, Mode: opts.Mode, NewMode: opts.NewMode, UID: opts.UID, GID: opts.GID, User: opts.User,
		Group: opts.Group, MkdirAll: opts.MkdirAll, MTime: opts.MTime}
	var res PutResult
	if size <= InlineLimit {
		data := make([]byte, size)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("%s %s: reading the source: %w", MethodPut, path, err)
		}
		sum := sha256.Sum256(data)
		a.Data, a.SHA256 = data, sum[:]
		if err := c.Call(ctx, MethodPut, a, &res); err != nil {
			return nil, err
		}
		return &res, nil
	}
	st, err := c.Stream(ctx, MethodPut, a)
	if err != nil {
		return nil, err
	}
	// Wait for the reply while sending: the call can end before the agent
	// has read everything (it refused the path, the disk is full, the link
	// or ctx died), and then nothing drains the circuit: a write blocked on
	// its window would wait for ever. The reply unblocks it.
	var werr error
	waited := make(chan struct{})
	go func() {
		werr = st.Wait(&res)
		st.SetWriteDeadline(time.Now())
		close(waited)
	}()
	cw := &errWriter{w: st}
	var n int64
	var cerr error
	if sum == nil {
		h := sha256.New()
		n, cerr = copyHashed(cw, io.LimitReader(r, size), h, copyBuffer)
		sum = func() []byte { return h.Sum(nil) }
	} else {
		n, cerr = io.CopyBuffer(cw, io.LimitReader(r, size), make([]byte, copyBuffer))
	}
	if cerr == nil && n != size {
		cerr = fmt.Errorf("the source ended after %d of %d bytes", n, size)
	}
	var sent []byte
	if cerr == nil {
		sent = sum()
		_, cerr = cw.Write(sent)
	}
	if cerr != nil {
		// The agent sees a short stream and removes its temporary file.
		st.Close()
		<-waited
		if cw.err != nil && werr != nil {
			// Sending failed because the call had ended: its error (with
			// its kind: permission, disconnected, timeout…) is the cause.
			return nil, werr
		}
		return nil, fmt.Errorf("%s %s: %w (agent: %v)", MethodPut, path, cerr, werr)
	}
	<-waited
	st.Close()
	if werr != nil {
		return nil, werr
	}
	if want := hex.EncodeToString(sent); res.SHA256 != want {
		return nil, fmt.Errorf("%s %s: %w: the agent wrote %s, we sent %s", MethodPut, path, ErrChecksum, res.SHA256, want)
	}
	return &res, nil
}

// errWriter remembers its writer's first error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// Get streams the file at path on c into w and checks its sha256.
func Get(ctx context.Context, c rpc.Caller, path string, w io.Writer) (*GetResult, error) {
	return getTo(ctx, c, path, func(int64) io.Writer { return w })
}

// getTo is Get, with the writer chosen once the file's size is known.
func getTo(ctx context.Context, c rpc.Caller, path string, open func(size int64) io.Writer) (*GetResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.Stream(ctx, MethodGet, &GetArgs{Path: path})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var res GetResult
	r := bufio.NewReaderSize(st, 64<<10)
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		// The agent failed before sending anything: its reply says why.
		if werr := st.Wait(&res); werr != nil {
			return nil, werr
		}
		return nil, fmt.Errorf("%s %s: %w", MethodGet, path, err)
	}
	size := int64(binary.BigEndian.Uint64(hdr[:]))
	h := sha256.New()
	lw := &errWriter{w: open(size)}
	n, cerr := copyHashed(lw, io.LimitReader(r, size), h, copyBuffer)
	if lw.err != nil {
		// w failed (a full disk here): the agent may be blocked writing
		// what will never be read, so cancel the call rather than wait
		// for its reply.
		cancel()
		st.Wait(nil)
		return nil, fmt.Errorf("%s %s: %w", MethodGet, path, lw.err)
	}
	var trailer [sha256.Size]byte
	if cerr == nil && n != size {
		cerr = fmt.Errorf("the stream ended after %d of %d bytes", n, size)
	}
	if cerr == nil {
		_, cerr = io.ReadFull(r, trailer[:])
	}
	werr := st.Wait(&res)
	if werr != nil {
		return nil, werr
	}
	if cerr != nil {
		return nil, fmt.Errorf("%s %s: %w", MethodGet, path, cerr)
	}
	sum := h.Sum(nil)
	if string(sum) != string(trailer[:]) || hex.EncodeToString(sum) != res.SHA256 {
		return nil, fmt.Errorf("%s %s: %w: received %x, the agent sent %s", MethodGet, path, ErrChecksum, sum, res.SHA256)
	}
	return &res, nil
}

// Checksum returns the sha256 (hex) and size of the file at path on c.
func Checksum(ctx context.Context, c rpc.Caller, path string) (*ChecksumResult, error) {
	var res ChecksumResult
	if err := c.Call(ctx, MethodChecksum, &ChecksumArgs{Path: path}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// PutFile copies the local file src to dst on c. With preserve, the mode
// and modification time are kept.
func PutFile(ctx context.Context, c rpc.Caller, src, dst string, preserve bool, opts PutOptions) (*PutResult, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", src)
	}
	if preserve {
		opts.Mode = uint32(st.Mode() & iofs.FileMode(modeBits))
		opts.MTime = st.ModTime().UnixNano()
	}
	return Put(ctx, c, dst, f, st.Size(), opts)
}

// GetFile copies src on c to the local file dst, atomically (a hidden
// temporary file beside dst, renamed into place once the checksum
// matched). With preserve, the mode and modification time are kept;
// otherwise a replaced file keeps its mode and a new one is 0644.
// Temporary files that gets killed mid-transfer left in dst's directory
// are removed first (RemoveStale).
func GetFile(ctx context.Context, c rpc.Caller, src, dst string, preserve bool) (*GetResult, error) {
	RemoveStale(filepath.Dir(dst))
	m := &fileMeta{mode: 0o644, uid: -1, gid: -1}
	if old, err := os.Stat(dst); err == nil && old.Mode().IsRegular() {
		m.mode = old.Mode() & iofs.FileMode(modeBits)
	}
	var res *GetResult
	fill := func(f *os.File) error {
		// As on the agent: start the write-back while data still arrives,
		// so that the fsync before the rename finds little left to do.
		r, err := Get(ctx, c, src, &writeBehind{f: f})
		if err != nil {
			return err
		}
		res = r
		if preserve {
			m.mode = r.Info.FileMode() & iofs.FileMode(modeBits)
			m.mtime = r.Info.ModTime
		}
		return nil
	}
	if err := atomicReplace(ctx, dst, fill, m); err != nil {
		return nil, err
	}
	return res, nil
}
