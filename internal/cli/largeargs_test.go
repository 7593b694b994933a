package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit"
)

// argsOf returns n arguments of 999 bytes: n kB of command line.
func argsOf(n int) []string {
	a := make([]string, n)
	for i := range a {
		a[i] = strings.Repeat("x", 999)
	}
	return a
}

// A command line of 1.5 MiB (Linux takes 2 MiB by default) runs; one
// over the frame limit (4 MiB; a raised stack limit lets the CLI itself
// take it) fails at once, before anything runs, with an error naming the
// limit: directly and through the daemon, whose own frame limit is larger.
func TestRunLargeArguments(t *testing.T) {
	directAndPersist(t, func(t *testing.T, tc way) {
		env := tc.env(t)
		run := append(append([]string{"run"}, tc.flags...), "local", "--", "/bin/echo")

		out, errs, code := spindleEnv(t, env, "", append(append([]string{"-v"}, run...), argsOf(1500)...)...)
		if code != 0 || len(out) != 1500*1000 {
			t.Fatalf("1.5 MiB of arguments: exit %d, %d bytes of output (want 0, %d); stderr:\n%.2000s", code, len(out), 1500*1000, errs)
		}
		daemon := strings.Contains(errs, "through the daemon") && !strings.Contains(errs, "not through the daemon")
		if daemon != (tc.flags != nil) {
			t.Errorf("1.5 MiB of arguments with %q: through the daemon %v; stderr:\n%.2000s", tc.flags, daemon, errs)
		}

		file := filepath.Join(t.TempDir(), "args")
		if err := os.WriteFile(file, []byte(strings.Join(argsOf(4600), " ")), 0o600); err != nil {
			t.Fatal(err)
		}
		sh := []string{"-c", `ulimit -s 65536 || exit 99; exec "$0" "$@" $(cat "$ARGS")`, filepath.Join(binDir, "spindle")}
		out, errs, code = shellEnv(t, append(env, "ARGS="+file), append(sh, run...)...)
		testkit.Need(t, code != 99, "a stack limit of 64 MiB, for a command line of 4.6 MiB (ulimit -Hs)")
		if code == 0 || out != "" {
			t.Fatalf("4.6 MiB of arguments: exit %d, %d bytes of output; want a failure before anything ran", code, len(out))
		}
		if !strings.Contains(errs, "exceeds the frame limit of local, 4.0 MiB") {
			t.Errorf("4.6 MiB of arguments: the error does not name the limit:\n%s", errs)
		}
	})
}

// shellEnv runs sh with args and env, bounded as spindleEnv is.
func shellEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return commandIn(t, "", env, "", "/bin/sh", args...)
}
