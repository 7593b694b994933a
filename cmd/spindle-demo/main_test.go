package main

import (
	"bytes"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit"
)

// TestDemo runs the demo program as `make demo` does: it needs no sshd.
// The agent comes from the embedded agents or, in a plain `go test`, from
// a spindle-agent built here.
func TestDemo(t *testing.T) {
	testkit.Need(t, !testing.Short(), "TestDemo builds and runs the demo binaries: not under -short")
	dir := t.TempDir()
	out, err := osexec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	for _, b := range [][2]string{{"spindle-agent", "./cmd/spindle-agent"}, {"spindle-demo", "./cmd/spindle-demo"}} {
		cmd := osexec.Command("go", "build", "-race", "-o", filepath.Join(dir, b[0]), b[1])
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	cmd := osexec.Command(filepath.Join(dir, "spindle-demo"))
	cmd.Env = append(os.Environ(), "SPINDLE_AGENT="+filepath.Join(dir, "spindle-agent"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("spindle-demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	got := stdout.String()
	t.Logf("demo output:\n%s", got)
	for _, re := range []string{
		`(?m)^connect, cold \(agent uploaded\): +[0-9.]+(µs|ms|s) +cached as /\S+/agent-`,
		`(?m)^connect, cached: +[0-9.]+(µs|ms|s)$`,
		`(?m)^call latency \(sys\.Ping, median of 1000\): [0-9.]+(µs|ms|s)$`,
		`(?m)^run uname -a \([0-9.]+(µs|ms|s)\): ` + regexp.QuoteMeta(unameS(t)) + ` `,
	} {
		if !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("demo output does not match %s", re)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("demo wrote to stderr: %q", stderr.String())
	}
	// Its salted agent, of no use to anyone later, is gone.
	if m := regexp.MustCompile(`cached as (/\S+)`).FindStringSubmatch(got); m != nil {
		if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
			t.Errorf("the demo left its agent %s behind (%v)", m[1], err)
		}
	}
}

func unameS(t *testing.T) string {
	out, err := osexec.Command("uname", "-s").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
