package wire_test

import (
	"bytes"
	"errors"
	"reflect"
	"runtime"
	"testing"

	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type inner struct {
	Name string            `msgpack:"name"`
	Tags []string          `msgpack:"tags,omitempty"`
	Env  map[string]string `msgpack:"env,omitempty"`
	N    int64             `msgpack:"n"`
}

type payload struct {
	Args  []string          `msgpack:"args"`
	Env   map[string]string `msgpack:"env"`
	Data  []byte            `msgpack:"data"`
	Items []inner           `msgpack:"items"`
	IDs   []uint32          `msgpack:"ids"`
	Ptr   *inner            `msgpack:"ptr,omitempty"`
	Flag  bool              `msgpack:"flag"`
	F     float64           `msgpack:"f"`
}

// request, control and remoteError mirror rpc's payloads (rpc imports
// wire, so wire's tests cannot import rpc).
type request struct {
	Method  string             `msgpack:"m"`
	Args    msgpack.RawMessage `msgpack:"a,omitempty"`
	Timeout int64              `msgpack:"t,omitempty"`
}

type control struct {
	Call   uint32 `msgpack:"call"`
	Op     string `msgpack:"op"`
	Rows   uint16 `msgpack:"rows,omitempty"`
	Cols   uint16 `msgpack:"cols,omitempty"`
	Signal int    `msgpack:"sig,omitempty"`
}

type remoteError struct {
	Kind    string `msgpack:"k,omitempty"`
	Message string `msgpack:"msg"`
}

func TestRoundTrip(t *testing.T) {
	in := payload{
		Args: []string{"ls", "-l"}, Env: map[string]string{"A": "b"}, Data: []byte{1, 2, 3},
		Items: []inner{{Name: "x", Tags: []string{"t"}, Env: map[string]string{"k": "v"}, N: -5}},
		IDs:   []uint32{1, 70000}, Ptr: &inner{Name: "p"}, Flag: true, F: 1.5,
	}
	b, err := wire.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var out payload
	if err := wire.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("got %+v want %+v", out, in)
	}
	if err := wire.Unmarshal(append(b, 0xc0), &out); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("trailing byte: %v", err)
	}
	// A large legitimate payload still decodes.
	big := payload{Args: make([]string, 100000), IDs: make([]uint32, 100000)}
	b, _ = wire.Marshal(&big)
	if err := wire.Unmarshal(b, &out); err != nil || len(out.Args) != 100000 {
		t.Fatalf("big payload: %v", err)
	}
}

func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A header announcing 2^31 elements is refused without allocating them.
func TestHugeArrayHeader(t *testing.T) {
	hdr := []byte{0xdd, 0x80, 0x00, 0x00, 0x00}
	cases := map[string]func() error{
		"[]string": func() error { var v []string; return wire.Unmarshal(hdr, &v) },
		"struct field": func() error {
			var v payload
			return wire.Unmarshal(append([]byte{0x81, 0xa4, 'a', 'r', 'g', 's'}, hdr...), &v)
		},
		"nested struct slice": func() error {
			var v payload
			return wire.Unmarshal(append([]byte{0x81, 0xa5, 'i', 't', 'e', 'm', 's'}, hdr...), &v)
		},
		"map32": func() error { var v map[string]string; return wire.Unmarshal([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}, &v) },
		"bin32": func() error { var v []byte; return wire.Unmarshal([]byte{0xc6, 0xff, 0xff, 0xff, 0xff}, &v) },
		// msgpack/v5 reads a map out of an ext value's body, which the
		// checker would otherwise skip as opaque bytes.
		"map32 in a fixext8": func() error {
			var v map[string]string
			return wire.Unmarshal([]byte{0xd7, 0x30, 0xdf, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30}, &v)
		},
		"map16 in an ext8 field": func() error {
			var v payload
			return wire.Unmarshal([]byte{0x81, 0xa3, 'e', 'n', 'v', 0xc7, 0x03, 0x01, 0xde, 0xff, 0xff}, &v)
		},
	}
	for name, f := range cases {
		var err error
		n := allocated(func() { err = f() })
		if !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
		if n > 1<<20 {
			t.Errorf("%s: allocated %d bytes", name, n)
		}
	}
}

type big struct {
	A [128]byte   `msgpack:"a"`
	B [8]string   `msgpack:"b"`
	C map[int]int `msgpack:"c"`
}

// msgpack/v5 preallocates a slice's announced length: n nils into []big
// would cost n*sizeof(big). Unmarshal refuses such expansion.
func TestExpansionBound(t *testing.T) {
	const n = 1 << 16
	b := []byte{0xdd, 0, 1, 0, 0}
	b = append(b, bytes.Repeat([]byte{0xc0}, n)...)
	var v []big
	var err error
	a := allocated(func() { err = wire.Unmarshal(b, &v) })
	if err == nil {
		t.Fatalf("decoded %d elements of %d bytes from %d bytes", len(v), reflect.TypeOf(big{}).Size(), len(b))
	}
	if a > 2<<20 {
		t.Fatalf("allocated %d bytes", a)
	}
	// The same bytes into []string (16 bytes per element) are fine.
	var s []string
	if err := wire.Unmarshal(b, &s); err != nil || len(s) != n {
		t.Fatalf("[]string: %v", err)
	}
	// A map with many 2-byte entries into map[string]string is bounded too.
	m := []byte{0xdf, 0, 2, 0, 0}
	for i := range 1 << 17 {
		m = append(m, 0xcd, byte(i>>8), byte(i), 0xc0)
	}
	var mm map[int]big
	if err := wire.Unmarshal(m, &mm); err == nil {
		t.Fatal("map[int]big of nils accepted")
	}
}

func TestValidate(t *testing.T) {
	for _, b := range [][]byte{
		{0xdd, 0x0f, 0xff, 0xff, 0xff}, {0xdd, 0x7f, 0xff, 0xff, 0xff},
		{0xdf, 0xff, 0xff, 0xff, 0xff}, {0xc6, 0xff, 0xff, 0xff, 0xff},
		{0xc1}, {}, {0x91}, {0xdb, 0, 0, 0, 9, 'x'},
		bytes.Repeat([]byte{0x91}, wire.MaxDepth+2),
	} {
		if _, err := wire.Validate(b); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("Validate(% x) = %v", b, err)
		}
	}
	if n, err := wire.Validate([]byte{0x92, 0x01, 0xa1, 'x', 0xff}); err != nil || n != 4 {
		t.Fatalf("n=%d err=%v", n, err)
	}
}
