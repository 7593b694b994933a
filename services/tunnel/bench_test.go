package tunnel_test

import (
	"io"
	"net"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/localtest"
	"github.com/spindle-rpc/spindle/services/tunnel"
)

// sink counts what each connection sends, then closes it.
func sink(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// BenchmarkDialSetup: one tunnel made and closed, through a local agent
// (a call round trip plus the agent's TCP connect).
func BenchmarkDialSetup(b *testing.B) {
	addr := sink(b)
	ctx, cx := localtest.Dial(b)
	b.ResetTimer()
	for b.Loop() {
		c, err := tunnel.Dial(ctx, cx, "tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// BenchmarkDialThroughput: 16 MiB through one tunnel to a TCP sink.
func BenchmarkDialThroughput(b *testing.B) {
	addr := sink(b)
	ctx, cx := localtest.Dial(b)
	buf := make([]byte, 256<<10)
	const size = 16 << 20
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		c, err := tunnel.Dial(ctx, cx, "tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < size; n += len(buf) {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		c.CloseWrite()
		io.Copy(io.Discard, c) // until the agent has passed everything on
		c.Close()
	}
}
