package router

import "time"

// Limits for the tests of package router_test.
const (
	MaxPendingPongs       = maxPendingPongs
	MaxRefusedStreamOpens = maxRefusedStreamOpens
	RefusalWarnBurst      = refusalWarnBurst
	RefusalWarnInterval   = refusalWarnInterval
)

// SetClock sets the clock of r's refusal warnings' rate limit. Call it
// before r has links.
func SetClock(r *Router, now func() time.Time) { r.now = now }

// KeepalivePings is how many keepalive pings l has sent.
func KeepalivePings(l *Link) int64 { return l.alive.sent.Load() }
