// Package allocs measures the heap a call allocates, for the fuzz targets
// that claim their decoders allocate in proportion to their input:
// GOMEMLIMIT only makes a fuzzer collect harder, it cannot fail an input
// that allocates gigabytes for a forged length; a measured bound can.
package allocs

import (
	"runtime"
	"testing"
)

// Bytes returns how many bytes the process allocated on the heap while f
// ran. The counter (runtime.MemStats.TotalAlloc) is process-wide: what
// other goroutines allocate meanwhile counts too, so a bound leaves room
// for it, and a caller measures around the call under test only.
func Bytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Slack is what Within allows beyond a Bound: what the testing package and
// a fuzzing worker allocate on their own goroutines while the call runs
// (a few KiB, now and then, measured around a call that allocates
// nothing).
const Slack = 16 << 10

// Bound is an allocation bound for an input of n bytes: Base plus PerByte
// for each input byte, stated for the call alone (Within adds Slack).
type Bound struct {
	Base, PerByte uint64
}

// Of is the bound for an input of n bytes.
func (b Bound) Of(n int) uint64 { return b.Base + b.PerByte*uint64(n) }

// Within runs f and fails t if it allocated more than b allows for an
// input of n bytes, plus Slack; what names the call in the failure.
func Within(t testing.TB, b Bound, n int, what string, f func()) {
	t.Helper()
	if got, limit := Bytes(f), b.Of(n); got > limit+Slack {
		t.Fatalf("%s allocated %d bytes for %d bytes of input: more than its bound of %d + %d×%d = %d (and %d of slack)",
			what, got, n, b.Base, b.PerByte, n, limit, Slack)
	}
}
