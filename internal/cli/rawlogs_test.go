package cli

import (
	"io"
	"testing"
)

// --raw-logs reaches the controllers' options, and the daemon's request,
// whose connections it keeps apart.
func TestRawLogsFlag(t *testing.T) {
	for _, args := range [][]string{{"--raw-logs", "version"}, {"version"}} {
		g := &globals{stdout: io.Discard, stderr: io.Discard}
		root := newRootCmd(g)
		root.SetArgs(args)
		root.SetOut(io.Discard)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		want := args[0] == "--raw-logs"
		if got := g.controllerOptions(nil).AgentLogs.Raw; got != want {
			t.Errorf("%v: agent logs raw %v, want %v", args, got, want)
		}
		r, err := g.persistRequest("local", []string{"true"}, false)
		if err != nil {
			t.Fatal(err)
		}
		if r.RawLogs != want {
			t.Errorf("%v: the daemon request's RawLogs is %v", args, r.RawLogs)
		}
		escaped := *r
		escaped.RawLogs = false
		if want && groupKey(r) == groupKey(&escaped) {
			t.Errorf("raw and escaped agent logs share the daemon's connections")
		}
	}
}
