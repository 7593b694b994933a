package bootstrap

import (
	"bytes"
	"compress/gzip"
	"errors"
	"runtime"
	"sync"
)

// maxGzipWorkers bounds the CPUs one gzipChunks uses; minGzipChunk is
// the least a chunk holds (smaller inputs are one member).
const (
	maxGzipWorkers = 4
	minGzipChunk   = 1 << 20
)

// gzipChunks compresses data as one gzip member per chunk, the chunks
// compressed at once on up to maxGzipWorkers CPUs; gzip -dc (GNU and
// busybox) and Go's gzip.Reader inflate concatenated members as one
// stream, and a member boundary per MiB costs nothing measurable. An
// agent that starts a cold hop over SSH has no compressed copy of its own
// binary and makes one first, while the hop waits: 250 ms of one CPU for
// 7 MB at level 6 on a fast machine, 61 ms at runtimeGzipLevel. An agent runs on one P
// (TakeProcs), so it lends itself more for the duration (lendProcs).
func gzipChunks(data []byte, level int) ([]byte, error) {
	workers := min(runtime.NumCPU(), maxGzipWorkers, len(data)/minGzipChunk)
	if workers < 2 {
		return gzipMember(data, level)
	}
	defer lendProcs(workers)()
	size := (len(data) + workers - 1) / workers
	parts := make([][]byte, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		chunk := data[i*size : min((i+1)*size, len(data))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i], errs[i] = gzipMember(chunk, level)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return bytes.Join(parts, nil), nil
}

func gzipMember(data []byte, level int) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, level)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var (
	procsMu   sync.Mutex
	procsOurs bool // TakeProcs chose GOMAXPROCS=1, not the user
)

// lendProcs raises GOMAXPROCS to n for a CPU-bound job when the current
// value is TakeProcs's own choice, and returns what puts it back. Lending
// jobs run one at a time, so that one putting the value back cannot cut
// another's short. A user's GOMAXPROCS, and a controller's, are left
// alone.
func lendProcs(n int) (restore func()) {
	procsMu.Lock()
	if !procsOurs || runtime.GOMAXPROCS(0) >= n {
		procsMu.Unlock()
		return func() {}
	}
	prev := runtime.GOMAXPROCS(n)
	return func() {
		runtime.GOMAXPROCS(prev)
		procsMu.Unlock()
	}
}
