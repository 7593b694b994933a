package ansiballz_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/spindle-rpc/spindle/ansible/ansiballz"
	abz "github.com/spindle-rpc/spindle/internal/testkit/ansiballz"
	"github.com/spindle-rpc/spindle/internal/testkit/localtest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/services/modules"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if _, err := testagent.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

func TestRun(t *testing.T) {
	payload := abz.Payload(t, "command", map[string]any{"_raw_params": "echo hi; exit 2", "_uses_shell": true}, abz.Python)
	ctx, c := localtest.Dial(t)
	for i, warm := range []bool{true, true, false} {
		res, err := ansiballz.Run(ctx, c, abz.Python, payload, warm)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Stdout string `json:"stdout"`
			RC     int    `json:"rc"`
		}
		if err := json.Unmarshal(res.Stdout, &out); err != nil || res.ExitCode != 1 || out.Stdout != "hi" || out.RC != 2 {
			t.Errorf("run %d (runner %v): exit %d, %v: %s %s", i, warm, res.ExitCode, err, res.Stdout, res.Stderr)
		}
	}
	stats, err := modules.Runners(ctx, c)
	if err != nil || len(stats) != 1 || stats[0].Runs != 2 {
		t.Errorf("runners %+v, %v: want one that ran both warm runs", stats, err)
	}
	if _, err := ansiballz.Run(ctx, c, abz.Python, []byte("#!/usr/bin/python3\nprint(1)\n"), true); err == nil {
		t.Error("a script that is no AnsiballZ payload was run")
	}
	if _, err := ansiballz.Run(ctx, c, "python3; rm -rf /", payload, true); err == nil {
		t.Error("an interpreter with shell characters was run")
	}
}
