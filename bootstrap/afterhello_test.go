package bootstrap

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestAfterHello: what the hello's reader buffered past the hello comes
// first and in order, then the stream itself, read directly.
func TestAfterHello(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 10000)
	stream := bytes.NewReader(append([]byte("noise\nSPINDLE-HELLO x {}\n"), payload...))
	under := &countingReader{r: stream}
	br := bufio.NewReaderSize(under, 4096)
	for _, want := range []string{"noise\n", "SPINDLE-HELLO x {}\n"} {
		if line, err := br.ReadString('\n'); err != nil || line != want {
			t.Fatalf("line %q, %v; want %q", line, err, want)
		}
	}
	buffered := br.Buffered()
	if buffered == 0 {
		t.Fatal("the test needs bytes buffered past the hello")
	}
	r := afterHello(br, under)
	readsBefore := len(under.sizes)
	got, err := io.ReadAll(iotest.OneByteReader(io.LimitReader(r, int64(buffered))))
	if err != nil {
		t.Fatal(err)
	}
	if len(under.sizes) != readsBefore {
		t.Fatal("read the stream before the buffered bytes were used up")
	}
	// Then reads in pieces smaller than the bufio buffer, as yamux's: they
	// must reach the stream as they are, not through the buffer's fills.
	var rest []byte
	piece := make([]byte, 1000)
	for {
		n, err := r.Read(piece)
		rest = append(rest, piece[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(append(got, rest...), payload) {
		t.Fatalf("got %d bytes, not the %d sent after the hello", len(got)+len(rest), len(payload))
	}
	if len(under.sizes) == readsBefore {
		t.Fatal("the stream was never read directly")
	}
	for _, size := range under.sizes[readsBefore:] {
		if size != len(piece) {
			t.Fatalf("the stream was read %d bytes at a time after the hello, not the caller's %d: through the buffer", size, len(piece))
		}
	}
	if _, ok := r.(*drainFirst); !ok {
		t.Fatalf("afterHello with bytes buffered returned %T", r)
	}

	// Nothing buffered: the stream itself.
	empty := bufio.NewReader(strings.NewReader(""))
	if r := afterHello(empty, under); r != io.Reader(under) {
		t.Fatalf("afterHello with nothing buffered returned %T, not the stream", r)
	}
}

// countingReader records the size of every read asked of it.
type countingReader struct {
	r     io.Reader
	sizes []int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.sizes = append(c.sizes, len(p))
	return c.r.Read(p)
}
