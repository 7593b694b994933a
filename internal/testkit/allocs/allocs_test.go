package allocs

import "testing"

var sink []byte

// The measurement sees an allocation made by f, and Within fails a call
// over its bound.
func TestBytes(t *testing.T) {
	if got := Bytes(func() { sink = make([]byte, 1<<20) }); got < 1<<20 {
		t.Fatalf("a 1 MiB allocation measured as %d bytes", got)
	}
	ft := &fakeT{TB: t}
	Within(ft, Bound{Base: 1 << 10, PerByte: 2}, 100, "make", func() { sink = make([]byte, 1<<20) })
	if !ft.failed {
		t.Fatal("1 MiB allocated within a bound of 1 KiB + 2×100")
	}
	ft = &fakeT{TB: t}
	Within(ft, Bound{Base: 4 << 20}, 0, "make", func() { sink = make([]byte, 1<<20) })
	if ft.failed {
		t.Fatal("1 MiB allocated failed a bound of 4 MiB")
	}
	ft = &fakeT{TB: t}
	Within(ft, Bound{Base: 1 << 10, PerByte: 1 << 10}, 1<<10, "make", func() { sink = make([]byte, 1<<20) })
	if ft.failed {
		t.Fatal("1 MiB allocated failed a bound of 1 KiB + 1 KiB×1024")
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(string, ...any) { f.failed = true }
