package containertest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/containertest"
)

// TestDebianImageMirror: scripts/test-image-debian.sh takes its mirror
// from apt's sources (one-line and deb822), the entry for the suite
// itself, and stops with a clear message when apt has none.
func TestDebianImageMirror(t *testing.T) {
	script, err := containertest.Script("test-image-debian.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what  string
		files map[string]string // under APT_ETC
		env   []string
		want  string // the mirror; "" for the failure
	}{
		{"deb822, security and updates beside", map[string]string{"sources.list.d/debian.sources": `Types: deb
# a comment
URIs: http://mirror.example.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example.invalid/debian-security
Suites: bookworm-security
Components: main
`}, nil, "http://mirror.example.invalid/debian"},
		{"deb822: disabled, deb-src, other suites skipped; field case and continuation lines", map[string]string{
			"sources.list.d/a.sources": `Types: deb
URIs: http://security.example.invalid/debian-security
Suites: bookworm-security
Components: main

Types: deb
Enabled: no
URIs: http://disabled.example.invalid/debian
Suites: bookworm

Types: deb-src
URIs: http://src.example.invalid/debian
Suites: bookworm

types: deb
uris:
 https://two.example.invalid/debian/
 http://three.example.invalid/debian
suites: bullseye
 bookworm
components: main
`}, nil, "https://two.example.invalid/debian"},
		{"one-line with options", map[string]string{"sources.list": `# deb http://commented.example.invalid/debian bookworm main
deb-src http://src.example.invalid/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://one.example.invalid/debian bookworm main contrib
`}, nil, "http://one.example.invalid/debian"},
		{"sources.list.d/*.list", map[string]string{"sources.list.d/x.list": "deb http://list.example.invalid/debian bookworm main\n"},
			nil, "http://list.example.invalid/debian"},
		{"MIRROR wins", map[string]string{"sources.list": "deb http://one.example.invalid/debian bookworm main\n"},
			[]string{"MIRROR=http://given.example.invalid/debian"}, "http://given.example.invalid/debian"},
		{"only other suites and disabled files", map[string]string{
			"sources.list.d/node.sources":             "Types: deb\nURIs: https://node.example.invalid/node\nSuites: nodistro\n",
			"sources.list.d/x.list.disabled-by-admin": "deb http://off.example.invalid/debian bookworm main\n",
		}, nil, ""},
		{"no apt configuration", nil, nil, ""},
	} {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755)
		for name, text := range tc.files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("bash", script)
		cmd.Env = append(append(os.Environ(), "PRINT_MIRROR=1", "APT_ETC="+dir, "MIRROR="), tc.env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		got := strings.TrimSpace(string(out))
		switch {
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%s: %q, %v (%s); want %q", tc.what, got, err, stderr.String(), tc.want)
		case tc.want == "" && (err == nil || got != "" || !strings.Contains(stderr.String(), "apt has no enabled deb source for bookworm") ||
			!strings.Contains(stderr.String(), "set MIRROR")):
			t.Errorf("%s: %q, %v, stderr %q; want a failure that says so", tc.what, got, err, stderr.String())
		}
	}
}
