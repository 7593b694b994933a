package bootstrap

import (
	"bytes"
	"compress/gzip"
	"io"
	"math/rand/v2"
	"os/exec"
	"runtime"
	"testing"
)

// gzipChunks' members inflate, one after the other, to the input: in Go
// and with the gzip -dc the first stage runs (GNU's, and busybox's).
func TestGzipChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 5<<20+12345)
	for i := range data {
		data[i] = byte(rng.IntN(16)) // compressible, not trivially
	}
	gz, err := gzipChunks(data, runtimeGzipLevel)
	if err != nil {
		t.Fatal(err)
	}
	members := 0
	r := bytes.NewReader(gz) // an io.ByteReader: gzip reads no further than a member
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for {
		zr.Multistream(false)
		part, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		got, members = append(got, part...), members+1
		if err := zr.Reset(r); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("inflated %d bytes, want the %d put in", len(got), len(data))
	}
	if want := min(runtime.NumCPU(), maxGzipWorkers); want >= 2 && members != want {
		t.Errorf("%d members, want one per worker (%d)", members, want)
	}
	for _, argv := range [][]string{{"gzip", "-dc"}, {"busybox", "gzip", "-dc"}} {
		if _, err := exec.LookPath(argv[0]); err != nil {
			t.Logf("!!! no %s here: not checked with it (scripts/test-deps.sh installs it)", argv[0])
			continue
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin = bytes.NewReader(gz)
		out, err := cmd.Output()
		if err != nil || !bytes.Equal(out, data) {
			t.Errorf("%v: %d bytes, %v", argv, len(out), err)
		}
	}
}

// lendProcs raises an agent's GOMAXPROCS for the job and puts it back,
// and leaves a value the user (or a controller) chose alone.
func TestLendProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	defer func(v bool) { procsOurs = v }(procsOurs)

	procsOurs = true
	restore := lendProcs(3)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("lent: GOMAXPROCS %d, want 3", got)
	}
	restore()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("after the job: GOMAXPROCS %d, want 1 again", got)
	}

	procsOurs = false
	restore = lendProcs(3)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("the user's GOMAXPROCS was changed to %d", got)
	}
	restore()
}
