package standin_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit"
	"github.com/spindle-rpc/spindle/internal/testkit/standin"
)

// result is one run of a stand-in.
type result struct {
	stdout, stderr string
	code           int
}

func runTool(t *testing.T, path, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

// check runs each case's argv and compares what it printed and its exit
// status.
func check(t *testing.T, path string, cases []tcase) {
	t.Helper()
	for _, c := range cases {
		r := runTool(t, path, c.stdin, c.args...)
		if r.code != c.code || r.stdout != c.stdout || !strings.Contains(r.stderr, c.stderr) {
			t.Errorf("%s %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q",
				path, c.args, r.code, r.stdout, r.stderr, c.code, c.stdout, c.stderr)
		}
	}
}

type tcase struct {
	args           []string
	stdin          string
	code           int
	stdout, stderr string
}

var pods = map[string]standin.Object{
	"default/web-0":    {State: "Running", Containers: []string{"app", "sidecar"}},
	"prod/db-0":        {State: "Running", Containers: []string{"db"}},
	"default/job-1":    {State: "Succeeded", Containers: []string{"job"}},
	"default/starting": {State: "Pending", Containers: []string{"app"}},
}

func TestKubectl(t *testing.T) {
	k := standin.Install(t, standin.World{Tool: standin.Kubectl, Objects: pods, Contexts: []string{"kind-a"}})
	check(t, k, []tcase{
		// Accepted: the command runs here, in the pod's environment, with
		// stdin only with -i.
		{args: []string{"exec", "-i", "web-0", "--", "sh", "-c", `echo "$HOSTNAME $HOME $(pwd)"; cat`}, stdin: "in\n",
			stdout: "web-0 /root /\nin\n", stderr: `Defaulted container "app" out of: app, sidecar`},
		{args: []string{"exec", "web-0", "--", "cat"}, stdin: "dropped\n", stdout: ""},
		{args: []string{"--context=kind-a", "exec", "-i", "--namespace=prod", "--container=db", "db-0", "--", "sh", "-c", "echo $HOSTNAME"},
			stdout: "db-0\n"},
		{args: []string{"exec", "-n", "prod", "pod/db-0", "-c", "db", "--", "sh", "-c", "exit 3"}, code: 3},
		// Refused by kubectl's command line.
		{args: []string{"exec", "-i", "web-0", "sh", "-c", "true"}, code: 1, stderr: "exec [POD] [COMMAND] is not supported anymore"},
		{args: []string{"exec", "-i", "--no-such-flag", "web-0", "--", "true"}, code: 1, stderr: "error: unknown flag: --no-such-flag"},
		{args: []string{"exec", "-i", "web-0", "--"}, code: 1, stderr: "you must specify at least one command"},
		// Refused by the cluster.
		{args: []string{"exec", "-i", "nope", "--", "true"}, code: 1, stderr: `Error from server (NotFound): pods "nope" not found`},
		{args: []string{"exec", "-i", "db-0", "--", "true"}, code: 1, stderr: `pods "db-0" not found`},
		{args: []string{"exec", "-i", "job-1", "--", "true"}, code: 1, stderr: "cannot exec into a container in a completed pod; current phase is Succeeded"},
		{args: []string{"exec", "-i", "-c", "nope", "web-0", "--", "true"}, code: 1, stderr: "error: container nope is not valid for pod web-0 out of: app, sidecar"},
		{args: []string{"exec", "-i", "starting", "--", "true"}, code: 1, stderr: `error: unable to upgrade connection: container not found ("app")`},
		{args: []string{"--context=nope", "exec", "-i", "web-0", "--", "true"}, code: 1, stderr: "Error in configuration: context was not found for specified context: nope"},
		{args: []string{"exec", "-i", "web-0", "--", "no-such-command"}, code: 126, stderr: `exec: "no-such-command": executable file not found in $PATH`},
	})
	down := standin.Install(t, standin.World{Tool: standin.Kubectl, Objects: pods, Down: true})
	check(t, down, []tcase{{args: []string{"exec", "-i", "web-0", "--", "true"}, code: 1,
		stderr: "The connection to the server localhost:8080 was refused"}})
}

var instances = map[string]standin.Object{
	"default/c1": {State: "Running"},
	"dev/c2":     {State: "Running"},
	"default/c3": {State: "Stopped"},
	"default/c4": {State: "Frozen"},
}

func TestLXD(t *testing.T) {
	l := standin.Install(t, standin.World{Tool: standin.LXD, Objects: instances})
	check(t, l, []tcase{
		{args: []string{"exec", "--mode=non-interactive", "c1", "--", "sh", "-c", `echo "$HOME $USER $LANG $(pwd)"; cat`}, stdin: "in\n",
			stdout: "/root root C.UTF-8 /root\nin\n"},
		{args: []string{"exec", "--project=dev", "local:c2", "--env", "K=v", "--", "sh", "-c", "echo $K"}, stdout: "v\n"},
		{args: []string{"--project", "dev", "exec", "c2", "-n", "--", "cat"}, stdin: "dropped\n", stdout: ""},
		{args: []string{"exec", "c1", "--", "sh", "-c", "exit 4"}, code: 4},
		{args: []string{"exec", "c1", "--user=app", "--", "true"}, code: 1, stderr: `Error: invalid argument "app" for "--user" flag`},
		{args: []string{"exec", "-t", "--mode=non-interactive", "c1", "--", "true"}, code: 1, stderr: "You can't pass -t or -T at the same time as --mode"},
		{args: []string{"exec", "--mode=interactive", "c1", "--", "true"}, code: 2, stderr: "stand-in: interactive mode"},
		{args: []string{"exec", "c1"}, code: 1, stderr: "Error: Invalid number of arguments"},
		{args: []string{"exec", "c2", "--", "true"}, code: 1, stderr: "Error: Instance not found"},
		{args: []string{"exec", "c3", "--", "true"}, code: 1, stderr: "Error: Instance is not running"},
		{args: []string{"exec", "c4", "--", "true"}, code: 1, stderr: "Error: Instance is frozen"},
		{args: []string{"exec", "far:c1", "--", "true"}, code: 1, stderr: `Error: The remote "far" doesn't exist`},
	})
	down := standin.Install(t, standin.World{Tool: standin.LXD, Objects: instances, Down: true})
	check(t, down, []tcase{{args: []string{"exec", "c1", "--", "true"}, code: 1,
		stderr: "unix.socket\" not found: Please check LXD is running"}})
}

// TestLXDUser: --user and --group switch to those ids (root only).
func TestLXDUser(t *testing.T) {
	testkit.NeedRoot(t, "switching to another uid")
	l := standin.Install(t, standin.World{Tool: standin.LXD, Objects: instances})
	check(t, l, []tcase{
		{args: []string{"exec", "--user=65534", "--group=65534", "c1", "--", "sh", "-c", `echo "$(id -u) $(id -G) ${HOME:-unset} $(pwd)"`},
			stdout: "65534 65534 unset /\n"},
	})
}

func TestSystemdRun(t *testing.T) {
	s := standin.Install(t, standin.World{Tool: standin.SystemdRun, Objects: map[string]standin.Object{"m1": {State: "running"}}})
	base := []string{"--machine=m1", "--pipe", "--quiet", "--wait", "--collect", "--service-type=exec"}
	with := func(args ...string) []string { return append(append([]string{}, base...), args...) }
	check(t, s, []tcase{
		// systemd's own expansion: $$ is $, ${X} and a lone $X word are
		// the (empty) variables.
		{args: with("--", "/bin/sh", "-c", `echo "$$0 ${HOME}x"; cat`, "$HOME"), stdin: "in\n", stdout: "/bin/sh x\nin\n"},
		{args: with("-E", "K=v", "--", "/bin/sh", "-c", "echo $${K} $$(pwd)"), stdout: "v /\n"},
		{args: with("--", "/bin/sh", "-c", "exit 5"), code: 5},
		{args: []string{"--machine=m1", "--pipe", "--", "/bin/sh", "-c", "true"}, stderr: "Running as unit: run-u"},
		// Without --pipe the command's stdio is not the caller's.
		{args: []string{"--machine=m1", "--wait", "--quiet", "--", "/bin/sh", "-c", "echo lost"}, stdout: ""},
		{args: with("--no-such-option", "--", "true"), code: 1, stderr: "systemd-run: unrecognized option '--no-such-option'"},
		{args: with(), code: 1, stderr: "Command line to execute required."},
		{args: append(append([]string{"--machine=nope"}, base[1:]...), "--", "true"), code: 1, stderr: "Failed to connect to bus: Host is down"},
		// A user the machine does not have fails the start job, which
		// --quiet keeps quiet about.
		{args: with("--uid=spindle-no-such-user", "--", "/bin/sh", "-c", "true"), code: 1, stderr: ""},
		{args: []string{"--machine=m1", "--pipe", "--wait", "--uid=spindle-no-such-user", "--", "/bin/sh", "-c", "true"}, code: 1,
			stderr: "failed because the control process exited with error code"},
		{args: []string{"--machine=m1", "--pipe", "--wait", "--", "/no/such/program"}, code: 1,
			stderr: "failed because the control process exited with error code"},
	})
	if r := runTool(t, s, "", with("--uid=spindle-no-such-user", "--", "/bin/sh", "-c", "true")...); r.stderr != "" {
		t.Errorf("--quiet: a failed start printed %q", r.stderr)
	}
}

// TestSystemdRunUser: --uid switches to the user, with the environment
// systemd gives a service with User=.
func TestSystemdRunUser(t *testing.T) {
	testkit.NeedRoot(t, "switching to another uid")
	if _, err := os.Stat("/nonexistent"); err == nil {
		t.Fatal("/nonexistent exists")
	}
	s := standin.Install(t, standin.World{Tool: standin.SystemdRun, Objects: map[string]standin.Object{"m1": {State: "running"}}})
	check(t, s, []tcase{
		{args: []string{"--machine=m1", "--pipe", "--quiet", "--uid=nobody", "--", "/bin/sh", "-c", `echo "$$(id -u) $$USER $$HOME"`},
			stdout: "65534 nobody /nonexistent\n"},
	})
}
