package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
)

const recapSample = `PLAY [mixed] *******************************************************************

TASK [01 reset target dir (become)] ********************************************
changed: [bench]

PLAY RECAP *********************************************************************
bench                      : ok=20   changed=12   unreachable=0    failed=1    skipped=2    rescued=0    ignored=0   
other                      : ok=3    changed=0    unreachable=1    failed=0    skipped=0    rescued=0    ignored=0   
`

func TestParseRecap(t *testing.T) {
	r, err := parseRecap(recapSample, "bench")
	if err != nil {
		t.Fatal(err)
	}
	if want := (recap{ok: 20, changed: 12, failed: 1, skipped: 2}); r != want {
		t.Errorf("bench: %+v, want %+v", r, want)
	}
	if r, err := parseRecap(recapSample, "other"); err != nil || r.unreachable != 1 || r.ok != 3 {
		t.Errorf("other: %+v, %v", r, err)
	}
	for _, tc := range []struct{ out, host, err string }{
		{recapSample, "nosuch", "no line for nosuch"},
		{"TASK [x]\nok: [bench]\n", "bench", "no PLAY RECAP"},
		{"PLAY RECAP ***\nbench : nothing here\n", "bench", "has no counts"},
		// A host named in a task line before the recap is not its line.
		{"bench : ok=1\nPLAY RECAP ***\n", "bench", "no line for bench"},
	} {
		if _, err := parseRecap(tc.out, tc.host); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("parseRecap(%q, %s) = %v, want an error with %q", tc.out, tc.host, err, tc.err)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and a ')' of its own; utime 250, stime
	// 50, cutime 100, cstime 0 ticks: 4 s.
	line := "4242 (ssh: /tmp/x) [mux]) S 1 4242 4242 0 -1 4194368 500 0 0 0 250 50 100 0 20 0 1 0 12345 1000 100 18446744073709551615\n"
	st, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 1 || st.cpu != 4*time.Second {
		t.Errorf("ppid %d, cpu %v; want 1, 4s", st.ppid, st.cpu)
	}
	for _, bad := range []string{"", "12 (x S 1 2", "12 (x) S 1 2 3", "12 (x) S one 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) gave no error", bad)
		}
	}
	// This process's own stat parses, with its parent as ppid.
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := parseProcStat(b); err != nil || st.ppid != os.Getppid() {
		t.Errorf("/proc/self/stat: %+v, %v; want ppid %d", st, err, os.Getppid())
	}
}

// helperProcs finds a process by a marker in its command line, and its
// children; stopHelpers stops them all.
func TestHelperProcs(t *testing.T) {
	marker := t.TempDir()
	// sh with a child sleep: the marker is only in sh's command line ($0).
	// sh prints the sleep's pid once it has started it.
	cmd := osexec.Command("sh", "-c", "sleep 600 & echo $!; wait", marker)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	sleepPid, _ := strconv.Atoi(strings.TrimSpace(line))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	procs, err := helperProcs(marker)
	if err != nil {
		t.Fatal(err)
	}
	_, hasSh := procs[cmd.Process.Pid]
	_, hasSleep := procs[sleepPid]
	if !hasSh || !hasSleep || len(procs) != 2 {
		t.Fatalf("helperProcs found %v, want sh (%d) and its sleep (%d)", procs, cmd.Process.Pid, sleepPid)
	}
	if _, err := stopHelpers(marker); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Error("sh exited 0, want killed by stopHelpers")
	}
	if procs, _ := helperProcs(marker); len(procs) != 0 {
		t.Errorf("after stopHelpers: %v", procs)
	}
}

func TestHostVarsAndInventory(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	if err := os.WriteFile(key, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res := map[string][]string{
		"hostname": {"127.0.0.1"}, "port": {"2222"}, "user": {"sp1"},
		"identityfile":          {filepath.Join(dir, "missing"), key},
		"userknownhostsfile":    {filepath.Join(dir, "kh") + " " + filepath.Join(dir, "kh2")},
		"stricthostkeychecking": {"true"}, "identitiesonly": {"yes"},
	}
	v, err := hostVars(res, "/usr/bin/python3", "/x/spindle")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ansible_host": "127.0.0.1", "ansible_port": "2222", "ansible_user": "sp1",
		"ansible_python_interpreter":   "/usr/bin/python3",
		"ansible_spindle_path":         "/x/spindle",
		"ansible_ssh_private_key_file": key,
		"ansible_ssh_common_args":      "-o UserKnownHostsFile=" + filepath.Join(dir, "kh") + " -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes",
	}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("%s = %q, want %q", k, v[k], w)
		}
	}
	if len(v) != len(want) {
		t.Errorf("hostVars = %v, want %v", v, want)
	}
	inv := ansibleHost{vars: v}.inventory()
	if !strings.HasPrefix(inv, "bench ") || !strings.Contains(inv, " ansible_ssh_common_args='-o UserKnownHostsFile=") ||
		!strings.Contains(inv, " ansible_port=2222 ") || strings.Count(inv, "\n") != 1 {
		t.Errorf("inventory %q", inv)
	}
	if _, err := hostVars(map[string][]string{"hostname": {"h"}}, "py", ""); err == nil {
		t.Error("hostVars without port and user gave no error")
	}
}

func TestParseHotpath(t *testing.T) {
	got, err := parseHotpath([]byte(`{"ns_per_call": 1234.5, "calls": 10, "setup_ns": 100, "exec_ns": 1000, "close_ns": 20}` + "\n"))
	if err != nil || got.ns != 1234.5 || got.phases == nil || *got.phases != (hotPhases{Setup: 100, Exec: 1000, Close: 20}) {
		t.Errorf("parseHotpath = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "Traceback", `{"calls": 3}`, `{"ns_per_call": 0, "calls": 3}`, `{"ns_per_call": 5, "calls": 0}`,
		`{"ns_per_call": 5, "calls": 1}`,                                             // no phases
		`{"ns_per_call": 5, "calls": 1, "setup_ns": 1, "exec_ns": 9, "close_ns": 1}`, // phases longer than the call
	} {
		if _, err := parseHotpath([]byte(bad)); err == nil {
			t.Errorf("parseHotpath(%q) gave no error", bad)
		}
	}
}

// finish takes medians per system, the excess over the floor, the round
// trips per task against the 0 ms row, and the ratios to vanilla; a
// system with no run is an error, not a column of zeros.
func TestAnsibleRowFinish(t *testing.T) {
	run := func(wallMS, cpuMS int, sent, turns int64) ansibleRun {
		return ansibleRun{wall: time.Duration(wallMS) * time.Millisecond, cpu: time.Duration(cpuMS) * time.Millisecond,
			helperCPU: 100 * time.Millisecond, sent: sent, turns: turns, target: targetMem{-1, -1}}
	}
	withRSS := func(r ansibleRun, kib int64) ansibleRun {
		r.target = targetMem{rss: kib << 10, pss: kib << 9}
		return r
	}
	systems := []*ansibleSystem{{name: "vanilla"}, {name: "spindle"}, {name: "mitogen"}, {name: "floor"}, {name: "other", err: os.ErrNotExist}}
	at0 := &ansibleRow{Tasks: 10, Systems: map[string]*ansibleFigures{
		"vanilla": {WallMS: 2000}, "spindle": {WallMS: 1000}, "mitogen": {WallMS: 800}, "floor": {WallMS: 500},
	}}
	row := &ansibleRow{Tasks: 10, LatencyMS: 10, Systems: map[string]*ansibleFigures{
		"vanilla": {runs: []ansibleRun{run(4000, 900, 1000, 30), run(5000, 1000, 1000, 30), run(9000, 1100, 3000, 40)}},
		"spindle": {runs: []ansibleRun{withRSS(run(1500, 500, 100, 10), 40000), withRSS(run(1600, 400, 100, 10), 50000), withRSS(run(1400, 600, 100, 10), 60000)}},
		"mitogen": {runs: []ansibleRun{withRSS(run(1000, 800, 200, 20), 100000), withRSS(run(1200, 1000, 200, 20), 100000), withRSS(run(1100, 900, 200, 20), 90000)}},
		"floor":   {runs: []ansibleRun{run(600, 300, 0, 0), run(600, 300, 0, 0), run(600, 300, 0, 0)}},
		"other":   {},
	}}
	row.finish(systems, at0)
	v, s, f := row.Systems["vanilla"], row.Systems["spindle"], row.Systems["floor"]
	if v.WallMS != 5000 || v.CPUMS != 1100 || v.HelperCPUMS != 100 || v.SentBytes != 1000 || v.TurnsPerTask != 3 {
		t.Errorf("vanilla medians: %+v", v)
	}
	if s.ExcessMS != 900 || v.ExcessMS != 4400 || f.ExcessMS != 0 || s.ExcessCPUMS != 200 || v.ExcessPerTaskMS != 440 {
		t.Errorf("excess: spindle %+v, vanilla %+v, floor %+v", s, v, f)
	}
	// (1500 − 1000) ms ÷ 10 ms ÷ 10 tasks.
	if s.RTTsPerTask != 5 || v.RTTsPerTask != 30 || f.RTTsPerTask != 0 {
		t.Errorf("rtts per task: spindle %v, vanilla %v, floor %v (never crosses the link)", s.RTTsPerTask, v.RTTsPerTask, f.RTTsPerTask)
	}
	r, ok := row.Ratios["spindle/vanilla"]
	if !ok || r.Wall != 0.3 || r.Sent != 0.1 || r.Turns != round3(1.0/3) || r.Excess != round3(900.0/4400) {
		t.Errorf("ratios %+v", row.Ratios)
	}
	if _, ok := row.Ratios["floor/vanilla"]; ok {
		t.Error("the floor has a ratio to vanilla")
	}
	// The mitogen column: medians, excess, round trips, its ratio to
	// vanilla, and spindle's to it, the target's RSS among them.
	m := row.Systems["mitogen"]
	if m.WallMS != 1100 || m.CPUMS != 1000 || m.ExcessMS != 500 || m.RTTsPerTask != 3 || m.TurnsPerTask != 2 || m.TargetRSSKiB != 100000 || m.TargetPSSKiB != 50000 {
		t.Errorf("mitogen figures: %+v", m)
	}
	if s.TargetRSSKiB != 50000 || v.TargetRSSKiB != 0 {
		t.Errorf("target RSS: spindle %d KiB, want 50000; vanilla %d, want none measured", s.TargetRSSKiB, v.TargetRSSKiB)
	}
	if r := row.Ratios["mitogen/vanilla"]; r.Wall != 0.22 || r.Turns != round3(2.0/3) {
		t.Errorf("mitogen/vanilla %+v", r)
	}
	sm, ok := row.Ratios["spindle/mitogen"]
	if want := (ansibleRatios{Wall: round3(1500.0 / 1100), CPU: 0.6, Sent: 0.5, Turns: 0.5, Excess: 1.8, TargetRSS: 0.5, TargetPSS: 0.5}); !ok || sm != want {
		t.Errorf("spindle/mitogen %+v, want %+v", sm, want)
	}
	if _, ok := row.Ratios["mitogen/spindle"]; ok {
		t.Error("mitogen has a ratio to spindle: the rows give spindle's to it")
	}
	for _, name := range []string{"spindle", "mitogen"} {
		if !slices.ContainsFunc(row.table(), func(l string) bool {
			return strings.Contains(l, "\t"+name+"\t") && strings.Contains(l, "target rss")
		}) {
			t.Errorf("no table line for %s with its target RSS: %q", name, row.table())
		}
	}
	if !slices.ContainsFunc(row.table(), func(l string) bool { return strings.Contains(l, "x mitogen") }) {
		t.Errorf("the table has no ratio to mitogen: %q", row.table())
	}
	if _, ok := row.Systems["other"]; ok || row.Errors["other"] == "" {
		t.Errorf("a system that could not run: systems %v, errors %v", row.Systems, row.Errors)
	}
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"wall_ms":5000`, `"spindle/vanilla":{"wall":0.3`, `"rtts_per_task":5`, `"errors":{"other"`,
		`"spindle/mitogen":{"wall":1.364`, `"target_rss_kib":100000`} {
		if !bytes.Contains(b, []byte(k)) {
			t.Errorf("JSON has no %s: %s", k, b)
		}
	}
}

// needAnsible ends t unless ansible-playbook is installed, and returns
// the Python it runs on.
func needAnsible(t *testing.T) string {
	t.Helper()
	exe, err := osexec.LookPath("ansible-playbook")
	testkit.Need(t, err == nil, "ansible-playbook is not installed (apt-get install ansible-core)")
	py, err := scriptInterpreter(exe)
	if err != nil {
		t.Fatal(err)
	}
	return py
}

// The floor plugin loads through Ansible's own loader and answers as a
// target would: the hot-path driver runs `true` through it, and its
// answers to what a pipelined module, mkdtemp and `echo ~` send are what
// Ansible parses.
func TestFloorPlugin(t *testing.T) {
	py := needAnsible(t)
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "benchfloor.py"), floorPlugin, 0o600); err != nil {
		t.Fatal(err)
	}
	driver := filepath.Join(dir, "hotpath.py")
	if err := os.WriteFile(driver, hotpathDriver, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(py, driver, "benchfloor", "3", `{"ansible_host": "192.0.2.1", "ansible_user": "nobody"}`)
	cmd.Env = append(os.Environ(), "ANSIBLE_CONNECTION_PLUGINS="+plugins)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hotpath.py benchfloor: %v: %s", err, stderr.String())
	}
	if _, err := parseHotpath(out); err != nil {
		t.Error(err)
	}

	check := `
import json, sys
sys.path.insert(0, sys.argv[1])
import benchfloor as f
def out(cmd, data=None):
    rc, o, e = f.answer(cmd, data)
    assert rc == 0 and e == b"", (cmd, rc, e)
    return o.decode()
wrapper = b"#!/usr/bin/python3\n_ANSIBALLZ_WRAPPER = True\nrunpy.run_module(mod_name='ansible.modules.stat', init_globals=None)\n"
res = json.loads(out("/bin/sh -c '/usr/bin/python3 && sleep 0'", wrapper))
assert res["stat"]["exists"] is False, res
res = json.loads(out("/bin/sh -c 'sudo -H -S -n -u root /bin/sh -c '\"'\"'echo BECOME-SUCCESS-x ; /usr/bin/python3'\"'\"' && sleep 0'",
    b"runpy.run_module(mod_name='ansible.modules.command')"))
assert res["rc"] == 0 and res["changed"] is False, res
res = json.loads(out("/bin/sh -c '/usr/bin/python3 /h/.ansible/tmp/t/AnsiballZ_copy.py && sleep 0'"))
assert "failed" not in res, res
mk = out('/bin/sh -c \'( umask 77 && mkdir -p "` + "` echo ~/.ansible/tmp `" + `"&& mkdir "` + "` echo ~/.ansible/tmp/ansible-tmp-1.2-3-4 `" + `" && echo ansible-tmp-1.2-3-4="` + "` echo ~/.ansible/tmp/ansible-tmp-1.2-3-4 `" + `" ) && sleep 0\'')
assert mk.startswith("ansible-tmp-1.2-3-4=/") and mk.strip().endswith("/ansible-tmp-1.2-3-4"), mk
assert out("/bin/sh -c 'echo ~ && sleep 0'") == f.FLOOR_HOME + "\n"
assert out("/bin/sh -c 'echo ~nobody && sleep 0'").strip().endswith("/nobody")
assert out("/bin/sh -c 'chmod u+x /x && sleep 0'") == ""
print("ok")
`
	cmd = osexec.Command(py, "-c", check, plugins)
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("the floor's answers: %v\n%s", err, out)
	}
}

// A missing playbook directory or ansible-playbook stops the group with
// a word on what to give or install, before anything starts.
func TestAnsibleGroupNeeds(t *testing.T) {
	var out, errb bytes.Buffer
	code := Execute([]string{"ansible", "--ansible-dir", filepath.Join(t.TempDir(), "none")}, strings.NewReader(""), &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "hostname_100.yml and mixed.yml") || out.Len() != 0 {
		t.Errorf("no playbooks: exit %d, stderr %q, stdout %q", code, errb.String(), out.String())
	}
	pb := t.TempDir()
	for _, f := range ansiblePlaybooks {
		if err := os.WriteFile(filepath.Join(pb, f.file), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", t.TempDir())
	out.Reset()
	errb.Reset()
	code = Execute([]string{"ansible_mixed", "--ansible-dir", pb}, strings.NewReader(""), &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "ansible-playbook: not found") {
		t.Errorf("no ansible-playbook: exit %d, stderr %q", code, errb.String())
	}
	// Not named, the group does not run: `spindle-bench` alone never
	// needs Ansible.
	cases, err := selectCases(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bc := range cases {
		if bc.Group == "ansible" {
			t.Errorf("the default selection has %s", bc.Name)
		}
	}
}

// TestE2EBenchAnsible runs ansible_mixed and the hot path once each at
// 0 ms against the bench's throwaway sshd: every system gives figures.
func TestE2EBenchAnsible(t *testing.T) {
	sshtest.Require(t)
	needAnsible(t)
	dir, err := ansibleDir(ansibleFlags{})
	testkit.Need(t, err == nil, "the playbooks of ../shared/bench/ansible are not beside the repository (set "+ansibleDirEnv+")")
	out, errs, code := benchCmd(t, "ansible_mixed", "ansible_exec_true", "--rounds", "1", "--n", "5", "--ansible-dir", dir)
	if code != 0 {
		t.Fatalf("bench ansible: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	rows := map[string]map[string]any{}
	for _, line := range benchLines(t, out) {
		rows[line.row["name"].(string)] = line.row
	}
	mixed, ok := rows["ansible_mixed"]
	if !ok {
		t.Fatalf("no ansible_mixed row:\n%s", out)
	}
	systems, _ := mixed["systems"].(map[string]any)
	rowErrs, _ := mixed["errors"].(map[string]any)
	// The mitogen column needs Mitogen's archive beside the repository;
	// without it the column is left out, with its reason.
	want := []string{"vanilla", "spindle", "floor"}
	if _, err := mitogenPath(ansibleFlags{}); err == nil {
		want = append(want, "mitogen")
	} else if e, _ := rowErrs["mitogen"].(string); !strings.Contains(e, mitogenArchive) {
		t.Errorf("no Mitogen archive (%v), and the row's error for it is %q", err, e)
	} else {
		delete(rowErrs, "mitogen")
		t.Logf("the mitogen column is not measured: %v", err)
	}
	if len(rowErrs) > 0 {
		t.Errorf("ansible_mixed: errors %v", rowErrs)
	}
	for _, s := range want {
		f, ok := systems[s].(map[string]any)
		if !ok {
			t.Errorf("ansible_mixed has no %s figures: %v", s, mixed)
			continue
		}
		if w, _ := f["wall_ms"].(float64); w <= 0 {
			t.Errorf("%s: wall_ms %v", s, f["wall_ms"])
		}
		if c, _ := f["cpu_ms"].(float64); c <= 0 {
			t.Errorf("%s: cpu_ms %v", s, f["cpu_ms"])
		}
	}
	// What crossed the proxy: vanilla sends the modules and the 200 KiB
	// files; the floor sends nothing at all.
	if v, _ := systems["vanilla"].(map[string]any); v != nil {
		if b, _ := v["sent_bytes"].(float64); b < 400<<10 {
			t.Errorf("vanilla sent %v bytes, want over 400 KiB (two 200 KiB copies)", v["sent_bytes"])
		}
		if tt, _ := v["turns_per_task"].(float64); tt < 1 {
			t.Errorf("vanilla: %v turns per task, want at least one", v["turns_per_task"])
		}
		if h, _ := v["helper_cpu_ms"].(float64); h <= 0 {
			t.Errorf("vanilla: helper_cpu_ms %v, want the ControlPersist master's CPU", v["helper_cpu_ms"])
		}
	}
	if f, _ := systems["floor"].(map[string]any); f != nil {
		if b, _ := f["sent_bytes"].(float64); b != 0 {
			t.Errorf("the floor sent %v bytes", b)
		}
	}
	// Spindle sends each module's zip once, then only the wrapper.
	if s, _ := systems["spindle"].(map[string]any); s != nil {
		if b, _ := s["sent_bytes"].(float64); b <= 0 || b >= systems["vanilla"].(map[string]any)["sent_bytes"].(float64) {
			t.Errorf("spindle sent %v bytes, want fewer than vanilla's %v", s["sent_bytes"], systems["vanilla"])
		}
		if h, _ := s["helper_cpu_ms"].(float64); h <= 0 {
			t.Errorf("spindle: helper_cpu_ms %v, want the daemon's CPU", s["helper_cpu_ms"])
		}
	}
	// Mitogen, like Spindle, sends each module once and keeps an
	// interpreter on the target, whose memory the row gives.
	if m, _ := systems["mitogen"].(map[string]any); m != nil {
		if b, _ := m["sent_bytes"].(float64); b <= 0 || b >= systems["vanilla"].(map[string]any)["sent_bytes"].(float64) {
			t.Errorf("mitogen sent %v bytes, want fewer than vanilla's %v", m["sent_bytes"], systems["vanilla"])
		}
		if r, _ := m["target_rss_kib"].(float64); r <= 0 {
			t.Errorf("mitogen: target_rss_kib %v, want its interpreter's", m["target_rss_kib"])
		}
		if _, ok := mixed["ratios"].(map[string]any)["spindle/mitogen"]; !ok {
			t.Errorf("ansible_mixed has no spindle/mitogen ratios: %v", mixed["ratios"])
		}
	}
	hot, ok := rows["ansible_exec_true"]
	if !ok {
		t.Fatalf("no ansible_exec_true row:\n%s", out)
	}
	ns, _ := hot["ns_per_call"].(map[string]any)
	if errs, ok := hot["errors"]; ok {
		t.Errorf("ansible_exec_true: errors %v", errs)
	}
	for _, c := range []string{"spindle_plugin", "spindle_library", "openssh_controlmaster", "ssh_plugin", "floor_plugin", "ipc_floor", "spindle_library_sh"} {
		if v, _ := ns[c].(float64); v <= 0 {
			t.Errorf("ansible_exec_true: %s %v: %v", c, ns[c], hot)
		}
	}
	if r, _ := hot["spindle_plugin_vs_floor"].(float64); r <= 0 {
		t.Errorf("ansible_exec_true: no spindle_plugin_vs_floor: %v", hot)
	}
	phases, _ := hot["phases_ns"].(map[string]any)
	if p, _ := phases["ssh_plugin"].(map[string]any); p == nil || p["exec"].(float64) <= 0 {
		t.Errorf("ansible_exec_true: no phases for ssh_plugin: %v", hot)
	}
}

func TestParentsFirst(t *testing.T) {
	// 10 → 20 → 30, and 40 whose parent is not among them.
	procs := map[int]procStat{30: {ppid: 20}, 20: {ppid: 10}, 10: {ppid: 1}, 40: {ppid: 1}}
	pos := map[int]int{}
	for i, pid := range parentsFirst(procs) {
		pos[pid] = i
	}
	if len(pos) != 4 || pos[10] > pos[20] || pos[20] > pos[30] {
		t.Fatalf("order %v: want each parent before its children", parentsFirst(procs))
	}
}
