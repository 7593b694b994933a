package ssh

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/bootstrap"
)

// A start that ends before the hello says how the session ended.
func TestExplainEnd(t *testing.T) {
	noHello := fmt.Errorf("agent failed to start: %w: EOF", bootstrap.ErrNoHello)
	printed := fmt.Errorf("agent failed to start: %w; it printed: %q", bootstrap.ErrNoHello, "This account is currently not available.")
	for _, c := range []struct {
		err    error
		status int
		stderr string
		want   string
	}{
		{noHello, -1, "", "EOF"},
		{noHello, -1, "sh: 1: exec: sh: not found", "EOF (stderr: sh: 1: exec: sh: not found)"},
		{noHello, 127, "sh: not found", "(the session exited with status 127; stderr: sh: not found)"},
		{noHello, 1, "", "(the session exited with status 1 and printed nothing: the account's login shell must run"},
		{printed, 1, "", "not available.\" (the session exited with status 1)"},
	} {
		got := explainEnd(c.err, c.status, c.stderr)
		if !strings.HasSuffix(got.Error(), c.want) && !strings.Contains(got.Error(), c.want) || !errors.Is(got, bootstrap.ErrNoHello) {
			t.Errorf("explainEnd(%d, %q) = %q; want it to say %q and keep the cause", c.status, c.stderr, got, c.want)
		}
	}
	if exitStatus(nil) != 0 || exitStatus(errors.New("connection lost")) != -1 {
		t.Error("exitStatus")
	}
}
