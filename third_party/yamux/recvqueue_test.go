// This file is not part of hashicorp/yamux v0.1.2: Spindle added it.

package yamux

import (
	"bytes"
	"math/rand"
	"testing"
)

// recvQueue hands out exactly what was appended, in order, across chunk
// boundaries, whatever the sizes of appends and reads.
func TestRecvQueueMatchesABuffer(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var q recvQueue
	var want bytes.Buffer
	next := byte(0)
	for i := 0; i < 2000; i++ {
		if rng.Intn(2) == 0 {
			n := rng.Intn(3 * recvChunk)
			src := make([]byte, n)
			for j := range src {
				src[j] = next
				next++
			}
			got, err := q.readFrom(bytes.NewReader(src), n)
			if err != nil || got != int64(n) {
				t.Fatalf("readFrom(%d) = %d, %v", n, got, err)
			}
			want.Write(src)
		} else {
			b := make([]byte, rng.Intn(2*recvChunk)+1)
			n, _ := q.Read(b)
			w := make([]byte, len(b))
			m, _ := want.Read(w)
			if n != m || !bytes.Equal(b[:n], w[:m]) {
				t.Fatalf("step %d: Read gave %d bytes, want %d (or different ones)", i, n, m)
			}
		}
		if q.Len() != want.Len() {
			t.Fatalf("step %d: Len %d, want %d", i, q.Len(), want.Len())
		}
	}
	// A short source: what it had, and its error.
	got, err := q.readFrom(bytes.NewReader([]byte("abc")), 10)
	if got != 3 || err == nil {
		t.Fatalf("short readFrom = %d, %v", got, err)
	}
}
