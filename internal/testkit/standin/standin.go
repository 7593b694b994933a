// Package standin puts stand-ins for container tools that cannot run on a
// test machine (kubectl without a cluster, LXD's lxc client without LXD,
// systemd-run --machine without systemd-machined and a booted container)
// in a directory of a test's own: one program (./cmd/standin) that takes
// the argv the real tool takes, refuses what the real tool refuses with
// the real tool's words and exit code, and for a run it accepts, runs the
// command part on this machine (as the user asked for, with the
// environment the tool would give it), so that a connector's whole
// start-up, agent bootstrap included, runs for real.
//
// What exists on the stand-in's side (pods, instances, machines, their
// states) is a World, written beside the program as standin.json.
package standin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
)

// The tools a stand-in can be.
const (
	// Kubectl is `kubectl [GLOBAL FLAGS] exec …` (the kubectl connector).
	Kubectl = "kubectl"
	// LXD is LXD's client, `lxc [GLOBAL FLAGS] exec …` (the lxd
	// connector).
	LXD = "lxc"
	// SystemdRun is `systemd-run --machine=NAME --pipe …` (the machinectl
	// connector).
	SystemdRun = "systemd-run"
)

// WorldFile is the World's file name, beside the program.
const WorldFile = "standin.json"

// World is what exists for a stand-in.
type World struct {
	// Tool is Kubectl, LXD or SystemdRun.
	Tool string `json:"tool"`
	// Objects are the pods ("NAMESPACE/POD"), instances
	// ("PROJECT/INSTANCE") or machines ("MACHINE") by name.
	Objects map[string]Object `json:"objects,omitempty"`
	// Contexts are kubectl's kubeconfig contexts (the first is the
	// current one); with none, any --context is unknown.
	Contexts []string `json:"contexts,omitempty"`
	// Down: the API server (kubectl) or the daemon (LXD) does not answer.
	Down bool `json:"down,omitempty"`
}

// Object is a pod, an instance or a machine.
type Object struct {
	// State is a pod's phase (Running, Pending, Succeeded, Failed), an
	// instance's status (Running, Stopped, Frozen) or a machine's
	// (running).
	State string `json:"state"`
	// Containers are a pod's containers, the first the default.
	Containers []string `json:"containers,omitempty"`
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// Install builds the stand-in (once per test binary) and installs it as
// w.Tool in a directory of t's own, with w beside it, and returns the
// program's path: the connector's *Path option.
func Install(t testing.TB, w World) string {
	t.Helper()
	buildOnce.Do(func() {
		built, buildErr = testagent.BuildPackage("./internal/testkit/standin/cmd/standin", "standin")
	})
	if buildErr != nil {
		t.Fatalf("build the stand-in: %v", buildErr)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, w.Tool)
	// A symlink: the program finds its World beside the path it was run
	// by (its argv[0]), not beside the binary.
	if err := os.Symlink(built, path); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, WorldFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
