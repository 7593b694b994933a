// Command hostileagent is a test build of the agent that behaves like a
// compromised target. It is a full agent (so it bootstraps and serves like
// any other), plus one method, hostile.Attack, which tries every way out
// of its branch that the security policy forbids: calling a sibling,
// forging the controller's or a sibling's src, calling its parent's and
// the controller's services, hijacking a sibling's route, and opening a
// circuit upward. Each attempt tries to create a marker file, so a test
// can tell whether anything ran. The routers that receive these messages
// must refuse and log every one; integration/hostile_test.go checks.
//
// hostile.Flood goes below the bus: it stops reading from its parent and
// floods it with raw yamux frames (pings, stream opens), which the parent
// must survive and answer by dropping the link; hostile.Usage reports
// what an agent holds, so that a test can measure the parent.
//
// hostile.Log sends log records straight to the controller, past the
// agent's own logger: a flood ("log-flood"), or one record whose message
// and fields carry terminal escape sequences and a forged line
// ("log-escape"). The controller must rate-limit the first and show the
// second escaped.
package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spindle-rpc/spindle/agent"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/exec"
	slog "github.com/spindle-rpc/spindle/services/log"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap/zapcore"
)

// AttackArgs names the victims.
type AttackArgs struct {
	Parent  uint32 `msgpack:"parent"`
	Sibling uint32 `msgpack:"sibling"`
	Marker  string `msgpack:"marker"` // attempt N tries to create Marker-N
}

// AttackResult says which attempts this agent could even put on the wire.
type AttackResult struct {
	Sent []string `msgpack:"sent"`
}

// routeAnnouncement mirrors the router's add_route payload.
type routeAnnouncement struct {
	Op  uint8    `msgpack:"op"`
	IDs []uint32 `msgpack:"ids"`
}

// LogArgs asks hostile.Log for Mode "log-flood" (N records) or
// "log-escape" (one record).
type LogArgs struct {
	Mode string `msgpack:"mode"`
	N    int    `msgpack:"n"`
}

// LogEscape is the message (and a field's value) of the "log-escape"
// record: it retitles the window, erases the line, forges a line of its
// own, and sets red through an 8-bit CSI.
const LogEscape = "\x1b]0;pwned\x07\r\x1b[2Kall 50 targets OK\nweb9: \u009b31mforged\x1b[0m"

func main() {
	var parent *floodConn
	agent.Main(agent.WithParentConn(func(c io.ReadWriteCloser) io.ReadWriteCloser {
		parent = newFloodConn(c)
		return parent
	}), agent.WithRouterServices(func(rt *router.Router, reg *rpc.Registry) {
		reg.Handle("hostile.Flood", func(ctx context.Context, call *rpc.Call) (any, error) {
			var a FloodArgs
			if err := call.Args(&a); err != nil {
				return nil, err
			}
			return parent.flood(a)
		})
		reg.Handle("hostile.Usage", func(ctx context.Context, call *rpc.Call) (any, error) {
			return usage(), nil
		})
		reg.Handle("hostile.Attack", func(ctx context.Context, call *rpc.Call) (any, error) {
			var a AttackArgs
			if err := call.Args(&a); err != nil {
				return nil, err
			}
			return attack(rt, a)
		})
		reg.Handle("hostile.Log", func(ctx context.Context, call *rpc.Call) (any, error) {
			var a LogArgs
			if err := call.Args(&a); err != nil {
				return nil, err
			}
			return hostileLog(rt, a)
		})
	}))
}

// hostileLog sends the records and returns how many went on the wire.
// They go before the call's reply, on the same ordered bus.
func hostileLog(rt *router.Router, a LogArgs) (int, error) {
	send := func(msg, fields string) error {
		data, err := wire.Marshal(&slog.Record{Level: int8(zapcore.WarnLevel), Time: time.Now().UnixNano(), Msg: msg, Fields: fields})
		if err != nil {
			return err
		}
		return rt.Send(&router.Message{Dst: router.ControllerID, Handle: router.HandleLog, Data: data})
	}
	switch a.Mode {
	case "log-flood":
		for i := range a.N {
			if err := send(fmt.Sprintf("flood %d", i), ""); err != nil {
				return i, err
			}
		}
		return a.N, nil
	case "log-escape":
		// Raw bytes in the fields' JSON, as a hostile agent would send
		// them (zap's own encoder would have escaped them).
		return 1, send(LogEscape, `{"k":"`+LogEscape+`"}`)
	}
	return 0, fmt.Errorf("hostile.Log: unknown mode %q (log-flood, log-escape)", a.Mode)
}

func touch(path string) []byte {
	args, _ := wire.Marshal(&exec.Cmd{Argv: []string{"touch", path}})
	b, _ := wire.Marshal(&rpc.Request{Method: exec.MethodRun, Args: msgpack.RawMessage(args)})
	return b
}

func attack(rt *router.Router, a AttackArgs) (*AttackResult, error) {
	var res AttackResult
	me := rt.ID()
	try := func(name string, err error) {
		if err == nil {
			res.Sent = append(res.Sent, name)
		}
	}
	m := func(n int) string { return fmt.Sprintf("%s-%d", a.Marker, n) }

	// 1. Address a sibling branch directly.
	try("call-sibling", rt.Send(&router.Message{Dst: a.Sibling, Handle: router.HandleCall, Data: touch(m(1))}))
	// 2. Claim to be the controller, toward the sibling.
	try("forge-controller-to-sibling", rt.UnsafeSendUpward(&router.Message{Src: router.ControllerID, Dst: a.Sibling, Handle: router.HandleCall, Data: touch(m(2))}))
	// 3. Call a service on the parent agent.
	try("call-parent", rt.Send(&router.Message{Dst: a.Parent, Handle: router.HandleCall, Data: touch(m(3))}))
	// 4. Call a service on the controller.
	try("call-controller", rt.Send(&router.Message{Dst: router.ControllerID, Handle: router.HandleCall, Data: touch(m(4))}))
	// 5. Claim to be the sibling, toward the parent.
	try("forge-sibling-to-parent", rt.UnsafeSendUpward(&router.Message{Src: a.Sibling, Dst: a.Parent, Handle: router.HandleCall, Data: touch(m(5))}))
	// 6. Announce the sibling's id as ours, to steal its traffic.
	ann, _ := wire.Marshal(&routeAnnouncement{Op: 2, IDs: []uint32{a.Sibling}})
	try("hijack-sibling-route", rt.UnsafeSendUpward(&router.Message{Src: me, Dst: router.ControllerID, Handle: router.HandleRoute, Data: ann}))
	// 7. Open a circuit upward, toward the sibling.
	if c, err := rt.UnsafeOpenUpward(&router.Message{Src: me, Dst: a.Sibling, Handle: router.HandleCall, Data: touch(m(7))}); err == nil {
		res.Sent = append(res.Sent, "circuit-upward")
		// The parent refuses it by closing the stream (after logging):
		// wait for that, so the refusal is logged before this reply.
		buf := make([]byte, 1)
		c.Read(buf)
		c.Close()
	}
	return &res, nil
}
