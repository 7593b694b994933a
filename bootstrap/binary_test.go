package bootstrap

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"runtime"
	"strings"
	"testing"
)

func gzipOf(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A binary known by its manifest inflates only when its bytes are asked
// for, and then checks them against the manifest.
func TestLazyBinaryChecksManifest(t *testing.T) {
	data := bytes.Repeat([]byte("spindle agent "), 1000)
	sum := sha256.Sum256(data)
	good := &Binary{OS: "linux", Arch: "amd64", Hash: hex.EncodeToString(sum[:]), Size: len(data), gz: gzipOf(t, data)}
	if good.data != nil {
		t.Fatal("inflated before use")
	}
	got, err := good.Bytes()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Bytes = %d bytes, %v", len(got), err)
	}

	for name, b := range map[string]*Binary{
		"wrong hash": {OS: "linux", Arch: "amd64", Hash: strings.Repeat("0", 64), Size: len(data), gz: gzipOf(t, data)},
		"wrong size": {OS: "linux", Arch: "amd64", Hash: good.Hash, Size: len(data) - 1, gz: gzipOf(t, data)},
		"not gzip":   {OS: "linux", Arch: "amd64", Hash: good.Hash, Size: len(data), gz: data},
	} {
		if _, err := b.Bytes(); err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), "make build") {
			t.Errorf("%s: err = %v, want a corrupt-agent error saying to rebuild", name, err)
		}
	}
}

// The embedded agents (when `make build` put them there) come with a
// manifest that agrees with their bytes.
func TestEmbeddedManifestMatches(t *testing.T) {
	name := "agents/spindle-agent-" + runtime.GOOS + "-" + runtime.GOARCH
	if _, err := embedded.ReadFile(name + ".gz"); err != nil {
		t.Skip("no embedded agent in this build (make build embeds them)")
	}
	if _, err := embedded.ReadFile(name + ".sum"); err != nil {
		t.Fatalf("embedded agent without its manifest %s.sum: %v", name, err)
	}
	t.Setenv("SPINDLE_AGENT", "") // TestMain points it at a fresh build
	b, err := (&builtin{cache: map[string]*Binary{}}).load(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	if b.data != nil {
		t.Fatalf("loading the manifest inflated the agent (gz %d bytes)", len(b.gz))
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != b.Hash || len(data) != b.Size {
		t.Fatalf("manifest %s/%d, bytes %x/%d", b.Hash, b.Size, sum, len(data))
	}
}
