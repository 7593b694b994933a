package bench

import (
	"net"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/latency"
)

func TestDelayProxy(t *testing.T) {
	echo, err := startEcho()
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	p, err := latency.Start(echo.Addr(), 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i)
	}
	t0 := time.Now()
	go c.Write(big) //nolint:errcheck // checked by the read
	got := make([]byte, len(big))
	if _, err := readFull(c, got); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(t0); rtt < 10*time.Millisecond {
		t.Errorf("1 MiB round trip through a 5 ms proxy took %v, want ≥ 10ms", rtt)
	}
	for i := range got {
		if got[i] != big[i] {
			t.Fatalf("byte %d differs", i)
		}
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
