package bootstrap

import (
	"os"
	"runtime"
	"slices"
	"testing"
)

func TestWithOneProc(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/h"}
	got := WithOneProc(base[:2:2])
	if want := []string{"PATH=/bin", "HOME=/h", "GOMAXPROCS=1", procsMarker + "=1"}; !slices.Equal(got, want) {
		t.Errorf("WithOneProc = %q, want %q", got, want)
	}
	user := []string{"GOMAXPROCS=3"}
	if got := WithOneProc(user); !slices.Equal(got, user) {
		t.Errorf("a user's GOMAXPROCS was overridden: %q", got)
	}
	// An empty GOMAXPROCS means unset to the runtime, so ours applies.
	if got := WithOneProc([]string{"GOMAXPROCS="}); !slices.Contains(got, "GOMAXPROCS=1") {
		t.Errorf("empty GOMAXPROCS kept: %q", got)
	}
}

func TestTakeProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	// Set by the starter: both variables go, the agent runs on one P.
	t.Setenv("GOMAXPROCS", "1")
	t.Setenv(procsMarker, "1")
	runtime.GOMAXPROCS(2)
	TakeProcs()
	if v, ok := os.LookupEnv("GOMAXPROCS"); ok {
		t.Errorf("GOMAXPROCS=%q left for children", v)
	}
	if _, ok := os.LookupEnv(procsMarker); ok {
		t.Error("marker left for children")
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS(0) = %d, want 1", n)
	}
	// Set by the user: kept, and the runtime's value left alone.
	t.Setenv("GOMAXPROCS", "2")
	runtime.GOMAXPROCS(2)
	TakeProcs()
	if v := os.Getenv("GOMAXPROCS"); v != "2" {
		t.Errorf("the user's GOMAXPROCS became %q", v)
	}
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Errorf("GOMAXPROCS(0) = %d, want the user's 2", n)
	}
}
