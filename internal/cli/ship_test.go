package cli

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shipScript writes a script no agent has run before (agents keep
// what they materialised) and returns its path.
func shipScript(t *testing.T) string {
	nonce := make([]byte, 8)
	rand.Read(nonce)
	path := filepath.Join(t.TempDir(), "tool.sh")
	// Not executable here: only its bytes are shipped.
	if err := os.WriteFile(path, fmt.Appendf(nil, "#!/bin/sh\n# %x\necho \"$(basename \"$0\") ran: $*\"\nexit 4\n", nonce), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// --ship runs a local program on the target, from its agent's cache
// directory or, with --memfd, from memory; its exit status is the
// command's.
func TestE2ERunShip(t *testing.T) {
	tool := shipScript(t)
	out, errs, code := spindleCmd(t, "", "run", "local", "--ship", tool, "--", "a", "b")
	if code != 4 || !strings.HasSuffix(out, " ran: a b\n") || errs != "" {
		t.Errorf("--ship a script: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	out, errs, code = spindleCmd(t, "", "run", "local", "--ship", tool, "--memfd")
	if code != 4 || out != "3 ran: \n" {
		t.Errorf("--ship --memfd a script: exit %d, stdout %q, stderr %q; want it run as /proc/self/fd/3", code, out, errs)
	}
	out, errs, code = spindleCmd(t, "", "run", "local", "--memfd", "--ship", "/bin/echo", "--", "from", "echo")
	if code != 0 || out != "from echo\n" {
		t.Errorf("--ship --memfd /bin/echo: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	out, errs, code = spindleCmd(t, "", "run", "local", "local,local", "--ship", tool, "--", "many")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 4 || len(lines) != 2 || !strings.HasPrefix(lines[0], "local") || !strings.HasPrefix(lines[1], "local") || strings.Count(out, " ran: many\n") != 2 {
		t.Errorf("--ship on two targets: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if _, errs, code := spindleCmd(t, "", "run", "local", "--ship", filepath.Join(t.TempDir(), "none")); code != 1 || !strings.HasPrefix(errs, "spindle: --ship: open ") {
		t.Errorf("--ship of a missing file: exit %d, stderr %q", code, errs)
	}
	if _, errs, code := spindleCmd(t, "", "run", "local", "--memfd", "--", "true"); code != 2 || !strings.Contains(errs, "--memfd runs a program given with --ship") {
		t.Errorf("--memfd alone: exit %d, stderr %q", code, errs)
	}
}
