package agent_test

import (
	stdctx "context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/internal/testagent"
	"github.com/spindle-rpc/spindle/services/sys"
)

// TestCustomAgent builds examples/customagent (agent.Main with an extra
// service), ships it with the local connector, and calls both the extra
// service and a default one.
func TestCustomAgent(t *testing.T) {
	path, err := testagent.BuildPackage("./examples/customagent", "customagent")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	cx, closeFn, err := spindle.Dial(ctx, local.Options{Agent: bootstrap.FromFile(path, runtime.GOOS, runtime.GOARCH)}, spindle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	var reply struct {
		Text string `msgpack:"text"`
		PID  int    `msgpack:"pid"`
	}
	if err := cx.Call(ctx, "hello.Greet", map[string]string{"name": "tester"}, &reply); err != nil {
		t.Fatal(err)
	}
	if reply.Text != "hello, tester" || reply.PID != cx.Hello().PID {
		t.Fatalf("hello.Greet replied %+v", reply)
	}
	if err := cx.Call(ctx, "hello.Greet", map[string]string{}, nil); !errors.Is(err, spindle.ErrRemote) {
		t.Fatalf("bad args returned %v", err)
	}
	if err := sys.Ping(ctx, cx); err != nil {
		t.Fatal(err)
	}
}
