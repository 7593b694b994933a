package ansible_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit"
	"github.com/spindle-rpc/spindle/internal/testkit/containertest"
)

// controller is one ansible-core installation that runs playbooks.
type controller struct {
	name  string // "2.14", "trixie", "sid": also part of remote paths
	image string // the Docker image; "" for the host's own ansible
}

// hostAnsible is the host's ansible-playbook (Debian 12: ansible-core 2.14).
const hostAnsible = "/usr/bin/ansible-playbook"

// controllers lists the controllers to run, with the suites of the
// Docker ones (scripts/test-ansible-controller.sh).
var controllers = []struct{ name, suite string }{{"2.14", ""}, {"trixie", "trixie"}, {"sid", "sid"}}

// prepare makes c runnable here: the host's ansible is installed, or
// the image of its suite is built (at once when cached).
func prepare(t *testing.T, name, suite string) controller {
	t.Helper()
	if suite == "" {
		_, err := os.Stat(hostAnsible)
		testkit.Need(t, err == nil, hostAnsible+" is not installed (scripts/test-deps.sh installs ansible-core)")
		return controller{name: name}
	}
	containertest.NeedDocker(t)
	script, err := containertest.Script("test-ansible-controller.sh")
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", script, suite)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	testkit.Need(t, err == nil, "the ansible-core controller image for Debian "+suite+" does not build ("+
		script+"): "+strings.TrimSpace(stderr.String()))
	return controller{name: name, image: strings.TrimSpace(string(out))}
}

// runLimit bounds one ansible-playbook run: past it the run is killed and
// the test fails (a hang), instead of blocking the suite.
const runLimit = 15 * time.Minute

// run runs ansible-playbook with args and env (K=V) from c, with dir as
// the working directory; dirs are directories the command reads or
// writes (mounted at the same paths into a container). It returns the
// combined output and the exit status.
func (c controller) run(t *testing.T, dir string, dirs []string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	var cmd *exec.Cmd
	if c.image == "" {
		cmd = exec.CommandContext(ctx, hostAnsible, args...)
		cmd.Dir = dir
		cmd.Env = append(cleanEnv(), env...)
	} else {
		b := make([]byte, 5)
		rand.Read(b)
		name := "spt-ansible-" + hex.EncodeToString(b)
		// --init: the daemon the plugin starts detaches from
		// ansible-playbook; pid 1 must reap it and forward signals.
		dargs := []string{"run", "--rm", "--init", "--name", name, "--network", "host", "-w", dir}
		for _, d := range dirs {
			dargs = append(dargs, "-v", d+":"+d)
		}
		for _, e := range env {
			dargs = append(dargs, "-e", e)
		}
		dargs = append(append(dargs, c.image, "ansible-playbook"), args...)
		cmd = exec.CommandContext(ctx, "docker", dargs...)
		t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s: ansible-playbook %v still ran after %v: killed\n%s", c.name, args, runLimit, out)
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s: ansible-playbook: %v", c.name, err)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}

// cleanEnv is this process's environment without what would change
// Ansible's or ssh's behaviour behind the test's back.
func cleanEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "ANSIBLE_") || strings.HasPrefix(e, "SSH_AUTH_SOCK=") || strings.HasPrefix(e, "XDG_RUNTIME_DIR=") {
			continue
		}
		env = append(env, e)
	}
	return env
}
