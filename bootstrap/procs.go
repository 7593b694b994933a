package bootstrap

import (
	"os"
	"runtime"
	"strings"
)

// An agent runs with one P: its work is I/O and child processes, which do
// not hold a P, and with one P handing a message from goroutine to
// goroutine never wakes a second thread (on a VM a halted vCPU takes tens
// of µs to wake). Whoever starts an agent sets GOMAXPROCS=1 in its
// environment rather than leaving the agent to call runtime.GOMAXPROCS(1):
// the runtime then never builds the other Ps only to tear them down again,
// which was a fifth of an agent's start (perf stat, 3 × 60 starts on a
// 2-vCPU VM: 14.1 → 11.4 ms of CPU, 496 → 356 page faults).
//
// The agent takes the variable out of its environment again (TakeProcs),
// so that the commands it runs never inherit a setting the user did not
// make; procsMarker says that the starter, not the user, set it.
const procsMarker = "SPINDLE_SET_GOMAXPROCS"

// stageProcs is the first stage's part: export GOMAXPROCS=1 unless the
// target's environment already sets it.
const stageProcs = `test -n "$GOMAXPROCS" || { GOMAXPROCS=1; ` + procsMarker + `=1; export GOMAXPROCS ` + procsMarker + `; }; `

// WithOneProc returns env (the process's own when nil) with GOMAXPROCS=1
// and the marker added, unless env sets GOMAXPROCS already: the environment
// for an agent started directly rather than through the first stage.
func WithOneProc(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok && v != "" {
			return env
		}
	}
	return append(env[:len(env):len(env)], "GOMAXPROCS=1", procsMarker+"=1")
}

// TakeProcs is the agent's half, called first thing in its main: it
// removes a GOMAXPROCS its starter set (and the marker) from the
// environment, and falls back to runtime.GOMAXPROCS(1) for an agent
// started some other way, unless the user chose a value.
func TakeProcs() {
	userSet := os.Getenv("GOMAXPROCS") != ""
	if os.Getenv(procsMarker) == "1" {
		os.Unsetenv("GOMAXPROCS")
		userSet = false
	}
	os.Unsetenv(procsMarker)
	if !userSet && runtime.GOMAXPROCS(0) != 1 {
		runtime.GOMAXPROCS(1)
	}
	procsOurs = !userSet // lendProcs may raise it for a while
}
