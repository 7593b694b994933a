package fs

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
)

func TestCopyHashedMatchesMultiWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 4095, 4096, 4097, 3*4096 + 17, 1 << 20} {
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		// OneByteReader and HalfReader make short reads; 4 KiB buffers make
		// the rotation wrap many times.
		for name, r := range map[string]io.Reader{
			"whole":    bytes.NewReader(src),
			"one byte": iotest.OneByteReader(bytes.NewReader(src)),
			"half":     iotest.HalfReader(bytes.NewReader(src)),
		} {
			if size == 1<<20 && name == "one byte" {
				continue
			}
			var dst bytes.Buffer
			h := sha256.New()
			n, err := copyHashed(&dst, r, h, 4096)
			if err != nil || n != int64(size) {
				t.Fatalf("%d bytes, %s: n=%d err=%v", size, name, n, err)
			}
			if !bytes.Equal(dst.Bytes(), src) {
				t.Fatalf("%d bytes, %s: copy differs", size, name)
			}
			if want := sha256.Sum256(src); !bytes.Equal(h.Sum(nil), want[:]) {
				t.Fatalf("%d bytes, %s: hash %x, want %x", size, name, h.Sum(nil), want)
			}
		}
	}
}

// failingWriter accepts limit bytes, then fails part-way through a write.
type failingWriter struct {
	got   bytes.Buffer
	limit int
}

var errFull = errors.New("no space left")

func (w *failingWriter) Write(p []byte) (int, error) {
	room := w.limit - w.got.Len()
	if len(p) <= room {
		return w.got.Write(p)
	}
	w.got.Write(p[:room])
	return room, errFull
}

func TestCopyHashedHashesOnlyWhatWasWritten(t *testing.T) {
	src := bytes.Repeat([]byte("spindle!"), 4096) // 32 KiB
	w := &failingWriter{limit: 10000}
	h := sha256.New()
	n, err := copyHashed(w, bytes.NewReader(src), h, 4096)
	if !errors.Is(err, errFull) || n != 10000 {
		t.Fatalf("n=%d err=%v, want 10000 and the writer's error", n, err)
	}
	if want := sha256.Sum256(src[:10000]); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatal("the hash covers bytes the writer did not take")
	}
}

func TestCopyHashedReadError(t *testing.T) {
	errBroken := errors.New("link lost")
	src := io.MultiReader(bytes.NewReader(make([]byte, 5000)), iotest.ErrReader(errBroken))
	var dst bytes.Buffer
	n, err := copyHashed(&dst, src, sha256.New(), 4096)
	if !errors.Is(err, errBroken) || n != 5000 || dst.Len() != 5000 {
		t.Fatalf("n=%d len=%d err=%v", n, dst.Len(), err)
	}
}

// shortWriter claims to take one byte less than it is given, without an error.
type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return max(len(p)-1, 0), nil }

func TestCopyHashedShortWrite(t *testing.T) {
	_, err := copyHashed(shortWriter{}, bytes.NewReader(make([]byte, 100)), sha256.New(), 4096)
	if !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("err = %v, want io.ErrShortWrite", err)
	}
}

// BenchmarkCopyHashed copies 64 MiB into a file (the page cache) while
// hashing it: with a second CPU, copyHashed takes about the longer of the
// two instead of their sum.
func BenchmarkCopyHashed(b *testing.B) {
	src := make([]byte, 64<<20)
	f, err := os.Create(filepath.Join(b.TempDir(), "dst"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	run := func(b *testing.B, copy func(io.Writer, io.Reader) error) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				b.Fatal(err)
			}
			if err := copy(f, bytes.NewReader(src)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("MultiWriter", func(b *testing.B) {
		run(b, func(w io.Writer, r io.Reader) error {
			_, err := io.CopyBuffer(io.MultiWriter(w, sha256.New()), r, make([]byte, copyBuffer))
			return err
		})
	})
	b.Run("copyHashed", func(b *testing.B) {
		run(b, func(w io.Writer, r io.Reader) error {
			_, err := copyHashed(w, r, sha256.New(), copyBuffer)
			return err
		})
	})
}
