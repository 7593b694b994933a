package fs

import (
	"bytes"
	"encoding/binary"
	"io"
	iofs "io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
	"github.com/spindle-rpc/spindle/internal/wire"
)

// decodeWalkAllocs bounds what decodeWalk allocates: one record buffer of
// MaxWalkRecord, and per record what wire.Unmarshal makes of it (the
// entry's strings) and the path kept in the seen and dirs maps, a small
// multiple of the record's bytes; an error's text is small.
var decodeWalkAllocs = allocs.Bound{Base: MaxWalkRecord + 16<<10, PerByte: 64}

// walkRecords encodes entries as an agent's fs.Walk stream.
func walkRecords(t testing.TB, entries ...WalkEntry) []byte {
	var out bytes.Buffer
	for _, e := range entries {
		b, err := wire.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
		out.Write(b)
	}
	return out.Bytes()
}

// FuzzWalkStream feeds decodeWalk what a hostile agent could send in
// answer to fs.Walk. Whatever the bytes, it must return (no panic, no
// hang), allocate within decodeWalkAllocs, and every entry it hands on
// must be safe for GetTree to create under the destination: a clean,
// local path, listed once, whose parent is the root or a directory listed
// before it.
func FuzzWalkStream(f *testing.F) {
	f.Add(walkRecords(f,
		WalkEntry{Path: "d", Mode: uint32(iofs.ModeDir | 0o755)},
		WalkEntry{Path: "d/f", Mode: 0o644, Size: 3},
		WalkEntry{Path: "l", Mode: uint32(iofs.ModeSymlink | 0o777), Target: "../../etc/passwd"},
	))
	f.Add(walkRecords(f, WalkEntry{Path: "../x", Mode: 0o644}))
	f.Add(walkRecords(f, WalkEntry{Path: "a/b", Mode: 0o644}))
	f.Add(walkRecords(f, WalkEntry{Path: "f", Mode: 0o644}, WalkEntry{Path: "f/g", Mode: 0o644}))
	f.Add(walkRecords(f, WalkEntry{Path: "f", Mode: 0o644}, WalkEntry{Path: "f", Mode: 0o644}))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Add([]byte{0, 0, 0, 5, 0x91})
	f.Fuzz(func(t *testing.T, data []byte) {
		allocs.Within(t, decodeWalkAllocs, len(data), "decodeWalk", func() {
			decodeWalk(bytes.NewReader(data), "/r", 50, func(*WalkEntry) error { return nil })
		})
		seen := map[string]bool{}
		dirs := map[string]bool{"": true}
		n, _, err := decodeWalk(bytes.NewReader(data), "/r", 50, func(e *WalkEntry) error {
			p := e.Path
			if !filepath.IsLocal(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0) {
				t.Fatalf("unsafe path %q handed on", p)
			}
			if seen[p] {
				t.Fatalf("%q handed on twice", p)
			}
			parent := filepath.Dir(p)
			if parent == "." {
				parent = ""
			}
			if !dirs[parent] {
				t.Fatalf("%q handed on before its directory", p)
			}
			seen[p] = true
			if e.FileMode().IsDir() {
				dirs[p] = true
			}
			return nil
		})
		if n != len(seen) || n > 50 {
			t.Fatalf("n = %d, handed on %d (max 50)", n, len(seen))
		}
		if err == nil && len(data) > 0 && n == 0 {
			t.Fatalf("%d bytes decoded to no entry and no error", len(data))
		}
	})
}

// The stream's own errors name the method and root and say what was wrong.
func TestDecodeWalkErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   []byte
		want   string
		broken bool
		max    int // default 5
	}{
		{"escape", walkRecords(t, WalkEntry{Path: "../x", Mode: 0o644}), "not a clean relative path", false, 0},
		{"orphan", walkRecords(t, WalkEntry{Path: "a/b", Mode: 0o644}), "comes before its directory", false, 0},
		{"under a file", walkRecords(t, WalkEntry{Path: "f", Mode: 0o644}, WalkEntry{Path: "f/g", Mode: 0o644}), "comes before its directory", false, 0},
		{"twice", walkRecords(t, WalkEntry{Path: "f", Mode: 0o644}, WalkEntry{Path: "f", Mode: 0o644}), "listed twice", false, 0},
		{"length", []byte{0, 1, 0, 0}, "bad record length 65536", false, 0},
		{"cut", []byte{0, 0, 0, 9, 1}, "broke off", true, 0},
		{"too many", walkRecords(t, WalkEntry{Path: "a", Mode: 0o644}, WalkEntry{Path: "b", Mode: 0o644}), "more than 1 entries", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.max == 0 {
				tc.max = 5
			}
			_, broken, err := decodeWalk(bytes.NewReader(tc.data), "/r", tc.max, func(*WalkEntry) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), MethodWalk+" /r") || broken != tc.broken {
				t.Fatalf("err %v broken %v, want %q broken %v", err, broken, tc.want, tc.broken)
			}
		})
	}
	n, broken, err := decodeWalk(bytes.NewReader(nil), "/r", 5, func(*WalkEntry) error { return io.ErrUnexpectedEOF })
	if n != 0 || broken || err != nil {
		t.Fatalf("empty stream: %d %v %v", n, broken, err)
	}
}
