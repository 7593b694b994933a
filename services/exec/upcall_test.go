package exec_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/modules"
	"github.com/spindle-rpc/spindle/services/modules/store"
)

// TestStoreEntryFetchedUpward: controller → top → middle → bottom, real
// agents. Bytes stored in the top agent alone are named by hash in a
// call to the bottom, which asks the middle, which asks the top: the
// command gets them, and the middle and the bottom now hold them. The
// controller is never asked: a hash nobody holds fails as it always did.
func TestStoreEntryFetchedUpward(t *testing.T) {
	path, err := testagent.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	top, closeTop, err := spindle.Dial(ctx, local.Options{Agent: bootstrap.FromFile(path, runtime.GOOS, runtime.GOARCH)}, spindle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeTop()
	middle, err := top.Connect(ctx, local.Options{ContextName: "middle"})
	if err != nil {
		t.Fatal(err)
	}
	bottom, err := middle.Connect(ctx, local.Options{ContextName: "bottom"})
	if err != nil {
		t.Fatal(err)
	}

	data := make([]byte, 200<<10)
	rand.Read(data)
	sum, err := modules.Put(ctx, top, data)
	if err != nil {
		t.Fatal(err)
	}
	for name, cx := range map[string]*spindle.Context{"middle": middle, "bottom": bottom} {
		if has, err := modules.Has(ctx, cx, sum); err != nil || has {
			t.Fatalf("the %s holds the bytes before the run: %v, %v", name, has, err)
		}
	}
	res, err := exec.Run(ctx, bottom, exec.Cmd{Shell: "sha256sum", StdinParts: []exec.StdinPart{{SHA256: sum[:]}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(res.Stdout)); res.ExitCode != 0 || len(got) == 0 || got[0] != hex.EncodeToString(sum[:]) {
		t.Fatalf("the bottom's command read other bytes: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	for name, cx := range map[string]*spindle.Context{"middle": middle, "bottom": bottom} {
		if has, err := modules.Has(ctx, cx, sum); err != nil || !has {
			t.Errorf("the %s does not hold the bytes after the run: %v, %v", name, has, err)
		}
	}

	// A program by hash (Cmd.Exe), stored in the top alone.
	script := []byte("#!/bin/sh\necho upcall-exe \"$1\" " + hex.EncodeToString(sum[:8]) + "\n")
	exeSum, err := modules.Put(ctx, top, script)
	if err != nil {
		t.Fatal(err)
	}
	res, err = exec.Run(ctx, bottom, exec.Cmd{Argv: []string{"prog", "arg"}, Exe: &exec.StdinPart{SHA256: exeSum[:]}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "upcall-exe arg " + hex.EncodeToString(sum[:8]) + "\n"; string(res.Stdout) != want {
		t.Fatalf("the program by hash printed %q %q, want %q", res.Stdout, res.Stderr, want)
	}

	// Nobody holds it: not found, as without upcalls, on the bottom and
	// on the top (whose parent, the controller, it does not ask).
	missing := sha256.Sum256([]byte("nobody stored this"))
	for name, cx := range map[string]*spindle.Context{"bottom": bottom, "top": top} {
		_, err := exec.Run(ctx, cx, exec.Cmd{Shell: "cat", StdinParts: []exec.StdinPart{{SHA256: missing[:]}}})
		if !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), store.NotStored) {
			t.Fatalf("%s: a hash nobody holds: %v, want not found with %q", name, err, store.NotStored)
		}
	}
}
