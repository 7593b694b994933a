// Package ansiballz builds real pipelined AnsiballZ payloads for tests,
// with the ansible-core installed from the distribution's packages
// (Debian 12: ansible-core 2.14) and its own Python.
package ansiballz

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/spindle-rpc/spindle/internal/testkit"
)

// Python is the distribution's interpreter, which imports its
// ansible-core.
const Python = "/usr/bin/python3"

//go:embed mkpayload.py
var mkpayload string

// Need ends t through testkit.Unavailable unless Python imports ansible.
func Need(t testing.TB) {
	t.Helper()
	err := exec.Command(Python, "-c", "import ansible.executor.module_common").Run()
	testkit.Need(t, err == nil, "ansible-core for "+Python+" (apt-get install ansible-core)")
}

// Payload is the stdin of a pipelined run of module (a name, or the
// absolute path of a module file) with args, for interpreter.
func Payload(t testing.TB, module string, args map[string]any, interpreter string) []byte {
	t.Helper()
	Need(t)
	a, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Python, "-c", mkpayload, module, string(a), interpreter)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "ANSIBLE_LOCAL_TEMP="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ansiballz: build a payload of %s: %v\n%s", module, err, stderr.Bytes())
	}
	return out
}

// Split returns the payload around its base64 zip (2.14-2.15's ZIPDATA
// form and the later ones).
func Split(t testing.TB, payload []byte) (prefix, zip, suffix []byte) {
	t.Helper()
	for _, f := range []struct{ open, close string }{{`ZIPDATA = """`, `"""`}, {`ZIPDATA = '`, `'`}, {`zip_data='`, `'`}} {
		i := bytes.Index(payload, []byte(f.open))
		if i < 0 {
			continue
		}
		i += len(f.open)
		j := bytes.Index(payload[i:], []byte(f.close))
		if j < 0 {
			break
		}
		return payload[:i], payload[i : i+j], payload[i+j:]
	}
	t.Fatal("ansiballz: no zip in the payload")
	return nil, nil, nil
}
