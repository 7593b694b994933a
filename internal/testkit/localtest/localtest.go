// Package localtest connects tests to a real local agent (the one
// testagent.Build made) through the local connector.
package localtest

import (
	"context"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/local"
)

// Dial connects a controller of its own to a local agent, both closed when
// t ends, and returns a 30-second context for the test's calls.
func Dial(t testing.TB) (context.Context, *spindle.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cx, closeFn, err := spindle.Dial(ctx, local.Options{}, spindle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeFn() })
	return ctx, cx
}
