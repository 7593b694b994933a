package bench

import (
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
)

// The files floor rows (put_100m_floor, get_100m_floor, and _10ms): what
// a copy that keeps the guarantees cannot avoid on this machine,
// as ssh_true_floor is for a command. A Spindle copy hashes every byte at
// both ends (a sha256 taken while streaming and checked at the far end);
// a raw `ssh host cat` does not. The baseline is the raw `cat` copy over
// the ControlMaster, exactly the put_100m / get_100m baseline, with two
// sha256s of the same bytes computed alongside it in this process, from
// memory (Go's sha256, which uses SHA-NI where the CPU has it, as
// Spindle's does): no extra read, no extra copy, no pipe, and free to
// take whatever CPU the copy leaves idle. It leaves out the destination's
// fsync, which Spindle also pays, so it is lower than the true floor.
//
// On loopback both ends share the machine's CPUs, as they do in every
// 0 ms row, so the hashes compete with the copy: floor_ratio (this
// baseline ÷ the raw cat of the same run's put_100m or get_100m row)
// says how much throughput is left to any implementation whose own
// copying costs no less than OpenSSH's. Where it is above 1/0.9, 0.9x the
// raw cat is out of reach for such a copy.

// catPlusHashes names the floor rows' baseline.
const catPlusHashes = "ssh_cat_plus_2_sha256"

// filesFloorCases are the floor rows for fsz at ms.
func filesFloorCases(ms int, fsz fileSize) []benchCase {
	sfx := latencySuffix(ms)
	finish := func(of string) func(e *benchEnv, r *benchResult) {
		tp, fr := throughput(fsz.bytes, false), floorRatio(of)
		return func(e *benchEnv, r *benchResult) {
			tp(e, r)
			fr(e, r)
		}
	}
	return []benchCase{{
		Name: "put_" + fsz.label + "_floor" + sfx, Group: "files", Latency: ms, Baseline: catPlusHashes + sfx, N: 1,
		Spindle: func(e *benchEnv, n int) (float64, error) { return e.filesPut(ms, fsz, n, false) },
		Base:    func(e *benchEnv, n int) (float64, error) { return e.filesOpenSSH(ms, fsz, n, catPlusHashes, false) },
		Finish:  finish("put_" + fsz.label + sfx),
	}, {
		Name: "get_" + fsz.label + "_floor" + sfx, Group: "files", Latency: ms, Baseline: catPlusHashes + sfx, N: 1,
		Spindle: func(e *benchEnv, n int) (float64, error) { return e.filesGet(ms, fsz, n, "") },
		Base:    func(e *benchEnv, n int) (float64, error) { return e.filesGet(ms, fsz, n, catPlusHashes) },
		Finish:  finish("get_" + fsz.label + sfx),
	}}
}

// floorCopy turns a floor row's copy into the raw cat copy that runs
// alongside two hashes of the file's bytes (the local source, whose
// content the remote one of the get rows shares), read into memory
// untimed, once per size. Other tools pass through.
func (f *filesBench) floorCopy(tool string, fsz fileSize, copy func(tool string) error) (func() error, error) {
	if tool != catPlusHashes {
		return func() error { return copy(tool) }, nil
	}
	src, err := f.source(fsz)
	if err != nil {
		return nil, err
	}
	if f.floorData == nil || int64(len(f.floorData)) != fsz.bytes {
		if f.floorData, err = os.ReadFile(src); err != nil {
			return nil, err
		}
	}
	data := f.floorData
	return func() error { return alongsideHashes(data, func() error { return copy("ssh_cat") }) }, nil
}

// alongsideHashes runs op while two goroutines each take the sha256 of
// data, and returns when all three are done.
func alongsideHashes(data []byte, op func() error) error {
	var wg sync.WaitGroup
	var sums [2][sha256.Size]byte
	for i := range sums {
		wg.Go(func() { sums[i] = sha256.Sum256(data) })
	}
	err := op()
	wg.Wait()
	if err == nil && sums[0] != sums[1] {
		err = fmt.Errorf("%s: two hashes of the same bytes differ", catPlusHashes)
	}
	return err
}
