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
			n := rng.Intn(3 * largeChunk)
			if rng.Intn(2) == 0 {
				n = rng.Intn(2 * smallChunk)
			}
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
			b := make([]byte, rng.Intn(2*largeChunk)+1)
			if rng.Intn(2) == 0 {
				b = make([]byte, rng.Intn(smallChunk)+1)
			}
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

// A stream whose reader keeps up holds one small chunk, not a large one.
func TestRecvQueueSmallFramesTakeSmallChunks(t *testing.T) {
	var q recvQueue
	if _, err := q.readFrom(bytes.NewReader(make([]byte, 100)), 100); err != nil {
		t.Fatal(err)
	}
	if len(q.chunks) != 1 || len(*q.chunks[0]) != smallChunk {
		t.Fatalf("100 bytes took %d chunks, the first of %d bytes", len(q.chunks), len(*q.chunks[0]))
	}
	if _, err := q.readFrom(bytes.NewReader(make([]byte, smallChunk)), smallChunk); err != nil {
		t.Fatal(err)
	}
	if len(q.chunks) != 2 || len(*q.chunks[1]) != largeChunk {
		t.Fatalf("accumulating data did not go to a large chunk: %d chunks", len(q.chunks))
	}
	b := make([]byte, 2*smallChunk)
	if n, _ := q.Read(b); n != 100+smallChunk || q.Len() != 0 || q.chunks != nil {
		t.Fatalf("Read %d bytes, %d left, %d chunks held", n, q.Len(), len(q.chunks))
	}
}
