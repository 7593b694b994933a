package pyrunner

import (
	"archive/zip"
	"bytes"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
)

func zipOf(t testing.TB, files map[string]string) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for name, data := range files {
		f, err := w.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(data))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFamily(t *testing.T) {
	base := map[string]string{"ansible/__init__.py": "", "ansible/module_utils/basic.py": "x = 1\n", "ansible/modules/command.py": "a"}
	f1, err := Family(zipOf(t, base))
	if err != nil {
		t.Fatal(err)
	}
	base["ansible/modules/command.py"] = "another module"
	base["ansible/modules/stat.py"] = "and one more"
	if f2, err := Family(zipOf(t, base)); err != nil || f2 != f1 {
		t.Errorf("another module with the same module_utils is another family (%v)", err)
	}
	base["ansible/module_utils/basic.py"] = "x = 2\n"
	if f3, err := Family(zipOf(t, base)); err != nil || f3 == f1 {
		t.Errorf("other module_utils are the same family (%v)", err)
	}
	if _, err := Family(zipOf(t, map[string]string{"ansible/modules/x.py": ""})); err == nil {
		t.Error("a zip without ansible.module_utils.basic has a family")
	}
	if _, err := Family([]byte("PK\x03\x04 not a zip")); err == nil {
		t.Error("bytes that are no zip have a family")
	}
}

// familyAllocs: the zip's directory in proportion to the input, and one
// decompressor and copy buffer at a time, whatever sizes entries claim.
var familyAllocs = allocs.Bound{Base: 1 << 20, PerByte: 64}

func FuzzFamily(f *testing.F) {
	f.Add(zipOf(f, map[string]string{"ansible/__init__.py": "", "ansible/module_utils/basic.py": "x = 1\n", "ansible/modules/command.py": "a"}))
	f.Add([]byte("PK\x05\x06\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		allocs.Within(t, familyAllocs, len(b), "Family", func() { Family(b) }) //nolint:errcheck // any error is fine, a panic or a large allocation is not
	})
}
