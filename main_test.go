package spindle_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"go.uber.org/goleak"
)

// The examples start local agents: build one (or use $SPINDLE_AGENT).
func TestMain(m *testing.M) {
	if _, err := testagent.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}
