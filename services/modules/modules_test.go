package modules

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/localtest"
	"github.com/spindle-rpc/spindle/internal/testkit/rpctest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/modules/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if _, err := testagent.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// script is a program no agent has seen: agents keep what they
// materialised on disk across runs.
func script(t *testing.T) []byte {
	nonce := make([]byte, 8)
	rand.Read(nonce)
	return fmt.Appendf(nil, "#!/bin/sh\n# %x\necho \"ran $1\"\n", nonce)
}

// On a real agent: a hash not put yet fails as not stored, before
// anything runs; put, it runs by hash.
func TestPutAndRun(t *testing.T) {
	ctx, cx := localtest.Dial(t)
	data := script(t)
	sum := sha256.Sum256(data)
	_, err := Run(ctx, cx, sum, exec.Cmd{Argv: []string{"tool", "x"}})
	if !store.IsNotStored(err) {
		t.Fatalf("before Put: %v; want not stored", err)
	}
	if has, err := Has(ctx, cx, sum); err != nil || has {
		t.Fatalf("Has before Put: %v, %v", has, err)
	}
	got, err := Put(ctx, cx, data)
	if err != nil || got != sum {
		t.Fatalf("Put: %x, %v; want %x", got, err, sum)
	}
	if has, err := Has(ctx, cx, sum); err != nil || !has {
		t.Fatalf("Has after Put: %v, %v", has, err)
	}
	res, err := Run(ctx, cx, sum, exec.Cmd{Argv: []string{"tool", "x"}})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "ran x\n" {
		t.Fatalf("Run: %v, %+v", err, res)
	}
	if _, err := Run(ctx, cx, sum, exec.Cmd{Argv: []string{"tool"}, Exe: &exec.StdinPart{Data: data}}); !errors.Is(err, errkind.ErrBadArgs) {
		t.Errorf("Run with Exe set: %v", err)
	}
	if _, err := Run(ctx, cx, sum, exec.Cmd{Shell: "tool"}); !errors.Is(err, errkind.ErrBadArgs) {
		t.Errorf("Run without Argv: %v", err)
	}
}

// A program larger than a frame (4 MiB) crosses on the circuit.
func TestPutLarge(t *testing.T) {
	ctx, cx := localtest.Dial(t)
	data := make([]byte, 5<<20)
	rand.Read(data)
	sum, err := Put(ctx, cx, data)
	if err != nil {
		t.Fatal(err)
	}
	if has, err := Has(ctx, cx, sum); err != nil || !has {
		t.Fatalf("Has: %v, %v", has, err)
	}
}

// recorder is an rpc.Caller that notes what goes through it.
type recorder struct {
	rpc.Caller
	mu      sync.Mutex
	methods []string
	exeData int // exec calls whose Cmd.Exe carried bytes
}

func (r *recorder) note(method string, args any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.methods = append(r.methods, method)
	if c, ok := args.(*exec.Cmd); ok && c.Exe != nil && c.Exe.Data != nil {
		r.exeData++
	}
}

func (r *recorder) Call(ctx context.Context, method string, args, result any) error {
	r.note(method, args)
	return r.Caller.Call(ctx, method, args, result)
}

func (r *recorder) Stream(ctx context.Context, method string, args any) (rpc.Stream, error) {
	r.note(method, args)
	return r.Caller.Stream(ctx, method, args)
}

func (r *recorder) take() (methods []string, exeData int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	methods, exeData = r.methods, r.exeData
	r.methods, r.exeData = nil, 0
	return methods, exeData
}

// A Program's bytes cross the link once per agent: the first Run puts
// them, the next ones (and a Start) name the hash alone.
func TestProgramSendsBytesOnce(t *testing.T) {
	ctx, cx := localtest.Dial(t)
	rec := &recorder{Caller: cx}
	p := NewProgram(script(t))
	want := []string{exec.MethodRun, MethodPut, exec.MethodRun}
	for i, arg := range []string{"first", "second"} {
		res, err := p.Run(ctx, rec, exec.Cmd{Argv: []string{"tool", arg}})
		if err != nil || string(res.Stdout) != "ran "+arg+"\n" {
			t.Fatalf("run %d: %v, %+v", i, err, res)
		}
		methods, exeData := rec.take()
		if strings.Join(methods, " ") != strings.Join(want, " ") || exeData != 0 {
			t.Errorf("run %d: calls %v, %d with program bytes; want %v, none", i, methods, exeData, want)
		}
		want = []string{exec.MethodRun}
	}
	proc, err := p.Start(ctx, rec, exec.Cmd{Argv: []string{"tool", "third"}})
	if err != nil {
		t.Fatal(err)
	}
	proc.Stdin().Close()
	var out strings.Builder
	if err := proc.CopyOutput(&out, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := proc.Wait(); err != nil || res.ExitCode != 0 || out.String() != "ran third\n" {
		t.Fatalf("Start: %v, %+v, %q", err, res, out.String())
	}
	if methods, exeData := rec.take(); strings.Join(methods, " ") != MethodHas+" "+exec.MethodStart || exeData != 0 {
		t.Errorf("Start: calls %v, %d with program bytes", methods, exeData)
	}

	// A new agent of the same user finds it materialised on disk.
	ctx2, cx2 := localtest.Dial(t)
	rec2 := &recorder{Caller: cx2}
	if res, err := p.Run(ctx2, rec2, exec.Cmd{Argv: []string{"tool", "again"}}); err != nil || string(res.Stdout) != "ran again\n" {
		t.Fatalf("new agent: %v, %+v", err, res)
	}
	if methods, _ := rec2.take(); len(methods) != 1 {
		t.Errorf("new agent: calls %v; want one exec.Run", methods)
	}
}

// useStore gives the handlers a store of max bytes for the test.
func useStore(t *testing.T, max int64) {
	old := store.Default
	store.Default = store.New(max)
	t.Cleanup(func() { store.Default = old })
}

// modules.Put refuses what does not fit before reading it, bytes that
// are not what their hash says, and a short stream; nothing is stored.
func TestPutRefused(t *testing.T) {
	useStore(t, 100)
	ctx := context.Background()
	c := rpctest.New(Register)
	if _, err := Put(ctx, c, make([]byte, 101)); !errors.Is(err, errkind.ErrTooLarge) || !strings.Contains(err.Error(), "100 bytes") {
		t.Errorf("101 bytes in a store of 100: %v", err)
	}
	if _, err := Put(ctx, c, make([]byte, 100)); err != nil {
		t.Errorf("100 bytes: %v", err)
	}
	send := func(args *PutArgs, data string) error {
		st, err := c.Stream(ctx, MethodPut, args)
		if err != nil {
			return err
		}
		st.Write([]byte(data))
		st.Close()
		return st.Wait(nil)
	}
	other := sha256.Sum256([]byte("other"))
	if err := send(&PutArgs{SHA256: other[:], Size: 4}, "data"); !errors.Is(err, errkind.ErrBadArgs) || !strings.Contains(err.Error(), "hash to") {
		t.Errorf("a wrong hash: %v", err)
	}
	sum := sha256.Sum256([]byte("data"))
	if err := send(&PutArgs{SHA256: sum[:], Size: 4}, "da"); err == nil || !strings.Contains(err.Error(), "ended after 2 of 4") {
		t.Errorf("cut short: %v", err)
	}
	for _, a := range []*PutArgs{{SHA256: sum[:5], Size: 4}, {SHA256: sum[:], Size: -1}} {
		if err := send(a, ""); !errors.Is(err, errkind.ErrBadArgs) {
			t.Errorf("%+v: %v", a, err)
		}
	}
	if err := c.Call(ctx, MethodPut, &PutArgs{SHA256: sum[:], Size: 4}, nil); !errors.Is(err, errkind.ErrBadArgs) {
		t.Errorf("without a circuit: %v", err)
	}
	if store.Default.Len() != 1 {
		t.Errorf("%s; want the 100 bytes alone", store.Default)
	}
	if _, err := Has(ctx, c, [32]byte{}); err != nil {
		t.Error(err)
	}
	if err := c.Call(ctx, MethodHas, &HasArgs{SHA256: sum[:3]}, nil); !errors.Is(err, errkind.ErrBadArgs) {
		t.Errorf("Has with a short hash: %v", err)
	}
}
