package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binDir holds the spindle and spindle-agent binaries that TestMain builds
// for the end-to-end tests.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "spindle-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	os.Setenv("SPINDLE_AGENT", filepath.Join(dir, "spindle-agent"))
	return m.Run()
}

func buildBinaries(dir string) error {
	out, err := osexec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	for _, b := range [][2]string{{"spindle-agent", "./cmd/spindle-agent"}, {"spindle", "./cmd/spindle"}} {
		cmd := osexec.Command("go", "build", "-o", filepath.Join(dir, b[0]), b[1])
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	return nil
}

// spindleCmd runs the built CLI with args and stdin, and returns its
// stdout, stderr and exit status.
func spindleCmd(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := osexec.Command(filepath.Join(binDir, "spindle"), args...)
	var out, errb bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = 0
	if err != nil {
		ee, ok := err.(*osexec.ExitError)
		if !ok {
			t.Fatalf("spindle %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

func TestE2ERunStreamsAndExitStatus(t *testing.T) {
	out, errs, code := spindleCmd(t, "", "run", "local", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	if code != 3 || out != "out\n" || errs != "err\n" {
		t.Errorf("got exit %d, stdout %q, stderr %q; want 3, %q, %q", code, out, errs, "out\n", "err\n")
	}
}

func TestE2ERunStdin(t *testing.T) {
	out, errs, code := spindleCmd(t, "hi\n", "run", "local", "--", "cat")
	if code != 0 || out != "hi\n" {
		t.Errorf("got exit %d, stdout %q, stderr %q; want 0, %q", code, out, errs, "hi\n")
	}
	big := strings.Repeat("0123456789abcdef", 1<<14) // 256 KiB
	out, errs, code = spindleCmd(t, big, "run", "local", "--", "cat")
	if code != 0 || out != big {
		t.Errorf("256 KiB through cat: exit %d, %d bytes out, stderr %q", code, len(out), errs)
	}
}

func TestE2ERunSignalAndNotFound(t *testing.T) {
	if _, _, code := spindleCmd(t, "", "run", "local", "--", "sh", "-c", "kill -KILL $$"); code != 137 {
		t.Errorf("killed by SIGKILL: exit %d, want 137", code)
	}
	_, errs, code := spindleCmd(t, "", "run", "local", "--", "/no/such/command")
	if code != 127 || !strings.HasPrefix(errs, "spindle: ") {
		t.Errorf("missing command: exit %d, stderr %q; want 127 and a spindle: message", code, errs)
	}
}

func TestE2EConnectFailure(t *testing.T) {
	cmd := osexec.Command(filepath.Join(binDir, "spindle"), "ping", "local")
	cmd.Env = append(os.Environ(), "SPINDLE_AGENT="+filepath.Join(binDir, "no-such-agent"))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	ee, ok := err.(*osexec.ExitError)
	if !ok || ee.ExitCode() != 255 || !strings.HasPrefix(errb.String(), "spindle: ") || strings.Contains(errb.String(), "Usage:") {
		t.Errorf("connect failure: %v, stderr %q; want exit 255 and one spindle: line", err, errb.String())
	}
}

func TestE2EPing(t *testing.T) {
	out, errs, code := spindleCmd(t, "", "ping", "-c", "3", "local")
	if code != 0 || strings.Count(out, "time=") != 3 || !strings.Contains(out, "min/median/max") {
		t.Errorf("ping: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestE2EInfoJSON(t *testing.T) {
	out, errs, code := spindleCmd(t, "", "info", "local", "--json")
	if code != 0 {
		t.Fatalf("info: exit %d, stderr %q", code, errs)
	}
	var info infoJSON
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("info --json: %v\n%s", err, out)
	}
	if info.UID != os.Getuid() || info.OS == "" || info.PID == 0 || info.Context != "local" {
		t.Errorf("info: %+v; want uid %d", info, os.Getuid())
	}
	out, _, code = spindleCmd(t, "", "info", "local")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("uid %d", os.Getuid())) {
		t.Errorf("info table: exit %d, %q", code, out)
	}
}

func TestE2EVerboseLogsToStderr(t *testing.T) {
	out, errs, code := spindleCmd(t, "", "-vv", "ping", "local")
	if code != 0 || !strings.Contains(errs, "DEBUG") || strings.Contains(out, "DEBUG") {
		t.Errorf("-vv: exit %d, stdout %q, stderr %q; want debug records on stderr", code, out, errs)
	}
	_, errs, _ = spindleCmd(t, "", "ping", "local")
	if errs != "" {
		t.Errorf("quiet by default, got stderr %q", errs)
	}
}

func TestE2EBench(t *testing.T) {
	// The core group only: the ssh group has its own test below.
	out, errs, code := spindleCmd(t, "", "bench", "core", "--rounds", "1", "--n", "50")
	if code != 0 {
		t.Fatalf("bench: exit %d, stderr %q", code, errs)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("bench line %q: %v", sc.Text(), err)
		}
		for _, f := range []string{"name", "spindle_ns", "baseline", "baseline_ns", "ratio"} {
			if _, ok := row[f]; !ok {
				t.Errorf("bench line %q has no %s", sc.Text(), f)
			}
		}
		if ns, _ := row["spindle_ns"].(float64); ns <= 0 {
			t.Errorf("bench line %q: spindle_ns %v", sc.Text(), row["spindle_ns"])
		}
		name, _ := row["name"].(string)
		names[name] = true
		if name == "ping_pipelined_64" {
			if cps, _ := row["calls_per_sec"].(float64); cps <= 0 {
				t.Errorf("ping_pipelined_64 has no calls_per_sec: %q", sc.Text())
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
	if err := canStartSSHD(); err != nil {
		msg := fmt.Sprintf("!!! SKIPPING the ssh benchmark test: %v (run as root after scripts/test-deps.sh)", err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out, errs, code := spindleCmd(t, "", "bench", "ssh", "--rounds", "1", "--n", "5")
	if code != 0 {
		t.Fatalf("bench ssh: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	rows := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("bench line %q: %v", sc.Text(), err)
		}
		for _, f := range []string{"name", "spindle_ns", "baseline", "baseline_ns", "ratio", "latency_ms"} {
			if _, ok := row[f]; !ok {
				t.Errorf("bench line %q has no %s", sc.Text(), f)
			}
		}
		if ns, _ := row["spindle_ns"].(float64); ns <= 0 {
			t.Errorf("bench line %q: spindle_ns %v", sc.Text(), row["spindle_ns"])
		}
		if ns, _ := row["baseline_ns"].(float64); ns <= 0 {
			t.Errorf("bench line %q: baseline_ns %v", sc.Text(), row["baseline_ns"])
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

func TestE2EBenchSSHNeedsTarget(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("as root the bench starts its own sshd")
	}
	_, errs, code := spindleCmd(t, "", "bench", "ssh", "--rounds", "1")
	if code == 0 || !strings.Contains(errs, "--ssh-target") {
		t.Errorf("bench ssh without a target: exit %d, stderr %q", code, errs)
	}
}

func TestE2ESSHErrors(t *testing.T) {
	port, err := freePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	target := fmt.Sprintf("ssh:nobody@127.0.0.1:%d", port)
	_, errs, code := spindleCmd(t, "", "--timeout", "10s", "-F", "none", "run", target, "--", "true")
	if code != 255 || !strings.HasPrefix(errs, "spindle: ssh:") || strings.Count(errs, "\n") != 1 {
		t.Errorf("connection refused: exit %d, stderr %q; want 255 and one spindle: ssh:… line", code, errs)
	}
	_, errs, code = spindleCmd(t, "", "run", "local,a:b:c", "--", "true")
	if code != 2 || !strings.Contains(errs, "unknown kind") {
		t.Errorf("local,a:b:c: exit %d, stderr %q", code, errs)
	}
	_, errs, code = spindleCmd(t, "", "-o", "ControlMaster=auto", "run", "web1", "--", "true")
	if code != 2 || !strings.Contains(errs, "not supported") {
		t.Errorf("-o ControlMaster: exit %d, stderr %q", code, errs)
	}
	// A ProxyCommand that gives up: its status and words, on one line.
	_, errs, code = spindleCmd(t, "", "-F", "none", "-o", "ProxyCommand=sh -c 'echo %h unreachable >&2; exit 3'", "run", "web1", "--", "true")
	if code != 255 || !strings.Contains(errs, "exited with status 3: web1 unreachable") || strings.Count(errs, "\n") != 1 {
		t.Errorf("-o ProxyCommand: exit %d, stderr %q", code, errs)
	}
}

// TestE2EChain runs a command through a two-hop chain: the second agent is
// started by the first one, not by the controller.
func TestE2EChain(t *testing.T) {
	out, errs, code := spindleCmd(t, "", "info", "--json", "local,local")
	if code != 0 {
		t.Fatalf("info local,local: exit %d, stderr %q", code, errs)
	}
	var info struct {
		Context string `json:"context"`
		PID     int    `json:"pid"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("info --json output %q: %v", out, err)
	}
	if info.Context != "local → local" || info.PID == 0 || info.PID == os.Getpid() {
		t.Fatalf("info through the chain: %+v", info)
	}
	// -J puts hops before the target, like ssh -J.
	out, errs, code = spindleCmd(t, "", "info", "--json", "-J", "local,local", "local")
	if code != 0 {
		t.Fatalf("info -J local,local local: exit %d, stderr %q", code, errs)
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Context != "local → local → local" {
		t.Fatalf("info -J: %+v, %v (output %q)", info, err, out)
	}
}
