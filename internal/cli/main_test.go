package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/target"
	"go.uber.org/goleak"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"exit", &exitError{code: 3}, 3},
		{"usage", &usageError{err: errors.New("x")}, 2},
		{"bad target", &target.ParseError{Raw: "x", Err: errors.New("x")}, 2},
		{"connect", &connectError{err: errors.New("boom")}, 255},
		{"disconnected", &spindle.Error{Chain: "local", Err: fmt.Errorf("%w: gone", spindle.ErrDisconnected)}, 255},
		{"auth", fmt.Errorf("%w", spindle.ErrAuth), 255},
		{"not found", &spindle.Error{Chain: "local", Op: "exec.Start", Err: spindle.ErrNotFound}, 127},
		{"permission", fmt.Errorf("%w", spindle.ErrPermission), 126},
		{"other", errors.New("other"), 1},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("%s: exitCode(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestCommandExit(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  *exec.Result
		err  error
		sig  syscall.Signal
		want int
	}{
		{"zero", &exec.Result{}, nil, 0, 0},
		{"three", &exec.Result{ExitCode: 3}, nil, 0, 3},
		{"killed", &exec.Result{ExitCode: -1, Signal: "SIGKILL"}, nil, 0, 137},
		{"term", &exec.Result{ExitCode: -1, Signal: "SIGTERM"}, nil, 0, 143},
		{"unknown signal", &exec.Result{ExitCode: -1, Signal: "SIGWHAT"}, nil, 0, 128},
		{"interrupted", nil, fmt.Errorf("%w", spindle.ErrCanceled), syscall.SIGINT, 130},
		{"terminated", nil, fmt.Errorf("%w", spindle.ErrCanceled), syscall.SIGTERM, 143},
		{"disconnected", nil, fmt.Errorf("%w", spindle.ErrDisconnected), 0, 255},
		{"not found", nil, fmt.Errorf("%w", spindle.ErrNotFound), 0, 127},
	} {
		if got := exitCode(commandExit(tc.res, tc.err, tc.sig)); got != tc.want {
			t.Errorf("%s: exit status %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestFlags runs the CLI in-process for what needs no agent.
func TestFlags(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		args       []string
		code       int
		out, err   string
		notErr     string
		verbose    int
		checkLevel bool
	}{
		{args: []string{"version"}, code: 0, out: "spindle "},
		{args: []string{"--bogus"}, code: 2, err: "spindle: unknown flag: --bogus", notErr: "Error:"},
		{args: []string{"run", "local"}, code: 2, err: "needs a command"},
		{args: []string{"shell", "a", "b", "--", "true"}, code: 2, err: "exactly one TARGET"},
		{args: []string{"run", "a", "b", "--"}, code: 2, err: "run needs a command after the targets"},
		{args: []string{"run", "nosuch:x", "--", "true"}, code: 2, err: `unknown kind "nosuch"`, notErr: "Usage:"},
		{args: []string{"ping", "-c", "0", "local"}, code: 2, err: "-c must be at least 1"},
		{args: []string{"bench", "core"}, code: 1, err: `unknown command "bench"`},
		{args: []string{"info"}, code: 2, err: "exactly one TARGET"},
		{args: []string{"completion", "bash"}, code: 0, out: "bash completion"},
	} {
		var out, errb bytes.Buffer
		code := Execute(tc.args, strings.NewReader(""), &out, &errb)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, code, tc.code, errb.String())
		}
		if !strings.Contains(out.String(), tc.out) {
			t.Errorf("%v: stdout %q, want %q", tc.args, out.String(), tc.out)
		}
		if !strings.Contains(errb.String(), tc.err) {
			t.Errorf("%v: stderr %q, want %q", tc.args, errb.String(), tc.err)
		}
		if tc.notErr != "" && strings.Contains(errb.String(), tc.notErr) {
			t.Errorf("%v: stderr %q has %q", tc.args, errb.String(), tc.notErr)
		}
	}
}

func TestVerbosity(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 0}, {[]string{"-v"}, 1}, {[]string{"-vv"}, 2}, {[]string{"-vvv"}, 3}, {[]string{"-v", "-v"}, 2}, {[]string{"--verbose"}, 1},
	} {
		g := &globals{stderr: &bytes.Buffer{}}
		root := newRootCmd(g)
		if err := root.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		if g.verbose != tc.want {
			t.Errorf("%v: verbose %d, want %d", tc.args, g.verbose, tc.want)
		}
		log := g.logger()
		core := log.Core()
		if core.Enabled(-1) != (tc.want >= 2) || core.Enabled(0) != (tc.want >= 1) || !core.Enabled(1) {
			t.Errorf("%v: wrong log level", tc.args)
		}
	}
}

// A become hop refused for want of a password points at the flags that
// give one; nothing else gets that hint.
func TestBecomePasswordHint(t *testing.T) {
	authAt := func(chain string) error {
		return &spindle.Error{Chain: chain, Err: fmt.Errorf("sudo: a password is required but none was given (%w)", spindle.ErrAuth)}
	}
	for _, tc := range []struct {
		name   string
		err    error
		become becomeOptions
		want   string
	}{
		{"sudo", authAt("ssh:web1 → sudo:root"), becomeOptions{}, "sudo asked for a password: give it with -K"},
		{"su first", authAt("su:postgres"), becomeOptions{}, "su asked for a password"},
		{"doas", authAt("bastion → doas:root"), becomeOptions{}, "doas asked for a password"},
		{"asked already", authAt("ssh:web1 → sudo:root"), becomeOptions{ask: true}, ""},
		{"env given", authAt("ssh:web1 → sudo:root"), becomeOptions{passwordEnv: "PW"}, ""},
		{"ssh auth", authAt("ssh:web1"), becomeOptions{}, ""},
		{"not auth", &spindle.Error{Chain: "ssh:web1 → sudo:root", Err: spindle.ErrDisconnected}, becomeOptions{}, ""},
	} {
		g := &globals{}
		g.conn.become = tc.become
		got := g.hint(tc.err)
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: hint %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Chains that begin with the same hops share them: the second target's
// agent is started by the first target's agent, not by a second one, and
// a target named twice is one context.
func TestConnectAllSharesHops(t *testing.T) {
	g := &globals{stdout: io.Discard, stderr: io.Discard}
	s, cxs, err := g.connectAll(context.Background(), "local", "local,local", "local")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if cxs[2] != cxs[0] {
		t.Errorf("the same target twice gave two contexts")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cxs[1].Hello().PID))
	if err != nil {
		t.Fatal(err)
	}
	stat := string(b)
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+2:])
	if ppid, first := fields[1], strconv.Itoa(cxs[0].Hello().PID); ppid != first {
		t.Errorf("local,local's agent has parent %s, want local's agent %s", ppid, first)
	}
}
