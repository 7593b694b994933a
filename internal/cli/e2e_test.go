package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
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
	for _, b := range [][2]string{{"spindle-agent", "./cmd/spindle-agent"}, {"spindle", "./cmd/spindle"}} {
		if _, err := testagent.BuildInto(dir, b[1], b[0]); err != nil {
			return err
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

func TestE2ESSHErrors(t *testing.T) {
	port := sshtest.ClosedPort(t) // nothing listens there
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
