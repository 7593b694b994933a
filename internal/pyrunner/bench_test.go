package pyrunner

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit/ansiballz"
)

// BenchmarkCommandModule times one pipelined run of the command module
// (running hostname) in a fork of a warm runner: from the request to the
// module's output and status, as the agent's exec server does it.
func BenchmarkCommandModule(b *testing.B) { benchCommandModule(b, 0) }

// BenchmarkCommandModuleBetweenTasks is BenchmarkCommandModule with
// 20 ms (untimed) between runs, as Ansible's own work between two tasks
// leaves them on a target: what happens between runs happens there.
func BenchmarkCommandModuleBetweenTasks(b *testing.B) { benchCommandModule(b, 20*time.Millisecond) }

func benchCommandModule(b *testing.B, gap time.Duration) {
	payload := ansiballz.Payload(b, "command", map[string]any{"_raw_params": "hostname"}, ansiballz.Python)
	prefix, zip, suffix := ansiballz.Split(b, payload)
	script := append(append([]byte{}, prefix...), suffix...) // the zip apart, as the exec server sends it
	p := &Pool{}
	defer p.Close()
	env := os.Environ()
	b.ResetTimer()
	for range b.N {
		if gap > 0 {
			b.StopTimer()
			time.Sleep(gap)
			b.StartTimer()
		}
		inR, inW, _ := os.Pipe()
		outR, outW, _ := os.Pipe()
		proc, err := p.Start(context.Background(), Spec{Interpreter: ansiballz.Python, Env: env, Zip: zip, Apart: true, ZipAt: len(prefix)}, inR, outW, outW)
		inR.Close()
		outW.Close()
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			inW.Write(script)
			inW.Close()
		}()
		io.Copy(io.Discard, outR)
		outR.Close()
		if st, err := proc.Wait(); err != nil || st.ExitStatus() != 0 {
			b.Fatalf("status %v, %v", st, err)
		}
	}
}
