package exec

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/services/modules/store"
)

// Stdin made of parts: bytes, a stored payload named by hash, bytes; a
// payload sent once is named by hash after; one the store lacks fails
// the call before anything runs.
func TestStdinParts(t *testing.T) {
	payload := make([]byte, 100<<10)
	rand.Read(payload)
	sum := sha256.Sum256(payload)
	ctx := context.Background()
	marker := t.TempDir() + "/ran"

	// Named before it was sent: refused, and the command did not run.
	_, err := runDirect(t, ctx, Cmd{Shell: "touch " + marker + "; cat", StdinParts: []StdinPart{{SHA256: sum[:]}}})
	if !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), store.NotStored) {
		t.Fatalf("a hash not stored: %v", err)
	}
	if res, _ := runDirect(t, ctx, Cmd{Argv: []string{"test", "-e", marker}}); res.ExitCode == 0 {
		t.Fatal("the command ran although its stdin could not be made")
	}

	// Sent with its bytes: stored, and used.
	want := "head" + string(payload) + "tail"
	res, err := runDirect(t, ctx, Cmd{Argv: []string{"cat"}, StdinParts: []StdinPart{{Data: []byte("head")}, {Data: payload, SHA256: sum[:]}, {Data: []byte("tail")}}})
	if err != nil || string(res.Stdout) != want {
		t.Fatalf("with the bytes: %v, %d bytes out", err, len(res.Stdout))
	}
	// Named by hash alone, through exec.Start too.
	p, err := Start(ctx, newLocalCaller(), Cmd{Argv: []string{"cat"}, StdinParts: []StdinPart{{Data: []byte("head")}, {SHA256: sum[:]}, {Data: []byte("tail")}}})
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	var out strings.Builder
	if err := p.CopyOutput(&out, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Wait(); err != nil || res.ExitCode != 0 || out.String() != want {
		t.Fatalf("by hash: %v, %d bytes out", err, out.Len())
	}

	// Bytes that are not what the hash says, and both Stdin and parts.
	if _, err := runDirect(t, ctx, Cmd{Argv: []string{"cat"}, StdinParts: []StdinPart{{Data: []byte("x"), SHA256: sum[:]}}}); !errors.Is(err, errkind.ErrBadArgs) {
		t.Errorf("a wrong hash: %v", err)
	}
	if _, err := runDirect(t, ctx, Cmd{Argv: []string{"cat"}, Stdin: []byte("x"), StdinParts: []StdinPart{{Data: []byte("y")}}}); !errors.Is(err, errkind.ErrBadArgs) {
		t.Errorf("Stdin and parts: %v", err)
	}
}

// A slice of a stored payload stands for those bytes; one outside it is
// refused before anything runs.
func TestStdinPartSlices(t *testing.T) {
	stored := []byte("0123456789")
	sum := sha256.Sum256(stored)
	ctx := context.Background()
	res, err := runDirect(t, ctx, Cmd{Argv: []string{"cat"}, StdinParts: []StdinPart{
		{Data: stored, SHA256: sum[:]}, {Data: []byte("|")}, {SHA256: sum[:], Offset: 2, Length: 3},
		{SHA256: sum[:], Offset: 9, Length: 1}, {SHA256: sum[:], Offset: 0, Length: 10}}})
	if want := "0123456789|23490123456789"; err != nil || string(res.Stdout) != want {
		t.Fatalf("slices: %v, %q, want %q", err, res.Stdout, want)
	}
	for _, p := range []StdinPart{
		{SHA256: sum[:], Offset: 8, Length: 3},
		{SHA256: sum[:], Offset: 11, Length: 1},
		{SHA256: sum[:], Offset: -1, Length: 2},
		{SHA256: sum[:], Offset: 2},
		{SHA256: sum[:], Offset: 1, Length: -1},
		{SHA256: sum[:], Offset: 1 << 62, Length: 1 << 62},
		{Data: []byte("x"), Offset: 0, Length: 1},
		{Data: stored, SHA256: sum[:], Length: 1},
	} {
		if _, err := runDirect(t, ctx, Cmd{Argv: []string{"cat"}, StdinParts: []StdinPart{p}}); !errors.Is(err, errkind.ErrBadArgs) {
			t.Errorf("offset %d length %d data %v: %v, want a bad argument", p.Offset, p.Length, p.Data != nil, err)
		}
	}
	var other [sha256.Size]byte
	if _, err := runDirect(t, ctx, Cmd{Argv: []string{"cat"}, StdinParts: []StdinPart{{SHA256: other[:], Offset: 1, Length: 1}}}); !strings.Contains(fmt.Sprint(err), store.NotStored) {
		t.Errorf("a slice of what the store lacks: %v", err)
	}
	// Many names of one stored payload cannot make an unbounded stdin.
	big := make([]byte, 1<<20)
	bigSum := sha256.Sum256(big)
	many := []StdinPart{{Data: big, SHA256: bigSum[:]}}
	for range MaxStdinParts >> 20 {
		many = append(many, StdinPart{SHA256: bigSum[:]})
	}
	if _, err := runDirect(t, ctx, Cmd{Argv: []string{"true"}, StdinParts: many}); !errors.Is(err, errkind.ErrTooLarge) {
		t.Errorf("%d MiB of stdin parts: %v", len(many), err)
	}
}
