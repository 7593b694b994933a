package ansible

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/ansible/ansiballz"
	"github.com/spindle-rpc/spindle/daemon"
	"github.com/spindle-rpc/spindle/hostvars"
	"go.uber.org/zap"
)

// payload is an AnsiballZ-like wrapper with a zip of n random bytes in
// the form of one ansible-core generation (open, close).
func payload(n int, open, close, taskVars string) (full []byte, zip string) {
	raw := make([]byte, n)
	rand.Read(raw)
	zip = base64.StdEncoding.EncodeToString(raw)
	return []byte("#!/usr/bin/python3\n# -*- coding: utf-8 -*-\n_ANSIBALLZ_WRAPPER = True # For test-module.py\n" +
		"def _ansiballz_main():\n    " + open + zip + close + "\n    # ZIPDATA is written out\n" + taskVars + "\n"), zip
}

func TestSplitAnsiballz(t *testing.T) {
	for _, f := range []struct{ open, close string }{
		{`ZIPDATA = """`, `"""`},                             // 2.14-2.15
		{`ZIPDATA = '`, `'`},                                 // 2.16-2.18
		{`_ansiballz_main(zip_data='`, `', module_fqn='x')`}, // 2.19+
	} {
		p, zip := payload(8<<10, f.open, f.close, "date_time=2026")
		prefix, z, suffix, ok := ansiballz.Split(p)
		if !ok || string(z) != zip || !bytes.Equal(append(append(append([]byte{}, prefix...), z...), suffix...), p) {
			t.Errorf("%s: not split (ok %v)", f.open, ok)
		}
	}
	good, _ := payload(8<<10, `ZIPDATA = """`, `"""`, "")
	for name, p := range map[string][]byte{
		"no shebang":    good[2:],
		"no marker":     bytes.Replace(good, []byte("_ANSIBALLZ_WRAPPER = True"), []byte("_WRAPPER = True"), 1),
		"two zips":      append(append([]byte{}, good...), []byte(`ZIPDATA = """QUFB"""`)...),
		"two forms":     append(append([]byte{}, good...), []byte(`zip_data='QUFB'`)...),
		"not base64":    bytes.Replace(good, []byte(`ZIPDATA = """`), []byte(`ZIPDATA = """ $`), 1),
		"unterminated":  good[:len(good)-60],
		"small zip":     []byte("#!/x\n_ANSIBALLZ_WRAPPER = True\nZIPDATA = \"\"\"QUFB\"\"\"\n"),
		"plain command": []byte("echo hi"),
	} {
		if _, _, _, ok := ansiballz.Split(p); ok {
			t.Errorf("%s: taken for a payload", name)
		}
	}
	if _, _, _, ok := ansiballz.Split([]byte(strings.Repeat("x", 10))); ok {
		t.Error("x")
	}
}

// A zip or a wrapper the endpoint believes stored but the agent lacks
// (evicted, a new agent) is sent again, and the command runs once, on
// the right stdin.
func TestAnsiballzResentWhenLost(t *testing.T) {
	reg := daemon.NewRegistry()
	defer reg.Close()
	e := &Endpoint{Registry: reg, NewController: func() (*spindle.Controller, *zap.Logger) {
		return spindle.NewController(spindle.Options{}), nil
	}}
	ctx := context.Background()
	marker := t.TempDir() + "/runs"
	cmd := "sha256sum; echo x >> " + marker
	r := &request{Host: &hostvars.Host{Name: "here", Target: "local"}, Cmd: &cmd}
	c, cerr := e.connect(ctx, r)
	if cerr != nil {
		t.Fatal(cerr)
	}
	p, zip := payload(16<<10, `zip_data='`, `'`, "")
	zipSum := ansiballz.NewZip([]byte(zip)).Sum
	runOnce := func(what string, p []byte) {
		t.Helper()
		os.Remove(marker)
		sum := sha256.Sum256(p)
		head, out, _, rerr := e.exec(ctx, r, p)
		if rerr != nil || head["rc"] != 0 || !strings.HasPrefix(string(out), hex.EncodeToString(sum[:])) {
			t.Fatalf("%s: %v %q %v: not the payload's hash", what, head, out, rerr)
		}
		if b, _ := os.ReadFile(marker); string(b) != "x\n" {
			t.Errorf("%s: the command ran %d times", what, strings.Count(string(b), "x"))
		}
		if !e.zips.has(c.cx, zipSum) || e.zips.wrapper(c.cx, zipSum) == nil {
			t.Errorf("%s: the zip and wrapper sent are not remembered", what)
		}
	}
	e.zips.set(c.cx, zipSum, true, nil) // but never sent
	runOnce("a lost zip", p)

	// The zip held, a wrapper that never crossed believed held.
	prefix, _, suffix, _ := ansiballz.Split(p)
	e.zips.set(c.cx, zipSum, true, ansiballz.NewWrapper(append([]byte("#!x"), prefix...), suffix))
	other := bytes.Replace(p, []byte("# ZIPDATA is written out"), []byte("# date_time = 2026-11-27"), 1)
	runOnce("a lost wrapper", other)
	runOnce("a held wrapper", p)
}

func TestPythonOnly(t *testing.T) {
	for cmd, want := range map[string]struct {
		interp string
		env    map[string]string
	}{
		"/bin/sh -c '/usr/bin/python3 && sleep 0'":    {"/usr/bin/python3", nil},
		"/bin/sh -c '/usr/bin/python3.11 && sleep 0'": {"/usr/bin/python3.11", nil},
		"/bin/sh -c '/usr/bin/python3'":               {"/usr/bin/python3", nil},
		"/bin/sh -c /usr/libexec/platform-python":     {"/usr/libexec/platform-python", nil},
		// environment: {FOO: bar, Q: "it's $HOME x"} as Ansible quotes it
		`/bin/sh -c 'FOO=bar Q='"'"'it'"'"'"'"'"'"'"'"'s $HOME x'"'"' /usr/bin/python3 && sleep 0'`: {"/usr/bin/python3", map[string]string{"FOO": "bar", "Q": "it's $HOME x"}},
		"/bin/sh -c 'EMPTY= /usr/bin/python3 && sleep 0'":                                           {"/usr/bin/python3", map[string]string{"EMPTY": ""}},
		"/bin/sh -c 'FOO=$HOME /usr/bin/python3 && sleep 0'":                                        {},
		"/bin/sh -c 'FOO=`id` /usr/bin/python3 && sleep 0'":                                         {},
		"/bin/sh -c '1X=1 /usr/bin/python3 && sleep 0'":                                             {},
		"/bin/sh -c 'python3 && sleep 0'":                                                           {},
		"/bin/sh -c '/usr/bin/python3 -c 1 && sleep 0'":                                             {},
		"/bin/sh -c '/usr/bin/python3; rm -rf /tmp/x && sleep 0'":                                   {},
		"/bin/sh -c '/usr/bin/python3 && rm -rf /'":                                                 {},
		"/bin/sh -c '/usr/bin/python3 '\"'\"'&&'\"'\"' sleep 0'":                                    {},
		"/bin/sh -c '/usr/bin/python3 > /tmp/x && sleep 0'":                                         {},
		"/bin/sh -c '/usr/bin/perl && sleep 0'":                                                     {},
		"/bin/sh -c '/usr/bin/python3 && sleep 0":                                                   {},
		"sudo -H -S -n -u root /bin/sh -c 'echo BECOME-SUCCESS-x ; /usr/bin/python3'":               {},
		"/bin/sh -c '/tmp/../usr/bin/python3 && sleep 0'":                                           {},
		"/usr/bin/python3": {},
	} {
		interp, env, ok := pythonOnly(cmd)
		if interp != want.interp || ok != (want.interp != "") || !reflect.DeepEqual(env, want.env) {
			t.Errorf("%s: %q %q %v, want %q %q", cmd, interp, env, ok, want.interp, want.env)
		}
	}
}
