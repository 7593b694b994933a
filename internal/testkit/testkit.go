// Package testkit holds what the project's tests share and nothing a user
// runs: the one rule for a test that cannot run here, and (in its
// subpackages) the fixtures — test agents, throwaway sshds, users with
// sudo rights, containers, network-namespace topologies, PTYs.
//
// The rule: a test whose prerequisite is missing is skipped loudly on a
// developer's machine and fails under CI=true, where `make test` has
// installed everything and a skip would let CI pass without running it.
// Every skip in the suite goes through Unavailable (or a helper built on
// it); the few that no fresh CI machine can change go through Impossible,
// and are listed in README's testing notes.
package testkit

import (
	"fmt"
	"os"
	"testing"
)

// InCI reports whether the suite runs under CI (CI=true), where every
// prerequisite must be present.
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable ends t because what it needs is missing here: a loud skip,
// or a failure under CI=true. why names what is missing and what installs
// it.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	msg := fmt.Sprintf("\n!!! TEST NOT RUN: %s.\n", why)
	if InCI() {
		t.Fatal(msg + "!!! CI=true: failing instead of skipping.")
	}
	t.Skip(msg + "!!! (under CI=true this is a failure; scripts/test-deps.sh installs what the suites need)")
}

// Need calls Unavailable(t, why) unless ok.
func Need(t testing.TB, ok bool, why string) {
	t.Helper()
	if !ok {
		Unavailable(t, why)
	}
}

// NeedRoot ends t through Unavailable unless it runs as root.
func NeedRoot(t testing.TB, what string) {
	t.Helper()
	Need(t, os.Geteuid() == 0, what+" must run as root")
}

// Impossible skips t for a reason that no machine of CI's kind can change
// (another OS, a hardware feature): the skip is allowed under CI too, and
// every reason passed here is listed in README's testing notes.
func Impossible(t testing.TB, why string) {
	t.Helper()
	t.Skip("SKIP (not possible on this machine): " + why)
}
