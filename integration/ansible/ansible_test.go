package ansible_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPlaybooks runs testdata/site.yml from every controller with -c ssh,
// then with -c spindle with its warm module runner on (the default) and
// off, those two at once: the per-task results of each must agree with
// ssh's, and each run must end as the playbook says.
func TestPlaybooks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	for _, c := range controllers {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctl := prepare(t, c.name, c.suite)
			viaSSH := f.play(t, ctl, "ssh", "site.yml")
			viaSSH.check(t, ctl)
			for _, conn := range []string{"spindle", spindleNoRunner} {
				t.Run(conn, func(t *testing.T) {
					t.Parallel()
					viaSpindle := f.play(t, ctl, conn, "site.yml")
					viaSpindle.check(t, ctl)
					if viaSSH.code != viaSpindle.code {
						t.Errorf("%s: ansible-playbook exits %d with -c ssh, %d with %s", ctl.name, viaSSH.code, viaSpindle.code, conn)
					}
					diffs := compareResults(viaSSH.results, viaSpindle.results, "ssh", conn)
					for _, d := range diffs {
						t.Errorf("%s: %s", ctl.name, d)
					}
					if len(diffs) == 0 {
						t.Logf("%s: %d task results of ssh and %s agree", ctl.name, len(viaSSH.results), conn)
					}
					if t.Failed() {
						t.Logf("-c ssh output:\n%s", viaSSH.output)
						t.Logf("%s output:\n%s\ndaemon log:\n%s", conn, viaSpindle.output, viaSpindle.daemonLog())
					}
				})
			}
		})
	}
}

// mustHave are results every run of site.yml must hold: a play that
// stopped early fails here, not silently in the comparison.
var mustHave = func() []string {
	keys := []string{
		"modules / remove the work directory @ t1",
		"become / doas @ t1",
		"become with a password / sudo with a password @ pw1",
		"wrong become password / sudo with a wrong password [expect failed] @ bad1",
		"wrong become password / the host is still usable @ bad1",
		"missing become password / sudo without a password [expect failed] @ nopw1",
		"unreachable / one unreachable host [expect unreachable] @ dead1",
		"unreachable / the play goes on @ t1",
		"async / read what the forgotten job wrote @ t1",
	}
	for i := 1; i <= 10; i++ {
		keys = append(keys, fmt.Sprintf("fleet / every host @ h%02d", i))
	}
	return keys
}()

// playResult is one ansible-playbook run.
type playResult struct {
	conn    string
	dir     string // the run's own directory
	output  string
	code    int
	results map[string]result
}

// check fails t for each result of site.yml that is missing or ends
// otherwise than the playbook says.
func (p playResult) check(t *testing.T, ctl controller) {
	t.Helper()
	for _, bad := range checkExpected(p.results) {
		t.Errorf("%s, -c %s: %s", ctl.name, p.conn, bad)
	}
	for _, k := range mustHave {
		if _, ok := p.results[k]; !ok {
			t.Errorf("%s, -c %s: no result for %s", ctl.name, p.conn, k)
		}
	}
	if t.Failed() {
		t.Logf("%s, -c %s output:\n%s", ctl.name, p.conn, p.output)
	}
}

// daemonLog is what the spindle daemons of the run logged.
func (p playResult) daemonLog() string {
	logs, _ := filepath.Glob(filepath.Join(p.dir, "xdg", "spindle", "*.log"))
	var b strings.Builder
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		fmt.Fprintf(&b, "== %s\n%s\n", l, data)
	}
	return b.String()
}

// spindleNoRunner is the spindle connection with its warm module runner
// off (spindle_module_runner false): every module starts an interpreter
// of its own, as with ssh.
const spindleNoRunner = "spindle-norunner"

// play runs playbook (in testdata) from ctl with connection conn ("ssh",
// "spindle" or spindleNoRunner) and reads its results. The playbook's
// variable module_runner says whether modules run in the warm runner.
func (f *fixture) play(t *testing.T, ctl controller, conn, playbook string, extra ...string) playResult {
	t.Helper()
	return f.playWith(t, ctl, conn, f.inventory, playbook, extra...)
}

// playWith is play with another inventory.
func (f *fixture) playWith(t *testing.T, ctl controller, conn, inventory, playbook string, extra ...string) playResult {
	t.Helper()
	runID := ctl.name + "-" + conn
	plugin, runner := conn, conn == "spindle"
	if conn == spindleNoRunner {
		plugin = "spindle"
	}
	dir := filepath.Join(f.dir, "run-"+runID)
	for _, d := range []string{dir, filepath.Join(dir, "out"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	resultsFile := filepath.Join(dir, "results.jsonl")
	env := []string{
		"ANSIBLE_CALLBACK_PLUGINS=" + filepath.Join(f.dir, "pb", "callback_plugins"),
		"ANSIBLE_CALLBACKS_ENABLED=spindle_results",
		"SPINDLE_TEST_RESULTS=" + resultsFile,
		"ANSIBLE_FORKS=10",
		"ANSIBLE_NOCOLOR=1",
		"ANSIBLE_RETRY_FILES_ENABLED=0",
		"ANSIBLE_PIPELINING=1",
		"ANSIBLE_LOCAL_TEMP=" + filepath.Join(dir, "tmp"),
		"ANSIBLE_SSH_CONTROL_PATH_DIR=" + filepath.Join(dir, "cp"),
		"ANSIBLE_TIMEOUT=10",
	}
	args := []string{"-i", inventory, "-c", plugin, "--diff", "-e", "run_id=" + runID,
		"-e", "local_out=" + filepath.Join(dir, "out"), "-e", fmt.Sprintf("module_runner=%v", runner)}
	if plugin == "spindle" {
		plugins := filepath.Join(dir, "plugins")
		spindle := filepath.Join(binDir, "spindle")
		if out, err := exec.Command(spindle, "ansible", "install", "--path", plugins).CombinedOutput(); err != nil {
			t.Fatalf("spindle ansible install --path %s: %v\n%s", plugins, err, out)
		}
		xdg := filepath.Join(dir, "xdg")
		if err := os.Mkdir(xdg, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stopDaemons(t, xdg) })
		env = append(env,
			"ANSIBLE_CONNECTION_PLUGINS="+plugins,
			"SPINDLE_AGENT="+filepath.Join(binDir, "spindle-agent"),
			"XDG_RUNTIME_DIR="+xdg)
		if !runner {
			env = append(env, "ANSIBLE_SPINDLE_MODULE_RUNNER=false")
		}
		args = append(args, "-e", "ansible_spindle_path="+spindle)
	}
	args = append(append(args, extra...), filepath.Join(f.dir, "pb", playbook))
	out, code := ctl.run(t, filepath.Join(f.dir, "pb"), []string{f.dir, binDir}, env, args...)
	results, _, err := readResults(resultsFile)
	if err != nil {
		t.Fatalf("%s, -c %s: %v\n%s", ctl.name, conn, err, out)
	}
	return playResult{conn: conn, dir: dir, output: out, code: code, results: results}
}

// stopDaemons asks every spindle daemon with a socket under
// xdg/spindle to stop (protocol op "stop"). A container's daemon ended
// with its container: its socket refuses, which is fine.
func stopDaemons(t *testing.T, xdg string) {
	socks, _ := filepath.Glob(filepath.Join(xdg, "spindle", "*.sock"))
	for _, s := range socks {
		err := daemonRequest(s, map[string]any{"v": 1, "op": "stop"})
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) {
			continue // nobody listens: gone already
		}
		if err != nil {
			t.Logf("stop the daemon at %s: %v", s, err)
		}
	}
}

// daemonRequest sends one header-only request on the daemon's socket
// and checks the response: enough for "stop".
func daemonRequest(sock string, req map[string]any) error { return daemonCall(sock, req, nil) }

// daemonCall sends one header-only request on the daemon's socket and
// decodes the response's JSON header into resp (when not nil).
func daemonCall(sock string, req map[string]any, resp any) error {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	defer c.Close()
	hdr, _ := json.Marshal(req)
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)))
	if _, err := c.Write(append(msg, hdr...)); err != nil {
		return err
	}
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return err
	}
	body := make([]byte, min(binary.BigEndian.Uint32(n[:]), 1<<20))
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	var r struct {
		Error *struct{ Kind, Message string }
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return err
	}
	if r.Error != nil {
		return fmt.Errorf("%s: %s", r.Error.Kind, r.Error.Message)
	}
	if resp != nil {
		return json.Unmarshal(body, resp)
	}
	return nil
}
