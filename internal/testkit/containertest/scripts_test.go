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

// TestAptMirrorOtherSuite: scripts/apt-mirror.sh gives a suite that apt
// does not list here (trixie on a bookworm machine) the mirror of the
// machine's own release, and fails with a message naming both when that
// is missing too.
func TestAptMirrorOtherSuite(t *testing.T) {
	script, err := containertest.Script("apt-mirror.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755)
	osRelease := filepath.Join(dir, "os-release")
	os.WriteFile(osRelease, []byte("ID=debian\nVERSION_CODENAME=bookworm\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "sources.list"), []byte(
		"deb http://security.example.invalid/debian-security bookworm-security main\n"+
			"deb http://own.example.invalid/debian bookworm main\n"+
			"deb http://sid.example.invalid/debian sid main\n"), 0o644)
	mirror := func(suite, osRelease string) (string, string, error) {
		cmd := exec.Command("bash", script, suite)
		cmd.Env = append(os.Environ(), "APT_ETC="+dir, "OS_RELEASE="+osRelease, "MIRROR=")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), stderr.String(), err
	}
	for _, tc := range []struct{ suite, want string }{
		{"trixie", "http://own.example.invalid/debian"},
		{"sid", "http://sid.example.invalid/debian"},
		{"bookworm", "http://own.example.invalid/debian"},
	} {
		if got, stderr, err := mirror(tc.suite, osRelease); err != nil || got != tc.want {
			t.Errorf("%s: %q, %v (%s); want %q", tc.suite, got, err, stderr, tc.want)
		}
	}
	os.WriteFile(osRelease, []byte("ID=debian\nVERSION_CODENAME=forky\n"), 0o644)
	got, stderr, err := mirror("trixie", osRelease)
	if err == nil || got != "" || !strings.Contains(stderr, "no enabled deb source for trixie nor for this machine's own forky") {
		t.Errorf("no source for trixie nor forky: %q, %v, stderr %q; want a failure that says so", got, err, stderr)
	}
}

// TestAnsibleControllerTag: scripts/test-ansible-controller.sh names its
// image by the recipe: the same suite gives the same tag, another suite
// another one (PRINT_IMAGE=1 names it without building).
func TestAnsibleControllerTag(t *testing.T) {
	script, err := containertest.Script("test-ansible-controller.sh")
	if err != nil {
		t.Fatal(err)
	}
	tag := func(suite string) string {
		cmd := exec.Command("bash", script, suite)
		cmd.Env = append(os.Environ(), "PRINT_IMAGE=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s: %v", script, suite, err)
		}
		return strings.TrimSpace(string(out))
	}
	a, b, c := tag("trixie"), tag("trixie"), tag("sid")
	if a != b || a == c || !strings.HasPrefix(a, "spindle-test/ansible-controller:trixie-") || !strings.HasPrefix(c, "spindle-test/ansible-controller:sid-") {
		t.Errorf("tags %q, %q (trixie twice), %q (sid): want one stable tag per suite, named by it", a, b, c)
	}
}
