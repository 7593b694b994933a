package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/rpctest"
	"github.com/spindle-rpc/spindle/rpc"
)

// CopyTree between two contexts reproduces the tree as PutTree and GetTree
// do, with Total and Progress agreeing with the bytes moved.
func TestCopyTreeBetweenContexts(t *testing.T) {
	from, to := rpctest.New(Register), rpctest.New(Register)
	ctx := context.Background()
	base := t.TempDir()
	src, dst := filepath.Join(base, "src"), filepath.Join(base, "dst")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	files, dirs, size := testTree(t, src)
	var progress atomic.Int64
	var totalBytes int64
	opts := TreeOptions{Preserve: true, Parallel: 8,
		Progress: func(n int64) { progress.Add(n) },
		Total:    func(_ int, b int64) { totalBytes = b }}
	res, err := CopyTree(ctx, from, src, to, dst, opts)
	if err != nil {
		t.Fatalf("CopyTree: %v", err)
	}
	if res.Files != files || res.Dirs != dirs+1 || res.Bytes != size {
		t.Errorf("CopyTree: %+v, want %d files, %d dirs, %d bytes", res, files, dirs+1, size)
	}
	if got := progress.Load(); got != size || totalBytes != size {
		t.Errorf("Progress reported %d bytes and Total %d, want %d", got, totalBytes, size)
	}
	compareTrees(t, src, dst, true)
	noTempsUnder(t, dst)

	if _, err := CopyTree(ctx, from, filepath.Join(src, "script.sh"), to, filepath.Join(base, "x"), opts); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("CopyTree of a file: %v", err)
	}
}

// CopyOne copies inline-sized and streamed files with mode and mtime, and
// names a missing source.
func TestCopyOneBetweenContexts(t *testing.T) {
	from, to := rpctest.New(Register), rpctest.New(Register)
	ctx := context.Background()
	dir := t.TempDir()
	mt := time.Unix(1_500_000_000, 123456789)
	for _, n := range []int{0, 1, InlineLimit, InlineLimit + 1, 3*copyBuffer + 5} {
		src := filepath.Join(dir, fmt.Sprintf("src%d", n))
		data := sourceFile(t, src, n, 0o751, mt)
		var progress atomic.Int64
		dst := src + ".copy"
		res, err := CopyOne(ctx, from, src, to, dst, TreeOptions{Preserve: true, Progress: func(n int64) { progress.Add(n) }})
		if err != nil || res.Bytes != int64(n) || res.Files != 1 {
			t.Fatalf("CopyOne %d bytes: %+v %v", n, res, err)
		}
		if got := progress.Load(); got != int64(n) {
			t.Errorf("%d bytes: Progress reported %d", n, got)
		}
		st, err := os.Stat(dst)
		b, _ := os.ReadFile(dst)
		if err != nil || st.Mode() != 0o751 || !st.ModTime().Equal(mt) || !bytes.Equal(b, data) {
			t.Errorf("%s: %v %v %v, content equal %v", dst, st.Mode(), st.ModTime(), err, bytes.Equal(b, data))
		}
	}
	missing := filepath.Join(dir, "nope")
	if _, err := CopyOne(ctx, from, missing, to, filepath.Join(dir, "x"), TreeOptions{}); !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Errorf("CopyOne of a missing file: %v", err)
	}
	if _, err := CopyOne(ctx, from, dir, to, filepath.Join(dir, "x"), TreeOptions{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("CopyOne of a directory: %v", err)
	}
}

// A file damaged between the source agent and us never replaces the
// destination, even when the damaged byte is the last one, which fs.Put
// would otherwise have sent and committed before fs.Get's check.
func TestCopyOneDamagedSourceKeepsDestination(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const size = 2*copyBuffer + 11
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.WriteFile(src, randomBytes(t, size), 0o644)
	os.WriteFile(dst, []byte("old content"), 0o644)
	for _, at := range []int64{0, size / 2, size - 1} {
		from := &damagingGet{Caller: rpctest.New(Register), at: 8 + at} // after the size header
		_, err := CopyOne(ctx, from, src, rpctest.New(Register), dst, TreeOptions{})
		if !errors.Is(err, ErrChecksum) {
			t.Errorf("byte %d damaged: %v, want ErrChecksum", at, err)
		}
		if b, _ := os.ReadFile(dst); string(b) != "old content" {
			t.Errorf("byte %d damaged: the destination now holds %d bytes", at, len(b))
		}
		noTempsUnder(t, dir)
	}
}

// Bytes damaged between us and the destination agent fail its check of
// the sha256 we send (fs.Get's, not one of our own), and the old file
// stays.
func TestCopyOneDamagedOnTheWayOut(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.WriteFile(src, randomBytes(t, 2*copyBuffer+11), 0o644)
	os.WriteFile(dst, []byte("old content"), 0o644)
	to := &damagingPut{Caller: rpctest.New(Register)}
	// The destination agent's reply carries the mismatch as a message.
	if _, err := CopyOne(ctx, rpctest.New(Register), src, to, dst, TreeOptions{}); err == nil || !strings.Contains(err.Error(), ErrChecksum.Error()) {
		t.Errorf("damaged on the way out: %v, want a %q", err, ErrChecksum)
	}
	if b, _ := os.ReadFile(dst); string(b) != "old content" {
		t.Errorf("the destination now holds %d bytes", len(b))
	}
	noTempsUnder(t, dir)
}

// damagingPut flips the first byte of every fs.Put stream.
type damagingPut struct{ rpc.Caller }

func (d *damagingPut) Stream(ctx context.Context, method string, args any) (rpc.Stream, error) {
	st, err := d.Caller.Stream(ctx, method, args)
	if err != nil || method != MethodPut {
		return st, err
	}
	return &damagingWrites{Stream: st}, nil
}

type damagingWrites struct {
	rpc.Stream
	done bool
}

func (s *damagingWrites) Write(p []byte) (int, error) {
	if !s.done && len(p) > 0 {
		q := append([]byte(nil), p...)
		q[0] ^= 0xff
		s.done = true
		return s.Stream.Write(q)
	}
	return s.Stream.Write(p)
}

// When the destination refuses the file, the copy fails with its error and
// the source's stream is abandoned (goleak checks that nothing is left).
func TestCopyOneDestinationFails(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.WriteFile(src, randomBytes(t, 3*copyBuffer), 0o644)
	dst := filepath.Join(dir, "no-such-dir", "dst")
	_, err := CopyOne(ctx, rpctest.New(Register), src, rpctest.New(Register), dst, TreeOptions{})
	if !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), dst) {
		t.Errorf("CopyOne into a missing directory: %v", err)
	}
}

// damagingGet flips one byte of every fs.Get stream, at offset at.
type damagingGet struct {
	rpc.Caller
	at int64
}

func (d *damagingGet) Stream(ctx context.Context, method string, args any) (rpc.Stream, error) {
	st, err := d.Caller.Stream(ctx, method, args)
	if err != nil || method != MethodGet {
		return st, err
	}
	return &damagingStream{Stream: st, at: d.at}, nil
}

type damagingStream struct {
	rpc.Stream
	off, at int64
}

func (s *damagingStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	if s.at >= s.off && s.at < s.off+int64(n) {
		p[s.at-s.off] ^= 0xff
	}
	s.off += int64(n)
	return n, err
}

// BenchmarkCopyOne relays 32 MiB between two in-process contexts, against
// what a caller would do without it: fs.GetFile to a local file, then
// fs.PutFile.
func BenchmarkCopyOne(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, bytes.Repeat([]byte("0123456789abcdef"), 2<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	from, to := rpctest.New(Register), rpctest.New(Register)
	b.Run("CopyOne", func(b *testing.B) {
		b.SetBytes(32 << 20)
		for b.Loop() {
			if _, err := CopyOne(ctx, from, src, to, filepath.Join(dir, "relayed"), TreeOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("GetThenPut", func(b *testing.B) {
		b.SetBytes(32 << 20)
		staged := filepath.Join(dir, "staged")
		for b.Loop() {
			if _, err := GetFile(ctx, from, src, staged, false); err != nil {
				b.Fatal(err)
			}
			if _, err := PutFile(ctx, to, staged, filepath.Join(dir, "put"), false, PutOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
