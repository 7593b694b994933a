package ansiballz_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/ansible/ansiballz"
	abz "github.com/spindle-rpc/spindle/internal/testkit/ansiballz"
	"github.com/spindle-rpc/spindle/internal/testkit/localtest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/exec"
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

// Real payloads of one module with other arguments, sent as their
// differences from the first one's wrapper, reach the agent byte for
// byte, for less than their wrappers; and run on the warm runner,
// whose zip part moved.
func TestWrapperDelta(t *testing.T) {
	ctx, c := localtest.Dial(t)
	args := []map[string]any{
		{"_raw_params": "hostname"},
		{"_raw_params": "hostname"},
		{"_raw_params": "echo other"},
		{"_raw_params": "echo " + strings.Repeat("long ", 400)},
		{"_raw_params": "echo ünïcode ☃", "chdir": "/"},
		{"_raw_params": "true", "_uses_shell": true, "creates": "/nonexistent", "stdin": "x\"y'z"},
		{},
	}
	var held *ansiballz.Wrapper
	// A zip built in another second differs in its files' times.
	zips := map[[sha256.Size]byte]bool{}
	for i, a := range args {
		payload := abz.Payload(t, "command", a, abz.Python)
		prefix, zip, suffix, ok := ansiballz.Split(payload)
		if !ok {
			t.Fatalf("payload %d: not split", i)
		}
		z := ansiballz.NewZip(zip)
		sum := z.Sum
		withZip := !zips[sum]
		zips[sum] = true
		var parts []exec.StdinPart
		var zipPart int
		if held == nil {
			held = ansiballz.NewWrapper(prefix, suffix)
			parts, zipPart = held.StdinParts(z, withZip)
			// The zip crosses as the binary its base64 stands for.
			if !parts[zipPart].Base64 || len(parts[zipPart].Data)*4 > len(zip)*3+4 {
				t.Fatalf("payload %d: the zip crosses as %d bytes of %d in base64 (encoded by the agent: %v)", i, len(parts[zipPart].Data), len(zip), parts[zipPart].Base64)
			}
		} else {
			parts, zipPart = held.Delta(prefix, z, suffix, withZip)
			sent := 0
			for j, p := range parts {
				if j != zipPart {
					sent += len(p.Data)
				}
			}
			// Other arguments: the bytes from the time to them; the same:
			// the time alone.
			if wrapper := len(prefix) + len(suffix); sent >= wrapper || i == 1 && sent > 64 {
				t.Errorf("payload %d: %d bytes of a %d-byte wrapper sent", i, sent, wrapper)
			}
			t.Logf("payload %d: %d bytes of a %d-byte wrapper sent in %d parts", i, sent, len(prefix)+len(suffix), len(parts))
		}
		if !bytes.Equal(parts[zipPart].SHA256, sum[:]) {
			t.Fatalf("payload %d: part %d is not the zip", i, zipPart)
		}
		p, err := exec.Start(ctx, c, exec.Cmd{Argv: []string{"cat"}, StdinParts: parts})
		if err != nil {
			t.Fatal(err)
		}
		p.Stdin().Close()
		var out bytes.Buffer
		if err := p.CopyOutput(&out, nil); err != nil {
			t.Fatal(err)
		}
		if res, err := p.Wait(); err != nil || res.ExitCode != 0 || !bytes.Equal(out.Bytes(), payload) {
			t.Fatalf("payload %d: %v, %d bytes on the agent, not the %d of the payload", i, err, out.Len(), len(payload))
		}
		if i == 2 {
			warm(t, ctx, c, parts, zipPart, "other")
		}
	}
}

// warm runs a command payload's parts on the agent's warm runner and
// checks its output.
func warm(t *testing.T, ctx context.Context, c rpc.Caller, parts []exec.StdinPart, zipPart int, want string) {
	t.Helper()
	p, err := exec.Start(ctx, c, exec.Cmd{Shell: abz.Python, StdinParts: parts, Python: &exec.Python{Interpreter: abz.Python, ZipPart: zipPart}})
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	var out, errb bytes.Buffer
	cerr := p.CopyOutput(&out, &errb)
	res, err := p.Wait()
	var got struct {
		Stdout string `json:"stdout"`
	}
	if err != nil || cerr != nil || res.ExitCode != 0 || json.Unmarshal(out.Bytes(), &got) != nil || got.Stdout != want {
		t.Fatalf("warm run: %v %v %+v: %s %s", err, cerr, res, out.Bytes(), errb.Bytes())
	}
	stats, err := modules.Runners(ctx, c)
	if err != nil || len(stats) != 1 || stats[0].Runs == 0 {
		t.Errorf("runners %+v, %v: want one that ran", stats, err)
	}
}

// A wrapper that shares too little with the held one is sent as it is;
// one that shares all of it as one slice.
func TestDeltaFallsBack(t *testing.T) {
	held := ansiballz.NewWrapper([]byte(strings.Repeat("p", 200)), []byte(strings.Repeat("s", 200)))
	parts, zipPart := held.Delta([]byte("#!other"), ansiballz.NewZip([]byte("emlw")), []byte(strings.Repeat("s", 200)), true)
	if len(parts) != 3 || zipPart != 1 || string(parts[0].Data) != "#!other" || parts[0].SHA256 != nil || parts[2].Data != nil || parts[2].Length != 200 {
		t.Errorf("%+v, zip part %d", parts, zipPart)
	}
}

// A zip crosses as its binary only when the agent's encoding gives the
// payload's base64 back byte for byte.
func TestZipCrossesDecoded(t *testing.T) {
	for _, tc := range []struct {
		text string
		b64  bool
	}{
		{"emlwcw==", true},
		{"emm=", false}, // padding bits set: "zi", which encodes as "emk="
		{"emlw", true},
		{"eml", false}, // not padded
	} {
		p := ansiballz.StdinParts(nil, ansiballz.NewZip([]byte(tc.text)), nil, true)[1]
		if p.Base64 != tc.b64 {
			t.Errorf("%q: sent encoded by the agent %v, want %v", tc.text, p.Base64, tc.b64)
		}
		if !tc.b64 && string(p.Data) != tc.text {
			t.Errorf("%q: sent as %q", tc.text, p.Data)
		}
		if tc.b64 && base64.StdEncoding.EncodeToString(p.Data) != tc.text {
			t.Errorf("%q: sent as %q, which encodes otherwise", tc.text, p.Data)
		}
	}
}

// Any bytes' standard encoding crosses as those bytes.
func TestZipRoundTrip(t *testing.T) {
	for n := range 70 {
		raw := make([]byte, n)
		rand.Read(raw)
		text := base64.StdEncoding.EncodeToString(raw)
		p := ansiballz.StdinParts(nil, ansiballz.NewZip([]byte(text)), nil, true)[1]
		if !p.Base64 || !bytes.Equal(p.Data, raw) {
			t.Fatalf("%d bytes: sent %q (encoded by the agent: %v)", n, p.Data, p.Base64)
		}
	}
}
