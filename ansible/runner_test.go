package ansible_test

import (
	"encoding/json"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/ansiballz"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
)

var timeFields = regexp.MustCompile(`"(start|end|delta)": "[^"]*"`)

// TestModuleRunner runs pipelined modules through the endpoint with the
// runner (the default) and without (module_runner false): the results
// are the same, and the runner is what ran them, as the become user too.
func TestModuleRunner(t *testing.T) {
	sshtest.Require(t)
	ansiballz.Need(t)
	sock := startDaemon(t)
	h := newHost(t)
	py := ansiballz.Python
	// As Ansible sends it for a task with environment: {SPINDLE_ENV: "it's a b"}.
	const withEnv = `/bin/sh -c 'SPINDLE_ENV='"'"'it'"'"'"'"'"'"'"'"'s a b'"'"' ` + ansiballz.Python + ` && sleep 0'`
	u, err := user.Lookup(h.u.Name)
	if err != nil {
		t.Fatal(err)
	}
	parent, _ := filepath.Abs("testdata/modules/spindle_parent.py")
	who := ansiballz.Payload(t, parent, map[string]any{}, py)
	for _, tc := range []struct {
		name   string
		become map[string]any
		uid    string
	}{{"login user", nil, u.Uid}, {"sudo root", map[string]any{"method": "sudo"}, "0"}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.become != nil {
				sudoers(t, h.u.Name+" ALL=(ALL:ALL) NOPASSWD: ALL")
			}
			for _, warm := range []bool{true, false} {
				req := execReq(h, withEnv, tc.become)
				req["module_runner"] = warm
				r := must(t, sock, req, who)
				var got struct {
					UID    int  `json:"uid"`
					Runner bool `json:"runner"`
				}
				if err := json.Unmarshal(r.Stdout, &got); err != nil || r.RC != 0 {
					t.Fatalf("rc %d, %v: %s %s", r.RC, err, r.Stdout, r.Stderr)
				}
				if got.Runner != warm || strconv.Itoa(got.UID) != tc.uid {
					t.Errorf("module_runner %v: ran as uid %d (want %s), by the runner: %v", warm, got.UID, tc.uid, got.Runner)
				}
			}
			for _, args := range []map[string]any{
				{"_raw_params": "echo out; echo err >&2; exit 3", "_uses_shell": true},
				{"_raw_params": "id -un"},
				{"_raw_params": `echo "$SPINDLE_ENV"`, "_uses_shell": true},
			} {
				p := ansiballz.Payload(t, "command", args, py)
				var res [2]reply
				for i, warm := range []bool{true, false} {
					req := execReq(h, withEnv, tc.become)
					req["module_runner"] = warm
					res[i] = must(t, sock, req, p)
				}
				w, f := res[0], res[1]
				if args["_raw_params"] == `echo "$SPINDLE_ENV"` && !strings.Contains(string(w.Stdout), `"stdout": "it's a b"`) {
					t.Errorf("the task's environment did not reach the module: %s", w.Stdout)
				}
				if w.RC != f.RC || timeFields.ReplaceAll(w.Stdout, nil) == nil ||
					string(timeFields.ReplaceAll(w.Stdout, nil)) != string(timeFields.ReplaceAll(f.Stdout, nil)) || string(w.Stderr) != string(f.Stderr) {
					t.Errorf("%v: with the runner rc %d %s %s\nwithout rc %d %s %s", args, w.RC, w.Stdout, w.Stderr, f.RC, f.Stdout, f.Stderr)
				}
			}
		})
	}
}

// BenchmarkPipelinedCommand is one pipelined `command: hostname` through
// the endpoint (a kept connection, the zip already on the agent), with
// the warm module runner and with a fresh interpreter per run.
func BenchmarkPipelinedCommand(b *testing.B) {
	sshtest.Require(b)
	ansiballz.Need(b)
	sock := startDaemon(b)
	h := newHost(b)
	p := ansiballz.Payload(b, "command", map[string]any{"_raw_params": "hostname"}, ansiballz.Python)
	const cmd = "/bin/sh -c '" + ansiballz.Python + " && sleep 0'"
	for _, warm := range []bool{true, false} {
		name := "fresh"
		if warm {
			name = "runner"
		}
		b.Run(name, func(b *testing.B) {
			req := func() map[string]any {
				r := execReq(h, cmd, nil)
				r["module_runner"] = warm
				return r
			}
			must(b, sock, req(), p) // connected, zip stored, runner started
			for b.Loop() {
				if r := must(b, sock, req(), p); r.RC != 0 {
					b.Fatalf("rc %d: %s", r.RC, r.Stderr)
				}
			}
		})
	}
}
