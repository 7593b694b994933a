package bootstrap_test

import (
	stdctx "context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/bootstrap"
)

// gluedNoise is what a login script prints without a final newline: a
// terminal title escape and a greeting, both glued to the front of the
// stage's first line.
const gluedNoise = `printf '\033]0;user@host: ~\007'; printf 'Welcome, no newline here'; `

// TestGluedNoise: a cold start (its request line glued to the noise) and a
// warm one (the hello glued to it) both succeed through a real shell,
// without waiting for a timeout.
func TestGluedNoise(t *testing.T) {
	tg := newTarget(t)
	for _, cached := range []bool{false, true} {
		c := &connector{tg: tg, sh: loginShells[1], src: bootstrap.Default(), prefix: gluedNoise}
		if up, _ := dial(t, c); up == cached {
			t.Fatalf("cached=%v but uploaded=%v", cached, up)
		}
	}
}

// TestStageErrorAfterGluedNoise: the stage's error line (after its
// request, which the noise is glued to) carries the nonce, and is reported
// as the stage's error, not as a stream that ended without a hello.
func TestStageErrorAfterGluedNoise(t *testing.T) {
	tg := newTarget(t)
	root := t.TempDir()
	link := filepath.Join(root, "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	tg.dirs = `"` + link + `"`
	args := bootstrap.AgentArgs{ID: 9, Name: "glued", Nonce: bootstrap.NewNonce()}
	cmdline, err := bootstrap.RemoteCommandDirs(args, bootstrap.Default(), tg.dirs)
	if err != nil {
		t.Fatal(err)
	}
	s := tg.start(loginShells[1], gluedNoise+cmdline)
	_, err = bootstrap.RemoteStart(stdctx.Background(), s.stdin, s.stdout, args, bootstrap.Default(), "glued", nil, s.close)
	if !errors.Is(err, bootstrap.ErrAgent) || errors.Is(err, bootstrap.ErrNoHello) ||
		!strings.Contains(err.Error(), "no usable agent cache directory") || !strings.Contains(err.Error(), link+": a symlink") {
		t.Fatalf("want the stage's error about %s, got %v", link, err)
	}
}
