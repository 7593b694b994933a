package router

import (
	"bytes"
	"encoding/binary"
	"testing"
)

type recordingConn struct {
	bytes.Buffer
	writes int
}

func (r *recordingConn) Write(p []byte) (int, error) { r.writes++; return r.Buffer.Write(p) }
func (r *recordingConn) Close() error                { return nil }

func yamuxHeader(typ byte, length uint32) []byte {
	h := make([]byte, yamuxHeaderLen)
	h[1] = typ
	binary.BigEndian.PutUint32(h[8:], length)
	return h
}

func TestCoalescingJoinsDataHeaderAndBody(t *testing.T) {
	rec := &recordingConn{}
	c := &coalescingConn{ReadWriteCloser: rec}
	body := []byte("hello")
	c.Write(yamuxHeader(0, uint32(len(body))))
	if rec.writes != 0 {
		t.Fatal("a data header was written before its body")
	}
	if n, err := c.Write(body); n != len(body) || err != nil {
		t.Fatalf("body write returned %d, %v", n, err)
	}
	if rec.writes != 1 || !bytes.Equal(rec.Bytes(), append(yamuxHeader(0, 5), body...)) {
		t.Fatalf("got %d writes of %x", rec.writes, rec.Bytes())
	}
	// Window updates and empty data frames (FIN) pass straight through.
	c.Write(yamuxHeader(1, 1<<20))
	c.Write(yamuxHeader(0, 0))
	if rec.writes != 3 {
		t.Fatalf("control headers were held: %d writes", rec.writes)
	}
	// Large bodies are not copied.
	big := make([]byte, maxCoalesce+1)
	c.Write(yamuxHeader(0, uint32(len(big))))
	c.Write(big)
	if rec.writes != 5 || rec.Len() != 5*yamuxHeaderLen+5+len(big)-2*yamuxHeaderLen+yamuxHeaderLen {
		t.Fatalf("large body: %d writes, %d bytes", rec.writes, rec.Len())
	}
}
