package ansible_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/ansible"
	"github.com/spindle-rpc/spindle/ansible/wire"
	"github.com/spindle-rpc/spindle/daemon"
	abz "github.com/spindle-rpc/spindle/internal/testkit/ansiballz"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/spindle-rpc/spindle/version"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	if _, err := testagent.Build(); err != nil {
		fmt.Fprintln(os.Stderr, "build the agent:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// startDaemon serves an Endpoint on a socket of its own until t ends.
func startDaemon(t testing.TB) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ansible.sock")
	reg := daemon.NewRegistry()
	ep := &ansible.Endpoint{Registry: reg,
		NewController: func() (*spindle.Controller, *zap.Logger) { return spindle.NewController(spindle.Options{}), nil }}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := daemon.NewServer(daemon.Options{Socket: sock, Idle: time.Hour, Ready: w})
	served := make(chan error, 1)
	go func() { served <- s.Serve(ep) }()
	if line, _ := bufio.NewReader(r).ReadString('\n'); line != "ok\n" {
		t.Fatalf("daemon: %q", line)
	}
	t.Cleanup(func() {
		s.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		reg.Close()
	})
	return sock
}

// reply is a response, decoded.
type reply struct {
	RC      int            `json:"rc"`
	Version string         `json:"version"`
	PID     int            `json:"pid"`
	Error   *ansible.Error `json:"error"`
	Stdout  []byte         `json:"-"`
	Stderr  []byte         `json:"-"`
}

// call sends one request (v 1 unless head says otherwise) and returns
// the response.
func call(t testing.TB, sock string, head map[string]any, stdin []byte) reply {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := head["v"]; !ok {
		head["v"] = 1
	}
	if len(stdin) > 0 {
		head["stdin_len"] = len(stdin)
	}
	if err := wire.WriteRequest(c, head, stdin); err != nil {
		t.Fatal(err)
	}
	res, err := wire.ReadResponse(c, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var r reply
	if err := res.Decode(&r); err != nil {
		t.Fatal(err)
	}
	r.Stdout, r.Stderr = res.Stdout, res.Stderr
	return r
}

// must is call, failing t on an error response.
func must(t testing.TB, sock string, head map[string]any, stdin []byte) reply {
	t.Helper()
	r := call(t, sock, head, stdin)
	if r.Error != nil {
		t.Fatalf("%v: %s: %s", head["op"], r.Error.Kind, r.Error.Message)
	}
	return r
}

// wantKind is call, failing t unless the response is an error of kind.
func wantKind(t *testing.T, sock string, head map[string]any, kind string) *ansible.Error {
	t.Helper()
	r := call(t, sock, head, nil)
	if r.Error == nil || r.Error.Kind != kind {
		t.Fatalf("%v: %+v, want an error of kind %q", head["op"], r.Error, kind)
	}
	return r.Error
}

// host is one sshd, one user with a key, as inventory variables.
type host struct {
	s    *sshtest.Server
	u    *sshtest.User
	vars map[string]any
}

func newHost(t testing.TB) *host {
	t.Helper()
	s := sshtest.Start(t)
	u := sshtest.CreateUser(t, "/bin/bash")
	k := sshtest.ClientKey(t)
	s.Authorize(t, u, k)
	kh := s.KnownHosts(t)
	return &host{s: s, u: u, vars: map[string]any{
		"name": "web1", "address": "127.0.0.1", "port": s.Port, "user": u.Name, "private_key_file": k.Path,
		"ssh_args":        "-C -o ControlMaster=auto -o ControlPersist=60s",
		"ssh_common_args": "-F none -o IdentitiesOnly=yes -o UserKnownHostsFile=" + kh,
		"timeout":         20, "password": nil, "via": nil, "target": nil,
	}}
}

func execReq(h *host, cmd string, become map[string]any) map[string]any {
	r := map[string]any{"op": "exec", "host": h.vars, "cmd": cmd, "pty": false}
	if become != nil {
		r["become"] = become
	}
	return r
}

func TestHelloAndBadRequests(t *testing.T) {
	sock := startDaemon(t)
	r := must(t, sock, map[string]any{"op": "hello"}, nil)
	if r.Version != version.Version || r.PID != os.Getpid() {
		t.Errorf("hello: %+v", r)
	}
	wantKind(t, sock, map[string]any{"op": "hello", "v": 2}, ansible.KindVersion)
	e := wantKind(t, sock, map[string]any{"op": "hello", "spindle": "0.0.0-other"}, ansible.KindVersion)
	if !strings.Contains(e.Message, version.Version) || !strings.Contains(e.Message, "0.0.0-other") {
		t.Errorf("version message: %s", e.Message)
	}
	must(t, sock, map[string]any{"op": "hello", "spindle": "dev"}, nil)
	must(t, sock, map[string]any{"op": "hello", "spindle": version.Version, "unknown": []int{1}}, nil)
	wantKind(t, sock, map[string]any{"op": "nosuch"}, ansible.KindBadRequest)
	wantKind(t, sock, map[string]any{"op": "exec", "cmd": "true"}, ansible.KindBadRequest)
	wantKind(t, sock, map[string]any{"op": "exec", "host": map[string]any{"name": "x", "port": "22"}, "cmd": "true"}, ansible.KindBadRequest)
	wantKind(t, sock, map[string]any{"op": "exec", "host": map[string]any{"name": "x", "ssh_args": "-o 'open"}, "cmd": "true"}, ansible.KindBadRequest)
	wantKind(t, sock, map[string]any{"op": "put", "host": map[string]any{"name": "x"}, "src": "relative", "dst": "/x"}, ansible.KindBadRequest)

	// Bytes that are no request get a bad_request answer too.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0, 0, 0, 3, 'n', 'o', '!'})
	res, err := wire.ReadResponse(c, 0)
	if err != nil || !bytes.Contains(res.Header, []byte(`"bad_request"`)) {
		t.Errorf("garbage: %s, %v", res.Header, err)
	}
}

// A client that connects and says nothing, or stops halfway through its
// request, is hung up on after RequestTimeout: it cannot hold a goroutine
// or the daemon's exit for ever.
func TestSilentClientsDropped(t *testing.T) {
	old := ansible.RequestTimeout
	ansible.RequestTimeout = 100 * time.Millisecond
	defer func() { ansible.RequestTimeout = old }()
	sock := startDaemon(t)
	for _, said := range [][]byte{nil, {0, 0, 0, 40, '{', '"', 'o', 'p'}} {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(said)
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadAll(c); err != nil { // returns when the daemon hangs up
			t.Errorf("after %q: not hung up on: %v", said, err)
		}
		c.Close()
	}
	must(t, sock, map[string]any{"op": "hello"}, nil)
}

func TestExecExactBytes(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	stdin := make([]byte, 100<<10)
	rand.Read(stdin)
	r := must(t, sock, execReq(h, `printf 'out\000\377'; printf 'err\001' >&2; cat; exit 3`, nil), stdin)
	if r.RC != 3 || !bytes.Equal(r.Stdout, append([]byte("out\x00\xff"), stdin...)) || string(r.Stderr) != "err\x01" {
		t.Fatalf("rc %d, stdout %d bytes (%q…), stderr %q", r.RC, len(r.Stdout), r.Stdout[:min(len(r.Stdout), 8)], r.Stderr)
	}
	// Through a POSIX shell, as the login user, with no terminal.
	r = must(t, sock, execReq(h, `id -un; [ -t 0 ] || echo notty; echo "$0"`, nil), nil)
	if string(r.Stdout) != h.u.Name+"\nnotty\n/bin/sh\n" || r.RC != 0 {
		t.Errorf("%q rc %d", r.Stdout, r.RC)
	}
	// A terminal when asked.
	r = must(t, sock, map[string]any{"op": "exec", "host": h.vars, "cmd": "[ -t 0 ] && echo tty", "pty": true}, nil)
	if !strings.Contains(string(r.Stdout), "tty") {
		t.Errorf("pty: %q", r.Stdout)
	}
	// Empty output still has its lengths.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wire.WriteRequest(c, map[string]any{"v": 1, "op": "exec", "host": h.vars, "cmd": "true"}, nil)
	res, err := wire.ReadResponse(c, 0)
	if err != nil || !bytes.Contains(res.Header, []byte(`"stdout_len":0`)) || !bytes.Contains(res.Header, []byte(`"stderr_len":0`)) {
		t.Errorf("empty output: %s, %v", res.Header, err)
	}
	// A signal's death is the shell's 128+N.
	r = must(t, sock, execReq(h, `kill -9 $$`, nil), nil)
	if r.RC != 137 {
		t.Errorf("killed: rc %d", r.RC)
	}
	// Stdin larger than a request (sent on a circuit), and output larger
	// than a reply (spilled onto one), arrive whole.
	big := make([]byte, 3<<20)
	rand.Read(big)
	r = must(t, sock, execReq(h, `cat; echo end >&2; head -c 4000000 /dev/zero >&2; exit 5`, nil), big)
	if r.RC != 5 || !bytes.Equal(r.Stdout, big) || len(r.Stderr) != 4+4000000 || string(r.Stderr[:4]) != "end\n" {
		t.Errorf("large: rc %d, %d bytes out (the same: %v), %d err", r.RC, len(r.Stdout), bytes.Equal(r.Stdout, big), len(r.Stderr))
	}
	r = must(t, sock, execReq(h, `head -c 5000000 /dev/zero; echo done`, nil), nil)
	if r.RC != 0 || len(r.Stdout) != 5000005 || string(r.Stdout[5000000:]) != "done\n" {
		t.Errorf("spilled output: rc %d, %d bytes", r.RC, len(r.Stdout))
	}
}

func TestPutFetch(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "big")
	data := make([]byte, 200<<10)
	rand.Read(data)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(h.u.Home, "big")
	must(t, sock, map[string]any{"op": "put", "host": h.vars, "src": src, "dst": dst}, nil)
	got, err := os.ReadFile(dst)
	st, _ := os.Stat(dst)
	if err != nil || !bytes.Equal(got, data) || st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != uint32(h.u.UID) {
		t.Fatalf("put: %v, equal %v, mode %v", err, bytes.Equal(got, data), st.Mode())
	}
	// A replaced file keeps its mode.
	os.Chmod(dst, 0o640)
	if err := os.WriteFile(src, []byte("small"), 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, sock, map[string]any{"op": "put", "host": h.vars, "src": src, "dst": dst}, nil)
	if got, _ := os.ReadFile(dst); string(got) != "small" {
		t.Errorf("replaced: %q", got)
	}
	if st, _ := os.Stat(dst); st.Mode().Perm() != 0o640 {
		t.Errorf("replaced: mode %v, want 0640 kept", st.Mode())
	}

	// Fetch a 200 KiB file back.
	remote := filepath.Join(h.u.Home, "remote")
	if err := os.WriteFile(remote, data, 0o644); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "fetched")
	must(t, sock, map[string]any{"op": "fetch", "host": h.vars, "src": remote, "dst": local}, nil)
	if got, err := os.ReadFile(local); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fetch: %v", err)
	}

	wantKind(t, sock, map[string]any{"op": "put", "host": h.vars, "src": filepath.Join(dir, "none"), "dst": dst}, ansible.KindNotFound)
	wantKind(t, sock, map[string]any{"op": "fetch", "host": h.vars, "src": filepath.Join(h.u.Home, "none"), "dst": local}, ansible.KindNotFound)
}

// Ansible's home directory questions get the shell's answers.
func TestEchoHome(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	for _, cmd := range []string{"echo ~", "/bin/sh -c 'echo ~ && sleep 0'", "/bin/sh -c 'echo ~'",
		"/bin/sh -c 'echo ~" + h.u.Name + " && sleep 0'", "echo ~root", "/bin/sh -c 'echo ~nosuchuser-x && sleep 0'"} {
		want := must(t, sock, execReq(h, cmd+" # as sent", nil), nil)
		for range 2 {
			got := must(t, sock, execReq(h, cmd, nil), nil)
			if string(got.Stdout) != string(want.Stdout) || got.RC != want.RC || len(got.Stderr) != len(want.Stderr) {
				t.Errorf("%q: %q rc %d, the shell says %q rc %d", cmd, got.Stdout, got.RC, want.Stdout, want.RC)
			}
		}
	}
}

// 20 runs of one pipelined AnsiballZ payload (the zip the same, the task
// part not) send the zip to the agent once, and each command gets its
// stdin byte for byte. The bytes are counted on the SSH connection.
func TestAnsiballzZipSentOnce(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	proxy := sshtest.StartProxy(t, h.s.Addr(), 0)
	h.vars["port"] = proxy.Port()
	h.vars["host_key_checking"] = false // known_hosts names sshd's port
	raw := make([]byte, 96<<10)
	rand.Read(raw)
	zip := base64.StdEncoding.EncodeToString(raw)
	for _, become := range []map[string]any{nil, {"method": "sudo"}} {
		if become != nil {
			sudoers(t, h.u.Name+" ALL=(ALL:ALL) NOPASSWD: ALL")
		}
		agentPID(t, sock, h, become) // connected
		before, _ := proxy.Forwarded()
		const runs = 20
		wrapper := 0
		for i := range runs {
			p := []byte("#!/usr/bin/python3\n_ANSIBALLZ_WRAPPER = True\ndef _ansiballz_main():\n    ZIPDATA = \"\"\"" + zip +
				"\"\"\"\n    date_time = " + strconv.Itoa(i) + "\n" + strings.Repeat("# wrapper code\n", 300))
			wrapper = len(p) - len(zip)
			sum := sha256.Sum256(p)
			r := must(t, sock, execReq(h, "/bin/sh -c 'sha256sum && sleep 0'", become), p)
			if got := strings.Fields(string(r.Stdout)); len(got) == 0 || got[0] != hex.EncodeToString(sum[:]) {
				t.Fatalf("run %d: the command read other bytes: %q", i, r.Stdout)
			}
		}
		up, _ := proxy.Forwarded()
		read := up - before
		// The zip once, the wrappers each time, and a few KiB per call.
		if limit := int64(len(zip) + runs*(wrapper+8<<10)); read > limit {
			t.Errorf("become %v: %d bytes sent for %d runs of a %d-byte zip: more than %d, so the zip crossed more than once", become, read, runs, len(zip), limit)
		}
		t.Logf("become %v: %d runs of a %d-byte zip and a %d-byte wrapper: %d bytes sent", become, runs, len(zip), wrapper, read)
	}
}

// 100 pipelined runs of a real `command: hostname` payload, each built
// in another second (the wrapper's date_time differs, as between the
// tasks of a play), through the endpoint over ssh: the zip and the
// wrapper cross once, and later wrappers as the few bytes they differ
// in, so that all of it costs less than the zip and the wrapper once
// plus each call's framing. The bytes are counted on the SSH connection.
func TestAnsiballzWrapperSentOnce(t *testing.T) {
	sshtest.Require(t)
	payload := abz.Payload(t, "command", map[string]any{"_raw_params": "hostname"}, abz.Python)
	_, zip, _ := abz.Split(t, payload)
	dateTime := regexp.MustCompile(`date_time = \([0-9, ]*\)`)
	if !dateTime.Match(payload) {
		t.Fatal("no date_time in the payload")
	}
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	sock := startDaemon(t)
	h := newHost(t)
	proxy := sshtest.StartProxy(t, h.s.Addr(), 0)
	h.vars["port"] = proxy.Port()
	h.vars["host_key_checking"] = false // known_hosts names sshd's port
	agentPID(t, sock, h, nil)           // connected
	before, _ := proxy.Forwarded()
	const runs = 100
	for i := range runs {
		p := dateTime.ReplaceAll(payload, []byte(fmt.Sprintf("date_time = (2026, 11, 27, 18, %d, %d)", i/60, i%60)))
		r := must(t, sock, execReq(h, "/bin/sh -c '"+abz.Python+" && sleep 0'", nil), p)
		var res struct {
			Stdout string `json:"stdout"`
			RC     int    `json:"rc"`
		}
		if err := json.Unmarshal(r.Stdout, &res); err != nil || r.RC != 0 || res.RC != 0 || res.Stdout != hostname {
			t.Fatalf("run %d: rc %d, %v: %s %s", i, r.RC, err, r.Stdout, r.Stderr)
		}
	}
	up, _ := proxy.Forwarded()
	sent := up - before
	wrapper := len(payload) - len(zip)
	// What a run costs beyond its stdin: the request, the reply's
	// acknowledgements, SSH's framing; less than the wrapper.
	const perRun = 2 << 10
	if limit := int64(len(zip) + wrapper + runs*perRun); sent > limit {
		t.Errorf("%d bytes sent for %d runs of a %d-byte zip in a %d-byte wrapper: more than %d, so the wrapper crossed more than once", sent, runs, len(zip), wrapper, limit)
	}
	t.Logf("%d runs of a %d-byte zip in a %d-byte wrapper: %d bytes sent", runs, len(zip), wrapper, sent)
}

// A module run 20 times through ssh → ssh → sudo (a bastion, the host
// its agent dials, sudo on the host), each run with other arguments as
// the tasks of a play: its zip crosses the first link once. The bytes
// are counted between the controller and the bastion's sshd; the zip
// is over 100 KiB, so two crossings would pass 2×zip, and one per run
// (a store that missed, or a hop that did not forward a name but the
// bytes) 20×zip.
func TestAnsiballzZipCrossesChainOnce(t *testing.T) {
	sshtest.Require(t)
	abz.Need(t)
	pad := make([]byte, 48<<10)
	rand.Read(pad)
	padText := base64.StdEncoding.EncodeToString(pad)
	padSum := sha256.Sum256([]byte(padText))
	module := filepath.Join(t.TempDir(), "spindle_chain_probe.py")
	src := `#!/usr/bin/python
import hashlib
import os
from ansible.module_utils.basic import AnsibleModule

PAD = "` + padText + `"

def main():
    m = AnsibleModule(argument_spec=dict(n=dict(type='int', required=True)))
    m.exit_json(changed=False, n=m.params['n'], euid=os.geteuid(), pad=hashlib.sha256(PAD.encode()).hexdigest())

if __name__ == '__main__':
    main()
`
	if err := os.WriteFile(module, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// n = 1000000 + i: the same length each run, so that only the
	// wrapper's differing digits need to cross.
	const first = 1000000
	payload := abz.Payload(t, module, map[string]any{"n": first}, abz.Python)
	_, zip, _ := abz.Split(t, payload)
	if len(zip) < 100<<10 {
		t.Fatalf("the zip is %d bytes: too small to tell one crossing from two", len(zip))
	}
	arg := []byte(fmt.Sprintf(`"n": %d`, first))
	if n := bytes.Count(payload, arg); n != 1 {
		t.Fatalf("%q appears %d times in the payload, want once", arg, n)
	}

	sock := startDaemon(t)
	k := sshtest.ClientKey(t)
	bastion, bastionUser := sshtest.Start(t), sshtest.CreateUser(t, "/bin/bash")
	bastion.Authorize(t, bastionUser, k)
	web, webUser := sshtest.Start(t), sshtest.CreateUser(t, "/bin/bash")
	web.Authorize(t, webUser, k)
	sudoers(t, webUser.Name+" ALL=(ALL:ALL) NOPASSWD: ALL")
	firstLink := sshtest.StartProxy(t, bastion.Addr(), 0)
	h := &host{vars: map[string]any{
		"name": "web1", "address": "127.0.0.1", "port": web.Port, "user": webUser.Name, "private_key_file": k.Path,
		"ssh_common_args":   "-F none -o IdentitiesOnly=yes",
		"host_key_checking": false, // the sshds' keys are throwaway
		"timeout":           20, "password": nil, "target": nil,
		"via": fmt.Sprintf("ssh:%s@127.0.0.1:%d", bastionUser.Name, firstLink.Port()),
	}}
	become := map[string]any{"method": "sudo"}
	agentPID(t, sock, h, become) // every hop connected, the agents sent
	for _, s := range []struct {
		sshd *sshtest.Server
		user string
	}{{bastion, bastionUser.Name}, {web, webUser.Name}} {
		if n := strings.Count(s.sshd.Log(), "Accepted publickey for "+s.user+" "); n != 1 {
			t.Fatalf("%d logins of %s, want 1", n, s.user)
		}
	}

	before, _ := firstLink.Forwarded()
	const runs = 20
	for i := range runs {
		p := bytes.Replace(payload, arg, []byte(fmt.Sprintf(`"n": %d`, first+i)), 1)
		r := must(t, sock, execReq(h, "/bin/sh -c '"+abz.Python+" && sleep 0'", become), p)
		var res struct {
			N    int    `json:"n"`
			EUID int    `json:"euid"`
			Pad  string `json:"pad"`
		}
		if err := json.Unmarshal(r.Stdout, &res); err != nil || r.RC != 0 {
			t.Fatalf("run %d: rc %d, %v: %s %s", i, r.RC, err, r.Stdout, r.Stderr)
		}
		if res.N != first+i || res.EUID != 0 || res.Pad != hex.EncodeToString(padSum[:]) {
			t.Fatalf("run %d: n %d, euid %d, pad %s; want n %d, euid 0, pad %x", i, res.N, res.EUID, res.Pad, first+i, padSum)
		}
	}
	up, _ := firstLink.Forwarded()
	sent := up - before
	if limit := 2 * int64(len(zip)); sent >= limit {
		t.Errorf("%d bytes sent over the first link for %d runs of a %d-byte zip: not under twice the zip, so it crossed more than once", sent, runs, len(zip))
	}
	t.Logf("%d runs through ssh → ssh → sudo of a %d-byte zip in a %d-byte wrapper: %d bytes over the first link", runs, len(zip), len(payload)-len(zip), sent)
}

// One zip run under two become users of one host (two become children
// of its agent) crosses the SSH connection once: the endpoint stores it
// in the host's agent, and each become child fetches it from there
// (services/modules/upcall) instead of being sent it. The bytes are
// counted on the SSH connection; two crossings would pass twice the zip.
func TestAnsiballzZipSharedByBecomeUsers(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	other := sshtest.CreateUser(t, "/bin/bash")
	sudoers(t, h.u.Name+" ALL=(ALL:ALL) NOPASSWD: ALL")
	proxy := sshtest.StartProxy(t, h.s.Addr(), 0)
	h.vars["port"] = proxy.Port()
	h.vars["host_key_checking"] = false // known_hosts names sshd's port
	users := []map[string]any{{"method": "sudo"}, {"method": "sudo", "user": other.Name}}
	pids := map[string]bool{}
	for _, become := range users {
		pids[agentPID(t, sock, h, become)] = true // connected
	}
	if len(pids) != 2 {
		t.Fatalf("the two become users ran on agents %v, want two", pids)
	}
	raw := make([]byte, 256<<10)
	rand.Read(raw)
	zip := base64.StdEncoding.EncodeToString(raw)
	before, _ := proxy.Forwarded()
	const runs = 5
	for i := range runs {
		for _, become := range users {
			p := []byte("#!/usr/bin/python3\n_ANSIBALLZ_WRAPPER = True\ndef _ansiballz_main():\n    ZIPDATA = \"\"\"" + zip +
				"\"\"\"\n    date_time = " + strconv.Itoa(i) + "\n" + strings.Repeat("# wrapper code\n", 300))
			sum := sha256.Sum256(p)
			r := must(t, sock, execReq(h, "/bin/sh -c 'sha256sum && sleep 0'", become), p)
			if got := strings.Fields(string(r.Stdout)); len(got) == 0 || got[0] != hex.EncodeToString(sum[:]) {
				t.Fatalf("run %d as %v: the command read other bytes: %q %q", i, become["user"], r.Stdout, r.Stderr)
			}
		}
	}
	up, _ := proxy.Forwarded()
	sent := up - before
	if limit := 2 * int64(len(raw)); sent >= limit {
		t.Errorf("%d bytes sent over the SSH connection for %d runs under 2 become users of a zip of %d bytes (%d in base64): not under twice the zip, so it crossed more than once",
			sent, runs, len(raw), len(zip))
	}
	t.Logf("%d runs under each of 2 become users of a %d-byte zip (%d in base64): %d bytes over the SSH connection", runs, len(raw), len(zip), sent)
}

// agentPID is the pid of the agent that runs the commands: a kept
// connection keeps it.
func agentPID(t *testing.T, sock string, h *host, become map[string]any) string {
	t.Helper()
	r := must(t, sock, execReq(h, `echo $PPID`, become), nil)
	return strings.TrimSpace(string(r.Stdout))
}

func TestReset(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	a := agentPID(t, sock, h, nil)
	if b := agentPID(t, sock, h, nil); a != b {
		t.Fatalf("two requests ran on agents %s and %s: the connection was not kept", a, b)
	}
	must(t, sock, map[string]any{"op": "reset", "host": h.vars}, nil)
	if c := agentPID(t, sock, h, nil); c == a {
		t.Fatalf("after reset the agent is still %s", a)
	}
}

// ansible_spindle_via: the host is dialled by the bastion's agent, and
// ansible_spindle_target makes a become hop the host itself.
func TestViaAndTarget(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	h.vars["via"] = fmt.Sprintf("ssh:%s@127.0.0.1:%d", h.u.Name, h.s.Port)
	r := must(t, sock, execReq(h, "id -un; echo $SSH_CONNECTION", nil), nil)
	if lines := strings.Split(string(r.Stdout), "\n"); lines[0] != h.u.Name || !strings.HasPrefix(lines[1], "127.0.0.1 ") {
		t.Fatalf("through the bastion: %q", r.Stdout)
	}
	if n := strings.Count(h.s.Log(), "Accepted publickey for "+h.u.Name+" "); n != 2 {
		t.Errorf("%d logins, want 2: the bastion, and the host from the bastion's agent", n)
	}
	sudoers(t, h.u.Name+" ALL=(ALL:ALL) NOPASSWD: ALL")
	h.vars["target"] = "sudo:root"
	if r := must(t, sock, execReq(h, "id -u", nil), nil); strings.TrimSpace(string(r.Stdout)) != "0" {
		t.Errorf("via the bastion, then sudo as the host: %q", r.Stdout)
	}
}

// Requests for one host at once dial it once.
func TestConcurrentRequestsOneDial(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	var wg sync.WaitGroup
	pids := make([]string, 8)
	for i := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := call(t, sock, execReq(h, `echo $PPID`, nil), nil)
			if r.Error != nil {
				t.Error(r.Error)
			}
			pids[i] = strings.TrimSpace(string(r.Stdout))
		}()
	}
	wg.Wait()
	if n := strings.Count(h.s.Log(), "Accepted publickey for "+h.u.Name+" "); n != 1 {
		t.Errorf("%d logins for 8 requests at once, want 1", n)
	}
	for _, p := range pids[1:] {
		if p != pids[0] || p == "" {
			t.Errorf("agents %q", pids)
			break
		}
	}
}

// A client that goes away (Ansible killed its worker) ends its request:
// the command is killed.
func TestClientGoneKillsCommand(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	pidFile := filepath.Join(h.u.Home, "pid")
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	head := execReq(h, "echo $$ > "+pidFile+"; exec sleep 600", nil)
	head["v"] = ansible.ProtocolVersion
	if err := wire.WriteRequest(c, head, nil); err != nil {
		t.Fatal(err)
	}
	var pid int
	deadline := time.Now().Add(time.Minute)
	for pid == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(10 * time.Millisecond)
		if b, err := os.ReadFile(pidFile); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	c.Close()
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the command (pid %d) still runs after its client went away", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestUnreachable(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	h.vars["port"] = sshtest.ClosedPort(t)
	e := wantKind(t, sock, execReq(h, "true", nil), ansible.KindUnreachable)
	t.Logf("unreachable: %s", e.Message)
	if !strings.Contains(e.Message, "127.0.0.1") {
		t.Errorf("message: %s", e.Message)
	}
	// A refused login (a key the server does not know; a password that
	// is wrong) is unreachable too, and the password is never shown.
	h = newHost(t)
	h.vars["private_key_file"] = sshtest.ClientKey(t).Path
	h.vars["password"] = "not-" + h.u.Password
	e = wantKind(t, sock, execReq(h, "true", nil), ansible.KindUnreachable)
	if strings.Contains(e.Message, h.vars["password"].(string)) {
		t.Errorf("the password is in the message: %s", e.Message)
	}
	// An unknown host key, with host key checking on.
	h = newHost(t)
	h.vars["ssh_common_args"] = "-F none -o UserKnownHostsFile=/dev/null"
	h.vars["host_key_checking"] = true
	wantKind(t, sock, execReq(h, "true", nil), ansible.KindUnreachable)
	// ... and accepted with it off.
	h.vars["host_key_checking"] = false
	must(t, sock, execReq(h, "true", nil), nil)
}

// A kept connection whose agent died is replaced by the next request.
func TestDeadConnectionReplaced(t *testing.T) {
	sshtest.Require(t)
	sock := startDaemon(t)
	h := newHost(t)
	sudoers(t, h.u.Name+" ALL=(ALL:ALL) NOPASSWD: ALL")
	root := map[string]any{"method": "sudo"}
	before := agentPID(t, sock, h, root)
	hostAgent := strings.TrimSpace(string(must(t, sock, execReq(h, "echo $PPID", nil), nil).Stdout))
	if err := exec.Command("kill", "-9", hostAgent).Run(); err != nil {
		t.Fatal(err)
	}
	// A become request starts over (a new connection, a new child), at
	// once or after one failure as unreachable.
	for i := 0; ; i++ {
		r := call(t, sock, execReq(h, `echo $PPID`, root), nil)
		if r.Error == nil {
			if strings.TrimSpace(string(r.Stdout)) == before {
				t.Fatalf("the become child %s outlived its host's agent", before)
			}
			break
		}
		if r.Error.Kind != ansible.KindUnreachable || i > 0 {
			t.Fatalf("after the agent died: %+v", r.Error)
		}
	}

	pid := agentPID(t, sock, h, nil)
	n, _ := strconv.Atoi(pid)
	if err := exec.Command("kill", "-9", strconv.Itoa(n)).Run(); err != nil {
		t.Fatal(err)
	}
	// The request that finds it dead may fail as unreachable (as
	// Ansible's next task then reconnects), or reconnect at once.
	for i := 0; ; i++ {
		r := call(t, sock, execReq(h, `echo $PPID`, nil), nil)
		if r.Error == nil {
			if strings.TrimSpace(string(r.Stdout)) == pid {
				t.Fatal("the dead agent still answers")
			}
			return
		}
		if r.Error.Kind != ansible.KindUnreachable || i > 0 {
			t.Fatalf("after the agent died: %+v", r.Error)
		}
	}
}
