package fs

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
)

// Copies between two contexts (CopyTree, CopyOne): the data passes through
// this process, as `scp -3` does, one chunk at a time: a streamed fs.Get
// from one context feeds a streamed fs.Put to the other through a pipe, so
// memory stays constant whatever the file's size, and the two agents need
// no way to reach each other. Small files travel as one fs.Read and one
// inline fs.Put.
//
// Both checksums hold across the relay: fs.Get checks what it received
// against the source agent's sha256, and fs.Put has the destination agent
// check what it wrote against that same sha256 (the bytes are the same, so
// this process hashes them once). The last byte of every file is held back
// until the source's checksum matched, so a file that arrived damaged
// never replaces the destination: fs.Put sees its stream fail and the
// destination agent removes its temporary file.

// CopyTree copies the directory src on from to the directory dst on to,
// which is created if missing (its parent must exist) and filled if it
// exists, as GetTree lists a tree and PutTree writes one: one fs.Walk on
// from, then up to opts.Parallel files in flight.
func CopyTree(ctx context.Context, from rpc.Caller, src string, to rpc.Caller, dst string, opts TreeOptions) (*TreeResult, error) {
	const op = "fs.CopyTree"
	root, ents, err := listDir(ctx, op, from, src)
	if err != nil {
		return nil, err
	}
	t := &treeCopy{op: op, opts: opts, dst: &relayDst{remoteDst{c: to, opts: &opts}, from},
		srcPath: func(rel string) string { return path.Join(src, rel) },
		dstPath: func(rel string) string { return path.Join(dst, rel) },
	}
	return t.run(ctx, src, dst, root.FileMode(), ents)
}

// CopyOne copies the file src on from (a symlink is followed) to the file
// dst on to, as CopyTree copies each file. dst's directory must exist.
func CopyOne(ctx context.Context, from rpc.Caller, src string, to rpc.Caller, dst string, opts TreeOptions) (*TreeResult, error) {
	fi, err := Stat(ctx, from, src)
	if err == nil && !fi.FileMode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file (%v)", src, fi.FileMode().Type())
	}
	if err == nil {
		e := &WalkEntry{Mode: fi.Mode, Size: fi.Size, ModTime: fi.ModTime}
		var n int64
		if n, err = (&relayDst{remoteDst{c: to, opts: &opts}, from}).file(ctx, e, src, dst); err == nil {
			return &TreeResult{Files: 1, Bytes: n}, nil
		}
	}
	return nil, fmt.Errorf("fs.CopyOne: copying %s to %s: %w", src, dst, err)
}

// relayDst writes to one context what it reads from another: directories
// and symlinks as remoteDst does, files through this process.
type relayDst struct {
	remoteDst
	from rpc.Caller
}

// errDstFailed is what the source's fs.Get sees when the destination
// stopped taking the data.
var errDstFailed = errors.New("the destination failed")

func (r *relayDst) file(ctx context.Context, e *WalkEntry, src, dst string) (int64, error) {
	mode := copyMode(e.FileMode(), r.opts.Preserve)
	po := PutOptions{WriteOptions: WriteOptions{Mode: uint32(mode)}}
	if r.opts.Preserve {
		po.MTime = e.ModTime
	}
	if e.Size <= InlineLimit {
		var rr ReadResult
		err := r.from.Call(ctx, MethodRead, &ReadArgs{Path: src, MaxSize: InlineLimit}, &rr)
		if err == nil {
			return r.put(ctx, dst, bytes.NewReader(rr.Data), int64(len(rr.Data)), po, false, nil)
		}
		if !errors.Is(err, errkind.ErrTooLarge) {
			return 0, err
		}
		// It grew since it was listed: stream it.
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	sized := make(chan int64, 1)
	got := make(chan error, 1)
	var checked []byte // the sha256 fs.Get checked; set before the last byte is released
	go func() {
		var held *holdLast
		res, err := getTo(ctx, r.from, src, func(size int64) io.Writer {
			held = &holdLast{w: pw, left: size}
			sized <- size
			return held
		})
		if err == nil {
			if checked, err = hex.DecodeString(res.SHA256); err == nil {
				err = held.release()
			}
		}
		pw.CloseWithError(err) // nil: the reader sees EOF
		got <- err
	}()
	var size int64
	select {
	case size = <-sized:
	case err := <-got:
		return 0, err
	}
	if size == 0 {
		// No last byte to hold back: write once the stream was checked.
		if err := <-got; err != nil {
			return 0, err
		}
		return r.put(ctx, dst, bytes.NewReader(nil), 0, po, false, nil)
	}
	// fs.Put sends the sha256 that fs.Get checked, of the same bytes,
	// rather than hash them a second time here.
	in := &sourceReader{r: pr}
	n, err := r.put(ctx, dst, in, size, po, true, func() []byte { return checked })
	if err != nil {
		pr.CloseWithError(errDstFailed)
		cancel()
		gerr := <-got
		if in.failed {
			// The source failed first: fs.Put only saw its stream end.
			return 0, gerr
		}
		return 0, err
	}
	return n, <-got
}

// sourceReader remembers whether reading failed: whether fs.Put stopped
// because fs.Get did.
type sourceReader struct {
	r      io.Reader
	failed bool
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.failed = true
	}
	return n, err
}

// holdLast passes a stream of left bytes on to w except its last byte,
// which release writes: the reader of w cannot finish before the stream
// was checked.
type holdLast struct {
	w    io.Writer
	left int64
	last []byte
}

func (h *holdLast) Write(p []byte) (int, error) {
	h.left -= int64(len(p))
	if h.left != 0 || len(p) == 0 {
		return h.w.Write(p)
	}
	if _, err := h.w.Write(p[:len(p)-1]); err != nil {
		return 0, err
	}
	h.last = []byte{p[len(p)-1]}
	return len(p), nil
}

func (h *holdLast) release() error {
	if h == nil || h.last == nil {
		return nil
	}
	_, err := h.w.Write(h.last)
	return err
}
