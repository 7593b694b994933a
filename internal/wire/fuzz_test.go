package wire_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
	"github.com/spindle-rpc/spindle/internal/wire"
)

// validateAllocs bounds what Validate allocates: it walks the encoding
// without decoding it, so only an error's text, whatever the input.
var validateAllocs = allocs.Bound{Base: 1 << 10}

// unmarshalAllocs bounds what one Unmarshal allocates into the fuzzed
// types: an array's announced count is checked against the bytes that
// remain, so each element costs at least one input byte, decoded into at
// most 56 bytes (inner, the largest element type here) or a map entry of
// a few times its 32 bytes of key and value while the map grows; strings
// copy their bytes. A forged length that msgpack trusted would cost its
// announced count times the element size, far over this.
var unmarshalAllocs = allocs.Bound{Base: 16 << 10, PerByte: 128}

func seeds(f *testing.F) {
	for _, b := range [][]byte{
		{0xdd, 0x0f, 0xff, 0xff, 0xff},
		{0xdd, 0x7f, 0xff, 0xff, 0xff},
		{0xdf, 0xff, 0xff, 0xff, 0xff},
		{0xc6, 0xff, 0xff, 0xff, 0xff},
		{0xdd, 0x80, 0x00, 0x00, 0x00},
		{0x81, 0xa4, 'a', 'r', 'g', 's', 0xdd, 0x0f, 0xff, 0xff, 0xff},
		{0x81, 0xa5, 'i', 't', 'e', 'm', 's', 0x91, 0x81, 0xa4, 't', 'a', 'g', 's', 0xdd, 0x7f, 0xff, 0xff, 0xff},
		{0x81, 0xa3, 'e', 'n', 'v', 0xdf, 0xff, 0xff, 0xff, 0xff},
		{0x81, 0xa4, 'd', 'a', 't', 'a', 0xc6, 0xff, 0xff, 0xff, 0xff},
		{0xc7, 0xff, 0xff},
	} {
		f.Add(b)
	}
	good := []any{
		&payload{Args: []string{"a"}, Env: map[string]string{"k": "v"}, Data: []byte("x"), Items: []inner{{Name: "n", Tags: []string{"t"}}}, IDs: []uint32{1}},
		&request{Method: "exec.Run", Args: []byte{0x91, 0x01}, Timeout: 5},
		&control{Call: 1025, Op: "resize", Rows: 24, Cols: 80},
		&remoteError{Kind: "not_found", Message: "no such file"},
	}
	for _, v := range good {
		b, err := wire.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzValidate: whatever the bytes, Validate fails with ErrInvalid or
// returns the length of a valid prefix that is valid on its own, and
// allocates within validateAllocs.
func FuzzValidate(f *testing.F) {
	seeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var n int
		var err error
		allocs.Within(t, validateAllocs, len(b), "Validate", func() { n, err = wire.Validate(b) })
		if err != nil {
			if !errors.Is(err, wire.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("Validate = %d for %d bytes", n, len(b))
		}
		// A valid prefix is valid on its own.
		if m, err := wire.Validate(b[:n]); err != nil || m != n {
			t.Fatalf("prefix: %d %v", m, err)
		}
	})
}

// FuzzUnmarshal: whatever the bytes, Unmarshal into each concrete type
// fails with ErrInvalid or decodes a value that survives a round trip,
// and allocates within unmarshalAllocs.
func FuzzUnmarshal(f *testing.F) {
	seeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		targets := []any{new(payload), new(request), new(control), new(remoteError),
			new([]string), new(map[string]string), new([]byte), new([]inner), new(string), new(uint32)}
		for _, v := range targets {
			var err error
			allocs.Within(t, unmarshalAllocs, len(b), fmt.Sprintf("Unmarshal into %T", v), func() { err = wire.Unmarshal(b, v) })
			if err != nil {
				if !errors.Is(err, wire.ErrInvalid) {
					t.Fatalf("%T: error %v does not wrap ErrInvalid", v, err)
				}
				continue
			}
			// What decoded re-encodes and decodes to the same value.
			enc, err := wire.Marshal(v)
			if err != nil {
				t.Fatalf("%T: re-marshal: %v", v, err)
			}
			w := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			if err := wire.Unmarshal(enc, w); err != nil {
				t.Fatalf("%T: re-unmarshal of % x: %v", v, enc, err)
			}
			if !equalish(v, w) {
				t.Fatalf("%T: round trip changed %#v into %#v", v, v, w)
			}
		}
	})
}

// equalish is DeepEqual that treats nil and empty slices and maps alike
// (msgpack encodes both as empty or nil depending on the path), and NaNs
// as equal.
func equalish(a, b any) bool {
	return reflect.DeepEqual(normalize(reflect.ValueOf(a)), normalize(reflect.ValueOf(b)))
}

func normalize(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return normalize(v.Elem())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return string(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = normalize(v.Index(i))
		}
		return out
	case reflect.Map:
		out := map[any]any{}
		for _, k := range v.MapKeys() {
			out[normalize(k)] = normalize(v.MapIndex(k))
		}
		return out
	case reflect.Struct:
		out := make([]any, v.NumField())
		for i := range out {
			out[i] = normalize(v.Field(i))
		}
		return out
	case reflect.Float32, reflect.Float64:
		if math.IsNaN(v.Float()) {
			return "NaN" // a NaN equals no NaN, itself included
		}
		return v.Float()
	default:
		return v.Interface()
	}
}
