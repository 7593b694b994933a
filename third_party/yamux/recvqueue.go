// This file is not part of hashicorp/yamux v0.1.2: Spindle added it (see
// README.spindle.md). It is under the same licence (MPL-2.0).

package yamux

import (
	"io"
	"sync"
)

// Chunk sizes of a recvQueue: a stream whose reader keeps up holds at most
// one small chunk (control messages, interactive output), one that
// accumulates data gets large ones.
const (
	smallChunk = 4 << 10
	largeChunk = 64 << 10
)

var (
	smallChunks = sync.Pool{New: func() any { b := make([]byte, smallChunk); return &b }}
	largeChunks = sync.Pool{New: func() any { b := make([]byte, largeChunk); return &b }}
)

// recvQueue is a stream's received, unread data: a queue of pooled
// chunks. It replaces the bytes.Buffer that upstream grows by doubling
// whenever the reader lags — a fresh, zeroed allocation of up to twice the
// window, for every stream, which was 6–8 % of all CPU while Spindle's
// controller received a file. Memory is bounded by the stream's receive
// window, as before, plus one partly filled chunk.
type recvQueue struct {
	chunks []*[]byte // chunks[0][off:] is the next unread byte; the last is filled up to tail
	off    int
	tail   int
	n      int // unread bytes
}

// Len is the number of unread bytes; a nil queue has none.
func (q *recvQueue) Len() int {
	if q == nil {
		return 0
	}
	return q.n
}

// Cap is the bytes the queue's chunks hold, read or not: what upstream's
// bytes.Buffer.Cap reported, which upstream's tests log.
func (q *recvQueue) Cap() int {
	if q == nil {
		return 0
	}
	c := 0
	for _, b := range q.chunks {
		c += len(*b)
	}
	return c
}

// readFrom appends exactly length bytes read from r, or fewer and r's
// error.
func (q *recvQueue) readFrom(r io.Reader, length int) (int64, error) {
	var total int64
	for length > 0 {
		if len(q.chunks) == 0 || q.tail == len(*q.chunks[len(q.chunks)-1]) {
			pool := &largeChunks
			if len(q.chunks) == 0 && length <= smallChunk {
				pool = &smallChunks
			}
			q.chunks = append(q.chunks, pool.Get().(*[]byte))
			q.tail = 0
		}
		c := *q.chunks[len(q.chunks)-1]
		m := len(c) - q.tail // (yamux's own min takes uint32s)
		if length < m {
			m = length
		}
		k, err := io.ReadFull(r, c[q.tail:q.tail+m])
		q.tail += k
		q.n += k
		total += int64(k)
		length -= k
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Read moves unread bytes into b, returning chunks it empties to their
// pool.
func (q *recvQueue) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) && q.n > 0 {
		c := *q.chunks[0]
		end := len(c)
		if len(q.chunks) == 1 {
			end = q.tail
		}
		k := copy(b[n:], c[q.off:end])
		n += k
		q.off += k
		q.n -= k
		if q.off == end {
			if len(c) == smallChunk {
				smallChunks.Put(q.chunks[0])
			} else {
				largeChunks.Put(q.chunks[0])
			}
			q.chunks[0] = nil
			q.chunks = q.chunks[1:]
			q.off = 0
			if len(q.chunks) == 0 {
				q.chunks = nil
				q.tail = 0
			}
		}
	}
	return n, nil
}
