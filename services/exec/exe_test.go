package exec

import (
	"context"
	"crypto/sha256"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/services/modules/store"
)

// A program shipped in the call runs from the agent's cache directory;
// the next call names it by hash alone.
func TestExeFromStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "exe")
	old := store.ExeDir
	store.ExeDir = func() (string, error) { return dir, nil }
	defer func() { store.ExeDir = old }()
	c := newLocalCaller()
	ctx := context.Background()
	// A script prints where it runs from ($0) and its argument; a
	// binary would see Argv[0] as its argv[0].
	script := []byte("#!/bin/sh\necho \"$0\" \"$1\"\n")
	sum := sha256.Sum256(script)
	res, err := Run(ctx, c, Cmd{Argv: []string{"tool", "first"}, Exe: &StdinPart{Data: script, SHA256: sum[:]}})
	want := dir + "/"
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), want) || !strings.HasSuffix(string(res.Stdout), " first\n") {
		t.Fatalf("with its bytes: %v, %+v", err, res)
	}
	res, err = Run(ctx, c, Cmd{Argv: []string{"tool", "second"}, Exe: &StdinPart{SHA256: sum[:]}})
	if err != nil || !strings.HasSuffix(string(res.Stdout), " second\n") {
		t.Fatalf("by hash: %v, %+v", err, res)
	}
	// argv[0] is the caller's, for a binary.
	sh, err := Run(ctx, c, Cmd{Argv: []string{"sh", "-c", "cat /bin/sh"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err = Run(ctx, c, Cmd{Argv: []string{"my-shell", "-c", `echo "$0"`}, Exe: &StdinPart{Data: sh.Stdout}})
	if err != nil || string(res.Stdout) != "my-shell\n" {
		t.Fatalf("argv[0]: %v, %+v", err, res)
	}
	unknown := sha256.Sum256([]byte("nothing"))
	for _, tc := range []struct {
		name string
		cmd  Cmd
		kind error
		text string
	}{
		{"unknown hash", Cmd{Argv: []string{"x"}, Exe: &StdinPart{SHA256: unknown[:]}}, errkind.ErrNotFound, store.NotStored},
		{"wrong hash", Cmd{Argv: []string{"x"}, Exe: &StdinPart{Data: script, SHA256: unknown[:]}}, errkind.ErrBadArgs, "hash to"},
		{"with a shell", Cmd{Shell: "x", Exe: &StdinPart{SHA256: sum[:]}}, errkind.ErrBadArgs, "needs Argv"},
		{"a slice", Cmd{Argv: []string{"x"}, Exe: &StdinPart{SHA256: sum[:], Length: 3}}, errkind.ErrBadArgs, "slice"},
	} {
		if _, err := Run(ctx, c, tc.cmd); !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v; want %v with %q", tc.name, err, tc.kind, tc.text)
		}
	}
}
