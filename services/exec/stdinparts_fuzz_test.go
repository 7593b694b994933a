package exec

import (
	"bytes"
	"context"
	"encoding/base64"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
	"github.com/spindle-rpc/spindle/services/modules/store"
)

// stdinPartAllocs bounds what stdinPart allocates for a part naming
// stored bytes: an error's text, never a copy of what it names.
var stdinPartAllocs = allocs.Bound{Base: 4 << 10}

// FuzzStdinPart resolves parts a caller sends, against a store holding
// stored: whatever the offset and length, stdinPart returns, allocates
// within stdinPartAllocs, and what it returns is the bytes named.
func FuzzStdinPart(f *testing.F) {
	f.Add([]byte("0123456789"), int64(2), int64(3), false, false)
	f.Add([]byte("0123456789"), int64(0), int64(0), false, false)
	f.Add([]byte("0123456789"), int64(0), int64(0), false, true)
	f.Add([]byte("0123456789"), int64(1), int64(2), false, true)
	f.Add([]byte("x"), int64(-1), int64(1), true, false)
	f.Add([]byte{}, int64(1)<<62, int64(1)<<62, false, false)
	f.Fuzz(func(t *testing.T, stored []byte, offset, length int64, otherHash, b64 bool) {
		st := store.New(1 << 20)
		sum, err := st.Put(stored)
		if err != nil {
			return
		}
		if otherHash {
			sum[0]++
		}
		var got []byte
		// Base64 writes the encoding: 4/3 of the stored bytes, no more.
		bound, n := stdinPartAllocs, 0
		if b64 {
			bound.PerByte, n = 2, len(stored)
		}
		allocs.Within(t, bound, n, "stdinPart", func() {
			got, err = stdinPart(context.Background(), StdinPart{SHA256: sum[:], Offset: offset, Length: length, Base64: b64}, st)
		})
		switch {
		case err != nil:
		case otherHash:
			t.Fatal("a hash the store lacks named bytes")
		case b64 && (offset != 0 || length != 0):
			t.Fatal("a slice encoded in base64")
		case b64:
			if want := base64.StdEncoding.EncodeToString(stored); string(got) != want {
				t.Fatal("not the base64 of the stored bytes")
			}
		case length == 0 && offset == 0:
			if !bytes.Equal(got, stored) {
				t.Fatal("the whole of it is other bytes")
			}
		case offset < 0 || length <= 0 || offset+length > int64(len(stored)):
			t.Fatalf("slice (%d, %d) of %d bytes taken", offset, length, len(stored))
		case !bytes.Equal(got, stored[offset:offset+length]):
			t.Fatal("other bytes than the slice named")
		}
	})
}
