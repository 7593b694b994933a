package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
)

// binDir holds the spindle, spindle-bench and spindle-agent binaries that
// TestMain builds: the bench's cli_* rows run spindle beside it.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "spindle-bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, b := range [][2]string{{"spindle-agent", "./cmd/spindle-agent"}, {"spindle", "./cmd/spindle"}, {"spindle-bench", "./cmd/spindle-bench"}} {
		if _, err := testagent.BuildInto(dir, b[1], b[0]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	binDir = dir
	os.Setenv("SPINDLE_AGENT", filepath.Join(dir, "spindle-agent"))
	return m.Run()
}

// benchCmd runs the built spindle-bench with args and returns its stdout,
// stderr and exit status.
func benchCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := osexec.Command(filepath.Join(binDir, "spindle-bench"), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		ee, ok := err.(*osexec.ExitError)
		if !ok {
			t.Fatalf("spindle-bench %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

func TestE2EBench(t *testing.T) {
	// The core group only: the ssh group has its own test below.
	out, errs, code := benchCmd(t, "core", "--rounds", "1", "--n", "50")
	if code != 0 {
		t.Fatalf("bench: exit %d, stderr %q", code, errs)
	}
	names := map[string]bool{}
	for _, line := range benchLines(t, out) {
		row := line.row
		for _, f := range []string{"name", "spindle_ns", "baseline", "baseline_ns", "ratio"} {
			if _, ok := row[f]; !ok {
				t.Errorf("bench line %q has no %s", line.text, f)
			}
		}
		if ns, _ := row["spindle_ns"].(float64); ns <= 0 {
			t.Errorf("bench line %q: spindle_ns %v", line.text, row["spindle_ns"])
		}
		name, _ := row["name"].(string)
		names[name] = true
		if name == "ping_pipelined_64" {
			if cps, _ := row["calls_per_sec"].(float64); cps <= 0 {
				t.Errorf("ping_pipelined_64 has no calls_per_sec: %q", line.text)
			}
		}
	}
	for _, n := range []string{"ping_rtt", "exec_true", "ping_pipelined_64"} {
		if !names[n] {
			t.Errorf("bench output has no %s row:\n%s", n, out)
		}
	}
}

// TestE2EBenchSSH runs the ssh group once, against a throwaway sshd that
// the bench starts itself (root and /usr/sbin/sshd needed).
func TestE2EBenchSSH(t *testing.T) {
	sshtest.Require(t)
	out, errs, code := benchCmd(t, "ssh", "--rounds", "1", "--n", "5")
	if code != 0 {
		t.Fatalf("bench ssh: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	rows := map[string]map[string]any{}
	for _, line := range benchLines(t, out) {
		row := line.row
		for _, f := range []string{"name", "spindle_ns", "baseline", "baseline_ns", "ratio", "latency_ms"} {
			if _, ok := row[f]; !ok {
				t.Errorf("bench line %q has no %s", line.text, f)
			}
		}
		if ns, _ := row["spindle_ns"].(float64); ns <= 0 {
			t.Errorf("bench line %q: spindle_ns %v", line.text, row["spindle_ns"])
		}
		if ns, _ := row["baseline_ns"].(float64); ns <= 0 {
			t.Errorf("bench line %q: baseline_ns %v", line.text, row["baseline_ns"])
		}
		rows[row["name"].(string)] = row
	}
	for _, n := range []string{"ssh_true_seq", "ssh_true_seq_xcrypto", "ssh_connect_cached", "ssh_connect_cold",
		"rtt_floor_10ms", "ssh_true_seq_10ms", "ssh_true_seq_xcrypto_10ms", "ssh_connect_cached_10ms", "ssh_connect_cold_10ms",
		"become_sudo_true", "ssh_true_floor", "ssh_true_floor_10ms"} {
		row, ok := rows[n]
		if !ok {
			t.Errorf("bench ssh output has no %s row:\n%s", n, out)
			continue
		}
		want := 0.0
		if strings.HasSuffix(n, "_10ms") {
			want = 10
		}
		if row["latency_ms"] != want {
			t.Errorf("%s: latency_ms %v, want %v", n, row["latency_ms"], want)
		}
	}
	for _, n := range []string{"ssh_connect_cold", "ssh_connect_cold_10ms"} {
		for _, f := range []string{"extra_ns", "openssh_push_ns", "push_ratio"} {
			if _, ok := rows[n][f]; !ok {
				t.Errorf("%s has no %s: %v", n, f, rows[n])
			}
		}
	}
	// A floor row bounds its row from below: a spawn and an SSH round
	// trip cannot cost more than the ControlMaster's whole command.
	for _, n := range []string{"ssh_true_floor", "ssh_true_floor_10ms"} {
		if r, _ := rows[n]["floor_ratio"].(float64); r <= 0 || r >= 1 {
			t.Errorf("%s: floor_ratio %v, want within (0, 1): %v", n, rows[n]["floor_ratio"], rows[n])
		}
	}
	if f, _ := rows["ssh_true_floor_10ms"]["baseline_ns"].(float64); f < 9e6 {
		t.Errorf("ssh_true_floor_10ms: the floor took %v ns, want ≥ 9 ms (it crosses the proxy)", f)
	}
	// 10 ms of added round trip must show: nothing crosses it in less.
	if f, _ := rows["rtt_floor_10ms"]["baseline_ns"].(float64); f < 9e6 {
		t.Errorf("rtt_floor_10ms: a TCP echo through the latency proxy took %v ns, want ≥ 9 ms", f)
	}
}

// Without --ssh-target and without what a throwaway sshd needs, the ssh
// group is refused with a word on how to give it a target; run without
// groups named, the bench skips it with that word and runs the rest.
func TestBenchSSHNeedsTarget(t *testing.T) {
	old := sshdAvailable
	sshdAvailable = func() error { return errors.New("not running as root") }
	defer func() { sshdAvailable = old }()
	var out, errb bytes.Buffer
	code := Execute([]string{"ssh", "--rounds", "1"}, strings.NewReader(""), &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "--ssh-target") || !strings.Contains(errb.String(), "not running as root") {
		t.Errorf("ssh without a target: exit %d, stderr %q", code, errb.String())
	}
	cases, err := selectCases(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sshBenchAvailable(sshBenchFlags{}); err == nil || !slices.ContainsFunc(cases, benchCase.needsSSH) {
		t.Fatalf("the default selection has no ssh rows to skip, or the ssh group is available: %v", err)
	}
	if err := sshBenchAvailable(sshBenchFlags{target: "web1"}); err != nil {
		t.Errorf("with --ssh-target: %v", err)
	}
}

// Bad arguments are usage errors; completion lists groups and rows.
func TestBenchArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"nosuch"}, 2, `unknown benchmark "nosuch"`},
		{[]string{"--rounds", "0", "core"}, 2, "--rounds must be at least 1"},
	} {
		var out, errb bytes.Buffer
		if code := Execute(tc.args, strings.NewReader(""), &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.err) {
			t.Errorf("%q: exit %d, stderr %q; want %d, %q", tc.args, code, errb.String(), tc.code, tc.err)
		}
	}
	for _, tc := range []struct {
		arg  string
		want []string
	}{
		{"copy_1m", []string{"copy_1m_between", "copy_1m_between_10ms"}},
		{"file", []string{"files", "files_big"}},
	} {
		var out, errb bytes.Buffer
		if code := Execute([]string{"__complete", tc.arg}, strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("__complete %s: exit %d, %s", tc.arg, code, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if got := lines[:len(lines)-1]; !slices.Equal(got, tc.want) || lines[len(lines)-1] != ":4" {
			t.Errorf("__complete %s: %q", tc.arg, lines)
		}
	}
}

// benchLine is one line of the bench's JSON output, decoded.
type benchLine struct {
	text string
	row  map[string]any
}

// benchLines decodes the bench's output, a JSON object per line.
func benchLines(t *testing.T, out string) []benchLine {
	t.Helper()
	var lines []benchLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("bench line %q: %v", sc.Text(), err)
		}
		lines = append(lines, benchLine{sc.Text(), row})
	}
	return lines
}
