package sshtest

import (
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/latency"
)

// The proxy itself lives in internal/latency, shared with `spindle-bench`.

// LatencyProxy forwards 127.0.0.1:random to a target with added latency.
type LatencyProxy = latency.Proxy

// Proxy starts a latency proxy to target (host:port) for t, stopped when t
// ends, and returns its address.
func Proxy(t testing.TB, target string, oneWay time.Duration) string {
	return StartProxy(t, target, oneWay).Addr()
}

// StartProxy is Proxy returning the proxy itself.
func StartProxy(t testing.TB, target string, oneWay time.Duration) *LatencyProxy {
	t.Helper()
	p, err := latency.Start(target, oneWay)
	if err != nil {
		t.Fatalf("sshtest: proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}
