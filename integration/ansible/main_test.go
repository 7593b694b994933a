// Package ansible_test runs real ansible-playbook, from each ansible-core
// version the project supports, against a real sshd on loopback, once
// with Ansible's ssh connection and once with Spindle's connection plugin,
// and compares the per-task results of the two runs.
//
// The controllers: the host's /usr/bin/ansible-playbook (Debian 12's
// ansible-core 2.14) and Docker images of Debian trixie (2.19) and sid
// (the newest), built and cached by scripts/test-ansible-controller.sh,
// run with the host's network so they reach the same sshd.
package ansible_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"go.uber.org/goleak"
)

// binDir holds the spindle and spindle-agent binaries, side by side as
// they ship; containers mount it at the same path.
var binDir string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "spindle-ansible-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Containers run the binaries as root from this directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, b := range [][2]string{{"spindle-agent", "./cmd/spindle-agent"}, {"spindle", "./cmd/spindle"}} {
		if _, err := testagent.BuildInto(dir, b[1], b[0]); err != nil {
			fmt.Fprintln(os.Stderr, "integration/ansible:", err)
			return 1
		}
	}
	binDir = dir
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "integration/ansible: goroutines leaked:", err)
			code = 1
		}
	}
	return code
}
