package cli

import (
	"bufio"
	"bytes"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/ansible/wire"
)

func TestAnsibleInstallAndEnv(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "connection_plugins")
	out, errs, code := spindleCmd(t, "", "ansible", "env", "--path", dir)
	if code != 0 || !strings.Contains(out, "not installed yet") {
		t.Errorf("env before install: exit %d, %q, %q", code, out, errs)
	}
	out, errs, code = spindleCmd(t, "", "ansible", "install", "--path", dir)
	if code != 0 || !strings.Contains(out, filepath.Join(dir, "spindle.py")) || !strings.Contains(out, "ansible_connection=spindle") {
		t.Fatalf("install: exit %d, %q, %q", code, out, errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "spindle.py"))
	if err != nil || !strings.Contains(string(b), "SPINDLE_PATH = \""+filepath.Join(binDir, "spindle")+"\"") {
		t.Errorf("installed plugin: %v\n%s", err, b)
	}
	cmd := osexec.Command(filepath.Join(binDir, "spindle"), "ansible", "env", "--path", dir)
	cmd.Env = append(os.Environ(), "ANSIBLE_CONNECTION_PLUGINS=/a:"+dir)
	got, err := cmd.Output()
	if err != nil || !strings.Contains(string(got), "export ANSIBLE_CONNECTION_PLUGINS="+dir+":/a\n") || strings.Contains(string(got), "not installed") {
		t.Errorf("env: %v, %q", err, got)
	}
	if _, errs, code := spindleCmd(t, "", "daemon", "--ansible"); code != 2 || !strings.Contains(errs, "--socket") {
		t.Errorf("--ansible without --socket: exit %d, %q", code, errs)
	}
}

// Two daemons started at once for one socket (two plugins that found
// none) both report "ok", and one of them serves.
func TestAnsibleDaemonStartRace(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ansible.sock")
	var cmds []*osexec.Cmd
	var readers []*os.File
	for range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := osexec.Command(filepath.Join(binDir, "spindle"), "daemon", "--ansible", "--socket", sock, "--idle", "1m", "--ready-fd", "3")
		cmd.ExtraFiles = []*os.File{w}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		cmds, readers = append(cmds, cmd), append(readers, r)
	}
	for i, r := range readers {
		line, _ := bufio.NewReader(r).ReadString('\n')
		r.Close()
		if line != "ok\n" {
			t.Errorf("daemon %d said %q, want ok", i, line)
		}
	}
	request := func(op string) []byte {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := wire.WriteRequest(c, map[string]any{"v": 1, "op": op}, nil); err != nil {
			t.Fatal(err)
		}
		res, err := wire.ReadResponse(c, 0)
		if err != nil {
			t.Fatal(err)
		}
		return res.Header
	}
	if h := request("hello"); !bytes.Contains(h, []byte(`"pid"`)) {
		t.Errorf("hello: %s", h)
	}
	if h := request("stop"); string(h) != "{}" {
		t.Errorf("stop: %s", h)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("daemon %d: %v", i, err)
		}
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket outlived the daemons: %v", err)
	}
}
