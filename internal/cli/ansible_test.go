package cli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
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

// SPINDLE_DAEMON_CPUPROFILE: the Ansible daemon profiles itself into the
// file, written when it stops; a file it cannot create keeps it from
// starting, saying why.
func TestAnsibleDaemonCPUProfile(t *testing.T) {
	dir := t.TempDir()
	sock, prof := filepath.Join(dir, "ansible.sock"), filepath.Join(dir, "cpu.pprof")
	start := func(profile string) (*osexec.Cmd, string) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		cmd := osexec.Command(filepath.Join(binDir, "spindle"), "daemon", "--ansible", "--socket", sock, "--idle", "1m", "--ready-fd", "3")
		cmd.Env = append(os.Environ(), cpuProfileEnv+"="+profile)
		cmd.ExtraFiles = []*os.File{w}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		line, _ := bufio.NewReader(r).ReadString('\n')
		if line != "ok\n" {
			cmd.Wait() //nolint:errcheck // its stderr says why
			return nil, line + errb.String()
		}
		return cmd, ""
	}
	if cmd, why := start(filepath.Join(dir, "no", "such", "dir", "cpu.pprof")); cmd != nil {
		t.Fatal("a daemon started with a profile it cannot write")
	} else if !strings.Contains(why, cpuProfileEnv) {
		t.Errorf("the daemon said %q, not naming %s", why, cpuProfileEnv)
	}
	cmd, why := start(prof)
	if cmd == nil {
		t.Fatalf("daemon: %q", why)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.WriteRequest(c, map[string]any{"v": 1, "op": "stop"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.ReadResponse(c, 0); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon: %v", err)
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	// A profile is gzipped protobuf, complete once the gzip stream is.
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the profile is not gzip: %v", err)
	}
	if body, err := io.ReadAll(z); err != nil || len(body) == 0 {
		t.Fatalf("the profile's %d bytes: %v", len(body), err)
	}
}
