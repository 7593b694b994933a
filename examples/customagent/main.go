// Command customagent shows how a Go programmer builds their own agent with
// an extra service. Ship it with
//
//	ctl.Connect(ctx, local.Options{Agent: bootstrap.FromFile("./customagent", "linux", "amd64")})
//
// and call it like any other method: cx.Call(ctx, "hello.Greet", GreetArgs{Name: "you"}, &reply).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spindle-rpc/spindle/agent"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
)

// GreetArgs are hello.Greet's arguments.
type GreetArgs struct {
	Name string `msgpack:"name"`
}

// Greeting is hello.Greet's reply.
type Greeting struct {
	Text string `msgpack:"text"`
	PID  int    `msgpack:"pid"`
}

func greet(ctx context.Context, call *rpc.Call) (any, error) {
	var a GreetArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	if a.Name == "" {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "hello.Greet: name is required")
	}
	return &Greeting{Text: fmt.Sprintf("hello, %s", a.Name), PID: os.Getpid()}, nil
}

func main() {
	agent.Main(agent.WithService("hello.Greet", greet))
}
