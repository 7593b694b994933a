package exec

import (
	"context"
	osexec "os/exec"
	"testing"

	"github.com/spindle-rpc/spindle/rpc"
)

// BenchmarkRunTrue measures exec.Run's handler; compare with
// BenchmarkForkExecTrue for its overhead over a bare fork/exec.
func BenchmarkRunTrue(b *testing.B) {
	call, _, err := rpc.NewCall(MethodRun, &Cmd{Argv: []string{"/bin/true"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		res, err := handleRun(ctx, call)
		if err != nil || res.(*Result).ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkForkExecTrue is os/exec collecting both streams, as exec.Run does.
func BenchmarkForkExecTrue(b *testing.B) {
	for b.Loop() {
		cmd := osexec.Command("/bin/true")
		var out, errb boundedBuffer
		out.max, errb.max = 1<<20, 1<<20
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForkExecTrueBare is os/exec with no output collected.
func BenchmarkForkExecTrueBare(b *testing.B) {
	for b.Loop() {
		if err := osexec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
