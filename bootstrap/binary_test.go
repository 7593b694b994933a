package bootstrap

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit"
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
		testkit.Unavailable(t, "no embedded agent for "+runtime.GOOS+"/"+runtime.GOARCH+" in this build: run `make build` (make test does), which embeds them")
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

type noAgents struct{}

func (noAgents) Agent(goos, goarch string) (*Binary, error) {
	return nil, fmt.Errorf("%w for %s/%s", ErrNoAgent, goos, goarch)
}

// A hop's agent knows other platforms' agents by manifest, fetches the
// bytes once when a target needs them, checks them, and serves later hops
// from RAM without asking again.
func TestWithManifestsFetchesOnce(t *testing.T) {
	data := bytes.Repeat([]byte("riscv agent "), 3000)
	sum := sha256.Sum256(data)
	m := Manifest{OS: "linux", Arch: "riscv64", Hash: hex.EncodeToString(sum[:]), Size: len(data)}
	fetches := 0
	src := WithManifests(noAgents{}, []Manifest{m}, func(goos, goarch string) ([]byte, error) {
		fetches++
		if goos != "linux" || goarch != "riscv64" {
			t.Errorf("fetch %s/%s", goos, goarch)
		}
		return gzipOf(t, data), nil
	})
	if _, err := src.Agent("linux", "arm64"); !errors.Is(err, ErrNoAgent) {
		t.Fatalf("a platform with no manifest: %v", err)
	}
	b, err := src.Agent("linux", "riscv64")
	if err != nil || b.Hash != m.Hash || b.Size != m.Size {
		t.Fatalf("Agent = %+v, %v", b, err)
	}
	if !strings.Contains(stagePlatforms(src), m.Hash) || fetches != 0 {
		t.Fatalf("the first stage must name the agent without fetching it (%d fetches)", fetches)
	}
	gz, err := gzipped(b)
	if err != nil || len(gz) == 0 || fetches != 1 {
		t.Fatalf("gzip form: %d bytes, %v, %d fetches", len(gz), err, fetches)
	}
	// Another hop (another helper, which would fail) is served from RAM.
	again := WithManifests(noAgents{}, []Manifest{m}, func(string, string) ([]byte, error) {
		t.Error("fetched again")
		return nil, errors.New("gone")
	})
	b2, err := again.Agent("linux", "riscv64")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b2.Bytes(); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("cached agent: %d bytes, %v", len(got), err)
	}

	// Bytes that do not match the manifest are refused, clearly.
	bad := Manifest{OS: "linux", Arch: "ppc64le", Hash: strings.Repeat("ab", 32), Size: len(data)}
	b3, err := WithManifests(noAgents{}, []Manifest{bad}, func(string, string) ([]byte, error) { return gzipOf(t, data), nil }).Agent("linux", "ppc64le")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gzipped(b3); err == nil || !strings.Contains(err.Error(), "from the controller") || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("mismatching bytes: %v", err)
	}
	if _, ok := fetched.Load(bad.Hash); ok {
		t.Fatal("a corrupt agent was kept")
	}
}

// Payload sends zstd where the target has zstd and the binary a zstd
// form, else gzip where it has gzip, else the binary itself; never xz.
func TestPayloadChoice(t *testing.T) {
	data := bytes.Repeat([]byte("spindle agent "), 1000)
	zst := []byte("a zstd form")
	withZst := func() *Binary {
		b := newBinary("linux", "amd64", data)
		b.readGz = func() ([]byte, error) { return gzipOf(t, data), nil }
		b.readZst = func() ([]byte, error) { return zst, nil }
		return b
	}
	gzOnly := func() *Binary {
		b := newBinary("linux", "amd64", data)
		b.readGz = func() ([]byte, error) { return gzipOf(t, data), nil }
		return b
	}
	for _, tc := range []struct {
		name   string
		bin    *Binary
		offers []string
		want   string
	}{
		{"zstd first", withZst(), []string{"gzip", "xz", "zstd", ""}, "zstd"},
		{"no zstd on the target", withZst(), []string{"gzip", "xz", ""}, "gzip"},
		{"no zstd form", gzOnly(), []string{"gzip", "zstd", ""}, "gzip"},
		{"zstd only", withZst(), []string{"zstd", ""}, "zstd"},
		{"xz only", withZst(), []string{"xz", ""}, "raw"},
		{"none", withZst(), []string{"none"}, "raw"},
	} {
		payload, format, err := tc.bin.Payload(tc.offers)
		if err != nil || format != tc.want {
			t.Errorf("%s: format %q, %v; want %q", tc.name, format, err, tc.want)
			continue
		}
		switch format {
		case "zstd":
			if !bytes.Equal(payload, zst) {
				t.Errorf("%s: not the zstd form", tc.name)
			}
		case "raw":
			if !bytes.Equal(payload, data) {
				t.Errorf("%s: not the binary", tc.name)
			}
		}
	}
	broken := newBinary("linux", "amd64", data)
	broken.readZst = func() ([]byte, error) { return nil, errors.New("file does not exist") }
	if _, _, err := broken.Payload([]string{"gzip", "zstd"}); err == nil || !strings.Contains(err.Error(), "linux/amd64") || !strings.Contains(err.Error(), "make build") {
		t.Errorf("unreadable zstd form: %v", err)
	}
}
