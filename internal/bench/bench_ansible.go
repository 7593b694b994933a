package bench

import (
	"bufio"
	"bytes"
	stdctx "context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-rpc/spindle/ansible/wire"
	"github.com/spindle-rpc/spindle/internal/latency"
)

// The "ansible" group of `spindle-bench`: real playbooks through
// ansible-playbook against the ssh group's target, side by side in one
// run, each system a column:
//
//   - vanilla: Ansible's ssh connection, pipelining on, its default
//     ssh_args (ControlPersist);
//   - spindle: `-c spindle`, the plugin that `spindle ansible install`
//     puts in a directory of the bench's;
//   - floor: `-c benchfloor` (ansible/benchfloor.py), a plugin that runs
//     nothing and answers at once: Ansible's own cost per task;
//   - mitogen: Mitogen's strategy plugin (ANSIBLE_STRATEGY=mitogen_linear)
//     with -c ssh, which it replaces, from its source archive
//     (--mitogen) unpacked into the bench's directory.
//
// Every run starts cold (no ControlPersist master, no spindle daemon, no
// Mitogen multiplexer) and goes through a proxy in front of the target's
// sshd, which adds 0 or 10 ms of round trip and counts the bytes and
// request/response turns that cross it. The controller's CPU is
// ansible-playbook's and its waited-for descendants' (its rusage; Mitogen
// waits for its multiplexers) plus that of the run's helper processes,
// which outlive it (the master, the daemon), read from /proc before they
// are stopped. When the target is the bench's own sshd on this machine,
// the processes each run starts there are sampled too: the peak of their
// summed RSS.

//go:embed ansible/benchfloor.py
var floorPlugin []byte

//go:embed ansible/hotpath.py
var hotpathDriver []byte

// ansibleDirEnv names the playbooks' directory when --ansible-dir is not
// given.
const ansibleDirEnv = "SPINDLE_BENCH_ANSIBLE_DIR"

// ansiblePlaybook is one playbook of the group and the tasks it runs.
type ansiblePlaybook struct {
	file  string
	tasks int
}

var ansiblePlaybooks = []ansiblePlaybook{{"hostname_100.yml", 100}, {"mixed.yml", 20}}

// ansibleFlags are the group's own flags.
type ansibleFlags struct {
	dir     string // --ansible-dir
	python  string // --ansible-python: the target's interpreter
	mitogen string // --mitogen: Mitogen's source archive
}

func ansibleCases() []benchCase {
	var cs []benchCase
	for _, ms := range []int{0, 10} {
		sfx := latencySuffix(ms)
		for _, pb := range ansiblePlaybooks {
			cs = append(cs, benchCase{
				Name: "ansible_" + strings.TrimSuffix(pb.file, ".yml") + sfx, Group: "ansible", Latency: ms, N: 1,
				Rows: func(e *benchEnv, bc benchCase, o benchOptions, emit func(any) error) error {
					return e.ansiblePlaybookRow(bc, pb, o, emit)
				},
			})
		}
		cs = append(cs, benchCase{
			Name: "ansible_exec_true" + sfx, Group: "ansible", Latency: ms, N: map[int]int{0: 100, 10: 30}[ms],
			Rows: func(e *benchEnv, bc benchCase, o benchOptions, emit func(any) error) error {
				return e.ansibleHotRow(bc, o, emit)
			},
		})
	}
	return cs
}

func init() { benchCases = append(benchCases, ansibleCases()...) }

// ansibleSystem is one column of the playbook rows.
type ansibleSystem struct {
	name string // "vanilla", "spindle", "floor"
	conn string // ansible-playbook's -c
	// env is what the system adds to ansible-playbook's environment for
	// a run whose own directory is runDir. Every helper process the run
	// leaves has runDir in its command line.
	env func(runDir string) []string
	// err says why the system cannot run here, or how its first run
	// failed; it is then left out of the rounds that follow.
	err error
}

// ansibleBench is the group's state, set up on first use.
type ansibleBench struct {
	ssh       *sshBench
	dir       string // the bench's own: plugins, inventories, files, runs
	playbooks string // --ansible-dir
	exe       string // ansible-playbook
	python    string // the controller's Python, the one ansible-playbook runs on
	plugins   string // ANSIBLE_CONNECTION_PLUGINS
	cfg       string // ANSIBLE_CONFIG
	files     string // mixed.yml's source files (ANCHOR_FILES_DIR)
	driver    string // hotpath.py
	spindle   string // --spindle
	targetPy  string // the target's interpreter
	systems   []*ansibleSystem
	hosts     map[string]ansibleHost // by ssh alias
	warm      bool                   // every system has run once
	runs      int                    // run directories made
	// rows are the playbook rows so far, by name (the 10 ms rows use the
	// 0 ms ones).
	rows map[string]*ansibleRow
}

// ansibleAvailable says whether the group can run: its playbooks found
// and ansible-playbook installed.
func ansibleAvailable(f ansibleFlags) error {
	if _, err := ansibleDir(f); err != nil {
		return err
	}
	if _, err := osexec.LookPath("ansible-playbook"); err != nil {
		return errors.New("the ansible benchmarks run ansible-playbook: not found in $PATH (apt-get install ansible-core)")
	}
	return nil
}

// ansibleDir is where the playbooks are: --ansible-dir, else
// $SPINDLE_BENCH_ANSIBLE_DIR, else ../shared/bench/ansible beside the
// repository that holds this executable (bin/spindle-bench) or the
// working directory.
func ansibleDir(f ansibleFlags) (string, error) {
	var tried []string
	check := func(d string) (string, bool) {
		tried = append(tried, d)
		for _, pb := range ansiblePlaybooks {
			if _, err := os.Stat(filepath.Join(d, pb.file)); err != nil {
				return "", false
			}
		}
		abs, err := filepath.Abs(d)
		return abs, err == nil
	}
	explicit := f.dir
	if explicit == "" {
		explicit = os.Getenv(ansibleDirEnv)
	}
	if explicit != "" {
		if d, ok := check(explicit); ok {
			return d, nil
		}
		return "", fmt.Errorf("the ansible benchmarks run %s from %s: not there", playbookNames(), explicit)
	}
	for _, r := range repoRoots() {
		if d, ok := check(filepath.Join(r, "..", "shared", "bench", "ansible")); ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("the ansible benchmarks run %s: not found in %s (give --ansible-dir DIR or set %s)",
		playbookNames(), strings.Join(tried, ", "), ansibleDirEnv)
}

// repoRoots are where the repository may be: the directory above this
// executable's (bin/spindle-bench), and the one holding go.mod above the
// working directory.
func repoRoots() []string {
	var repos []string
	if exe, err := os.Executable(); err == nil {
		repos = append(repos, filepath.Dir(filepath.Dir(exe)))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				repos = append(repos, d)
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return repos
}

func playbookNames() string {
	var n []string
	for _, pb := range ansiblePlaybooks {
		n = append(n, pb.file)
	}
	return strings.Join(n, " and ")
}

func (e *benchEnv) ansibleBench() (*ansibleBench, error) {
	if e.ansible == nil && e.ansibleErr == nil {
		e.ansible, e.ansibleErr = newAnsibleBench(e)
	}
	return e.ansible, e.ansibleErr
}

func newAnsibleBench(e *benchEnv) (_ *ansibleBench, err error) {
	if err := ansibleAvailable(e.ansibleFlags); err != nil {
		return nil, err
	}
	sb, err := e.sshBench()
	if err != nil {
		return nil, err
	}
	a := &ansibleBench{ssh: sb, spindle: e.g.spindle, targetPy: e.ansibleFlags.python,
		hosts: map[string]ansibleHost{}, rows: map[string]*ansibleRow{}}
	if a.playbooks, err = ansibleDir(e.ansibleFlags); err != nil {
		return nil, err
	}
	if a.exe, err = osexec.LookPath("ansible-playbook"); err != nil {
		return nil, err
	}
	if a.python, err = scriptInterpreter(a.exe); err != nil {
		return nil, err
	}
	// Short: ControlPath sockets live under it.
	if a.dir, err = os.MkdirTemp("", "sba-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	a.plugins = filepath.Join(a.dir, "plugins")
	a.files = filepath.Join(a.dir, "files")
	a.driver = filepath.Join(a.dir, "hotpath.py")
	a.cfg = filepath.Join(a.dir, "ansible.cfg")
	for _, d := range []string{a.plugins, a.files} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	for path, b := range map[string][]byte{
		filepath.Join(a.plugins, "benchfloor.py"): floorPlugin,
		a.driver: hotpathDriver,
		a.cfg:    []byte(ansibleConfig),
	} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, err
		}
	}
	mk := osexec.Command("bash", filepath.Join(a.playbooks, "make-files.sh"))
	mk.Env = append(os.Environ(), "ANCHOR_FILES_DIR="+a.files)
	if out, err := mk.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mixed.yml's source files: %s: %v: %s", mk, err, bytes.TrimSpace(out))
	}
	a.systems = ansibleSystems(a, e.ansibleFlags)
	return a, nil
}

// ansibleConfig is the runs' ansible.cfg: what the README of the
// playbooks asks for, stated rather than inherited.
const ansibleConfig = `[defaults]
host_key_checking = True
retry_files_enabled = False
nocolor = True

[ssh_connection]
pipelining = True
`

// ansibleSystems are the columns.
func ansibleSystems(a *ansibleBench, f ansibleFlags) []*ansibleSystem {
	spindle := &ansibleSystem{name: "spindle", conn: "spindle", env: func(runDir string) []string {
		// The daemon's socket is under XDG_RUNTIME_DIR: a run of its own
		// starts one, cold.
		return []string{"XDG_RUNTIME_DIR=" + runDir}
	}}
	spindle.err = a.installSpindle()
	return []*ansibleSystem{
		{name: "vanilla", conn: "ssh", env: func(runDir string) []string {
			return []string{"ANSIBLE_SSH_CONTROL_PATH_DIR=" + runDir}
		}},
		spindle,
		mitogenSystem(f, a.dir),
		{name: "floor", conn: "benchfloor", env: func(string) []string { return nil }},
	}
}

// installSpindle puts the spindle plugin among the bench's plugins, as a
// user would for a project (`spindle ansible install --path DIR`).
func (a *ansibleBench) installSpindle() error {
	if a.spindle == "" {
		return errors.New("no spindle command to install the plugin from (give --spindle PATH, or run make build)")
	}
	cmd := osexec.Command(a.spindle, "ansible", "install", "--path", a.plugins)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", cmd, err, bytes.TrimSpace(out))
	}
	if _, err := os.Stat(filepath.Join(a.plugins, "spindle.py")); err != nil {
		return fmt.Errorf("%s left no spindle.py in %s", cmd, a.plugins)
	}
	return nil
}

// scriptInterpreter is the interpreter on a script's #! line, looked up
// in $PATH when it is `env NAME`.
func scriptInterpreter(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, _ := bufio.NewReader(io.LimitReader(f, 256)).ReadString('\n')
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if !strings.HasPrefix(line, "#!") || len(fields) == 0 {
		return "", fmt.Errorf("%s: no #! line naming its Python", path)
	}
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
		return osexec.LookPath(fields[len(fields)-1])
	}
	return fields[0], nil
}

// ansibleHost is the bench's target as an inventory names it.
type ansibleHost struct {
	vars map[string]string // ansible_host, ansible_port, ...
}

// hostVars turns what `ssh -G ALIAS` resolves into the inventory
// variables of the ssh connection (Spindle's plugin reads the same):
// address, port, user, key, known_hosts, with the target's Python fixed
// so that no interpreter discovery runs.
func hostVars(res map[string][]string, python, spindle string) (map[string]string, error) {
	host, port, user := first(res["hostname"]), first(res["port"]), first(res["user"])
	if host == "" || port == "" || user == "" {
		return nil, fmt.Errorf("ssh -G gave no hostname, port or user: %v", res)
	}
	v := map[string]string{
		"ansible_host":               host,
		"ansible_port":               port,
		"ansible_user":               user,
		"ansible_python_interpreter": python,
	}
	if spindle != "" {
		v["ansible_spindle_path"] = spindle
	}
	for _, id := range res["identityfile"] {
		if _, err := os.Stat(id); err == nil {
			v["ansible_ssh_private_key_file"] = id
			break
		}
	}
	var opts []string
	if kh := first(res["userknownhostsfile"]); kh != "" {
		opts = append(opts, "-o UserKnownHostsFile="+strings.Fields(kh)[0])
	}
	switch first(res["stricthostkeychecking"]) {
	case "true", "yes":
		opts = append(opts, "-o StrictHostKeyChecking=yes")
	case "accept-new":
		opts = append(opts, "-o StrictHostKeyChecking=accept-new")
	}
	if first(res["identitiesonly"]) == "yes" {
		opts = append(opts, "-o IdentitiesOnly=yes")
	}
	if len(opts) > 0 {
		v["ansible_ssh_common_args"] = strings.Join(opts, " ")
	}
	return v, nil
}

// host is the target through the ssh config's alias, resolved once.
func (a *ansibleBench) host(alias string) (ansibleHost, error) {
	if h, ok := a.hosts[alias]; ok {
		return h, nil
	}
	res, err := sshResolve([]string{"-F", filepath.Join(a.ssh.dir, "ssh_config")}, alias)
	if err != nil {
		return ansibleHost{}, err
	}
	v, err := hostVars(res, a.targetPy, a.spindle)
	if err != nil {
		return ansibleHost{}, err
	}
	h := ansibleHost{vars: v}
	a.hosts[alias] = h
	return h, nil
}

// inventory is an INI inventory of the one host "bench".
func (h ansibleHost) inventory() string {
	keys := make([]string, 0, len(h.vars))
	for k := range h.vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("bench")
	for _, k := range keys {
		v := h.vars[k]
		if strings.ContainsAny(v, " \t'\"") {
			v = "'" + strings.ReplaceAll(v, "'", `'"'"'`) + "'"
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	b.WriteString("\n")
	return b.String()
}

// ansibleRun is what one ansible-playbook run measured.
type ansibleRun struct {
	wall      time.Duration
	cpu       time.Duration // ansible-playbook and its waited-for descendants
	helperCPU time.Duration // the helpers the run left (master, daemon)
	sent      int64         // to the target, through the proxy
	received  int64
	turns     int64
	// target is the peak summed RSS and PSS of the processes the run
	// started on the target; -1 each when the target is not on this
	// machine.
	target targetMem
}

// newRunDir is a fresh directory of the bench's for one run.
func (a *ansibleBench) newRunDir() (string, error) {
	a.runs++
	d := filepath.Join(a.dir, "r"+strconv.Itoa(a.runs))
	return d, os.Mkdir(d, 0o700)
}

// env is ansible-playbook's environment: this process's without its
// ANSIBLE_* settings, then the bench's and, when s is not nil, the
// system's.
func (a *ansibleBench) env(s *ansibleSystem, runDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANSIBLE_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"ANSIBLE_CONFIG="+a.cfg,
		"ANSIBLE_CONNECTION_PLUGINS="+a.plugins,
		"ANSIBLE_PIPELINING=True",
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(runDir, "local"),
		"ANCHOR_FILES_DIR="+a.files,
	)
	if s != nil {
		env = append(env, s.env(runDir)...)
	}
	return env
}

// runPlaybook runs pb once with system s against alias, whose traffic
// crosses proxy, and checks that every task succeeded.
func (a *ansibleBench) runPlaybook(ctx stdctx.Context, s *ansibleSystem, pb ansiblePlaybook, alias string, proxy *latency.Proxy) (ansibleRun, error) {
	h, err := a.host(alias)
	if err != nil {
		return ansibleRun{}, err
	}
	runDir, err := a.newRunDir()
	if err != nil {
		return ansibleRun{}, err
	}
	inv := filepath.Join(runDir, "inventory")
	if err := os.WriteFile(inv, []byte(h.inventory()), 0o600); err != nil {
		return ansibleRun{}, err
	}
	ctx, cancel := stdctx.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, a.exe, "-i", inv, "-c", s.conn, filepath.Join(a.playbooks, pb.file))
	cmd.Dir = runDir
	cmd.Env = a.env(s, runDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	up0, down0 := proxy.Forwarded()
	turns0 := proxy.Turns()
	var watch *rssWatch
	if a.ssh.sshd != nil {
		if watch, err = watchTargetRSS(a.ssh.sshd.user.UID); err != nil {
			return ansibleRun{}, err
		}
	}
	t0 := time.Now()
	runErr := cmd.Run()
	r := ansibleRun{wall: time.Since(t0), target: targetMem{-1, -1}}
	if watch != nil {
		r.target = watch.Stop()
	}
	up1, down1 := proxy.Forwarded()
	r.sent, r.received, r.turns = up1-up0, down1-down0, proxy.Turns()-turns0
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	r.helperCPU, err = stopHelpers(runDir)
	if err != nil {
		return r, err
	}
	if runErr != nil {
		return r, fmt.Errorf("%s: %v\n%s", cmd, runErr, tailLines(out.String(), 25))
	}
	rc, err := parseRecap(out.String(), "bench")
	if err != nil {
		return r, fmt.Errorf("%s: %v\n%s", cmd, err, tailLines(out.String(), 25))
	}
	if rc.ok != pb.tasks || rc.failed != 0 || rc.unreachable != 0 {
		return r, fmt.Errorf("%s: %d tasks ok, %d failed, %d unreachable; want all %d ok\n%s",
			cmd, rc.ok, rc.failed, rc.unreachable, pb.tasks, tailLines(out.String(), 25))
	}
	return r, nil
}

// recap is one host's line of ansible-playbook's PLAY RECAP.
type recap struct {
	ok, changed, unreachable, failed, skipped int
}

var recapField = regexp.MustCompile(`\b(ok|changed|unreachable|failed|skipped)=(\d+)`)

// parseRecap finds host's line in the PLAY RECAP of a run's output.
func parseRecap(out, host string) (recap, error) {
	_, after, found := strings.Cut(out, "PLAY RECAP")
	if !found {
		return recap{}, errors.New("no PLAY RECAP in the output")
	}
	for _, line := range strings.Split(after, "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != host {
			continue
		}
		var r recap
		seen := 0
		for _, m := range recapField.FindAllStringSubmatch(rest, -1) {
			n, err := strconv.Atoi(m[2])
			if err != nil {
				return recap{}, fmt.Errorf("PLAY RECAP %s: %w", m[0], err)
			}
			seen++
			switch m[1] {
			case "ok":
				r.ok = n
			case "changed":
				r.changed = n
			case "unreachable":
				r.unreachable = n
			case "failed":
				r.failed = n
			case "skipped":
				r.skipped = n
			}
		}
		if seen == 0 {
			return recap{}, fmt.Errorf("PLAY RECAP line for %s has no counts: %q", host, line)
		}
		return r, nil
	}
	return recap{}, fmt.Errorf("PLAY RECAP has no line for %s", host)
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ansibleRow is one playbook at one added latency, every system's
// figures side by side: the medians of the rounds.
type ansibleRow struct {
	Name      string                     `json:"name"`
	Playbook  string                     `json:"playbook"`
	Tasks     int                        `json:"tasks"`
	LatencyMS int                        `json:"latency_ms"`
	Systems   map[string]*ansibleFigures `json:"systems"`
	// Errors say why a system has no figures, or why some of its rounds
	// are missing.
	Errors map[string]string `json:"errors,omitempty"`
	// Ratios are each system's figures ÷ vanilla's, by "SYSTEM/vanilla",
	// and spindle's ÷ mitogen's, "spindle/mitogen".
	Ratios map[string]ansibleRatios `json:"ratios,omitempty"`
	// RoundTrips says how turns_per_task is counted.
	RoundTrips string `json:"round_trips"`
	// Load1 is the machine's 1-minute load average when the row ended:
	// above the number of CPUs, other work shared the machine and the
	// times say little.
	Load1  float64 `json:"load1"`
	Target string  `json:"target"`
	Rounds int     `json:"rounds"`
}

// ansibleFigures are one system's medians in a row.
type ansibleFigures struct {
	WallMS       float64   `json:"wall_ms"`
	WallRoundsMS []float64 `json:"wall_rounds_ms"`
	// CPUMS is the controller's: ansible-playbook's tree and the run's
	// helpers; HelperCPUMS the helpers' share.
	CPUMS       float64 `json:"cpu_ms"`
	HelperCPUMS float64 `json:"helper_cpu_ms"`
	SentBytes   int64   `json:"sent_bytes"`
	RecvBytes   int64   `json:"received_bytes"`
	// TurnsPerTask is request/response turns at the proxy per task.
	TurnsPerTask float64 `json:"turns_per_task"`
	// ExcessMS is wall time over the floor's, ExcessCPUMS the same for
	// CPU: what the system costs beyond Ansible's own work.
	ExcessMS        float64 `json:"excess_ms"`
	ExcessPerTaskMS float64 `json:"excess_per_task_ms"`
	ExcessCPUMS     float64 `json:"excess_cpu_ms"`
	// RTTsPerTask, on a 10 ms row: (wall − the 0 ms row's wall) ÷ 10 ms ÷
	// tasks, the round trips each task waits for, as the clock sees them.
	RTTsPerTask float64 `json:"rtts_per_task,omitempty"`
	// TargetRSSKiB is, when the target is on this machine, the peak RSS
	// of the processes a run starts there, summed (sampled every 100 ms;
	// sshd's own left out): Mitogen's interpreters, Spindle's agent and
	// runner, Ansible's module processes. A become adds its own.
	// TargetPSSKiB is the same in PSS: pages that forked processes share
	// counted once.
	TargetRSSKiB int64 `json:"target_rss_kib,omitempty"`
	TargetPSSKiB int64 `json:"target_pss_kib,omitempty"`
	runs         []ansibleRun
}

// ansibleRatios are a system's medians ÷ another's.
type ansibleRatios struct {
	Wall      float64 `json:"wall"`
	CPU       float64 `json:"cpu"`
	Sent      float64 `json:"sent"`
	Turns     float64 `json:"turns"`
	Excess    float64 `json:"excess"`
	TargetRSS float64 `json:"target_rss,omitempty"`
	TargetPSS float64 `json:"target_pss,omitempty"`
}

// ansibleRoundTrips is the rows' round_trips. At 0 ms, acknowledgements
// and replies interleave more finely than at 10 ms, where a burst each
// way merges; the 10 ms rows' count is the one to compare with a target.
const ansibleRoundTrips = "request/response turns counted at the proxy in front of sshd (bytes back from the target after bytes to it), per task"

// proxyFor is the alias and counting proxy of the playbook rows at ms.
func (a *ansibleBench) proxyFor(ms int) (string, *latency.Proxy) {
	if ms == 0 {
		return benchAliasCounted, a.ssh.count
	}
	return benchAlias10ms, a.ssh.proxy
}

// warmUp runs mixed.yml once with each system, untimed: Ansible's
// caches, the target's page cache and Spindle's agent cache on the
// target are then as a user's second run finds them.
func (a *ansibleBench) warmUp(ctx stdctx.Context, stderr io.Writer) {
	if a.warm {
		return
	}
	a.warm = true
	alias, proxy := a.proxyFor(0)
	for _, s := range a.systems {
		if s.err != nil {
			continue
		}
		if _, err := a.runPlaybook(ctx, s, ansiblePlaybooks[1], alias, proxy); err != nil {
			s.err = fmt.Errorf("warm-up run: %w", err)
		}
	}
	for _, s := range a.systems {
		if s.err != nil {
			fmt.Fprintf(stderr, "spindle-bench: ansible: %s: %v\n", s.name, s.err)
		}
	}
}

// ansiblePlaybookRow runs pb with every system, in rounds that take the
// systems in turn (each round starting with the next), and emits the
// medians.
func (e *benchEnv) ansiblePlaybookRow(bc benchCase, pb ansiblePlaybook, o benchOptions, emit func(any) error) error {
	a, err := e.ansibleBench()
	if err != nil {
		return err
	}
	a.warmUp(e.ctx, e.g.stderr)
	alias, proxy := a.proxyFor(bc.Latency)
	row := &ansibleRow{Name: bc.Name, Playbook: pb.file, Tasks: pb.tasks, LatencyMS: bc.Latency,
		Systems: map[string]*ansibleFigures{}, RoundTrips: ansibleRoundTrips, Target: a.ssh.label, Rounds: o.rounds}
	for _, s := range a.systems {
		row.Systems[s.name] = &ansibleFigures{}
	}
	for r := 0; r < o.rounds; r++ {
		for i := range a.systems {
			s := a.systems[(r+i)%len(a.systems)]
			if s.err != nil {
				continue
			}
			run, err := a.runPlaybook(e.ctx, s, pb, alias, proxy)
			if err != nil {
				if e.ctx.Err() != nil {
					return e.ctx.Err()
				}
				s.err = err
				fmt.Fprintf(e.g.stderr, "spindle-bench: %s: %s: %v\n", bc.Name, s.name, err)
				continue
			}
			f := row.Systems[s.name]
			f.runs = append(f.runs, run)
		}
	}
	row.finish(a.systems, a.rows[strings.TrimSuffix(bc.Name, latencySuffix(bc.Latency))])
	row.Load1 = load1()
	a.rows[bc.Name] = row
	return emit(row)
}

// finish turns each system's runs into medians, the excess over the
// floor, the ratios to vanilla and, given the same playbook's 0 ms row,
// the round trips per task as the clock sees them.
func (row *ansibleRow) finish(systems []*ansibleSystem, at0 *ansibleRow) {
	for _, s := range systems {
		if s.err != nil {
			if row.Errors == nil {
				row.Errors = map[string]string{}
			}
			row.Errors[s.name] = s.err.Error()
		}
		f := row.Systems[s.name]
		if f == nil || len(f.runs) == 0 {
			delete(row.Systems, s.name)
			continue
		}
		var wall, cpu, helper, sent, recv, turns, targetRSS, targetPSS []float64
		for _, r := range f.runs {
			if r.target.rss >= 0 {
				targetRSS = append(targetRSS, float64(r.target.rss))
				targetPSS = append(targetPSS, float64(r.target.pss))
			}
			wall = append(wall, ms(r.wall))
			cpu = append(cpu, ms(r.cpu+r.helperCPU))
			helper = append(helper, ms(r.helperCPU))
			sent = append(sent, float64(r.sent))
			recv = append(recv, float64(r.received))
			turns = append(turns, float64(r.turns))
		}
		f.WallRoundsMS = slices.Clone(wall)
		f.WallMS = median(wall)
		f.CPUMS = median(cpu)
		f.HelperCPUMS = median(helper)
		f.SentBytes = int64(median(sent))
		f.RecvBytes = int64(median(recv))
		f.TurnsPerTask = round3(median(turns) / float64(row.Tasks))
		if len(targetRSS) > 0 {
			f.TargetRSSKiB = int64(median(targetRSS)) >> 10
			f.TargetPSSKiB = int64(median(targetPSS)) >> 10
		}
	}
	floor := row.Systems["floor"]
	for name, f := range row.Systems {
		if floor != nil {
			f.ExcessMS = round1(f.WallMS - floor.WallMS)
			f.ExcessPerTaskMS = round3(f.ExcessMS / float64(row.Tasks))
			f.ExcessCPUMS = round1(f.CPUMS - floor.CPUMS)
		}
		if at0 != nil && row.LatencyMS > 0 && name != "floor" { // the floor never crosses the link
			if f0 := at0.Systems[name]; f0 != nil {
				f.RTTsPerTask = round3((f.WallMS - f0.WallMS) / float64(row.LatencyMS) / float64(row.Tasks))
			}
		}
	}
	if van := row.Systems["vanilla"]; van != nil {
		for name, f := range row.Systems {
			if name != "vanilla" && name != "floor" {
				row.setRatio(name, "vanilla", f, van)
			}
		}
	}
	// Spindle against the other design that keeps an interpreter on the
	// target.
	if sp, mi := row.Systems["spindle"], row.Systems["mitogen"]; sp != nil && mi != nil {
		row.setRatio("spindle", "mitogen", sp, mi)
	}
}

// setRatio puts f's figures ÷ base's among the ratios, as "NAME/BASE".
func (row *ansibleRow) setRatio(name, baseName string, f, base *ansibleFigures) {
	if row.Ratios == nil {
		row.Ratios = map[string]ansibleRatios{}
	}
	row.Ratios[name+"/"+baseName] = ansibleRatios{
		Wall:      ratio(f.WallMS, base.WallMS),
		CPU:       ratio(f.CPUMS, base.CPUMS),
		Sent:      ratio(float64(f.SentBytes), float64(base.SentBytes)),
		Turns:     ratio(f.TurnsPerTask, base.TurnsPerTask),
		Excess:    ratio(f.ExcessMS, base.ExcessMS),
		TargetRSS: ratio(float64(f.TargetRSSKiB), float64(base.TargetRSSKiB)),
		TargetPSS: ratio(float64(f.TargetPSSKiB), float64(base.TargetPSSKiB)),
	}
}

func ms(d time.Duration) float64 { return round1(float64(d) / float64(time.Millisecond)) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}

// median of s, which it sorts.
func median(s []float64) float64 {
	slices.Sort(s)
	return medianSorted(s)
}

// ansibleHotRow is the hot path: exec_command("true") through a
// connection plugin as Ansible's workers call it, against what that
// plugin keeps warm, beside Spindle's library and OpenSSH.
type ansibleHotRow struct {
	Name      string `json:"name"`
	LatencyMS int    `json:"latency_ms"`
	// NSPerCall is each column's median ns per `true`: spindle_plugin,
	// ssh_plugin and floor_plugin through hotpath.py (a new connection
	// object per call); spindle_library as ssh_true_seq measures it;
	// openssh_controlmaster as `ssh host true` over a warm master.
	NSPerCall map[string]float64 `json:"ns_per_call"`
	// Phases split each plugin column's call (medians, ns): setup (the
	// loader's new object and set_options), exec (exec_command: for
	// spindle the socket round trip to the daemon and all behind it),
	// close.
	Phases map[string]hotPhases `json:"phases_ns,omitempty"`
	Errors map[string]string    `json:"errors,omitempty"`
	// PluginVsLibrary is spindle_plugin ÷ spindle_library,
	// PluginVsControlMaster spindle_plugin ÷ openssh_controlmaster,
	// SSHPluginVsControlMaster ssh_plugin ÷ openssh_controlmaster.
	PluginVsLibrary          float64 `json:"spindle_plugin_vs_library,omitempty"`
	PluginVsControlMaster    float64 `json:"spindle_plugin_vs_controlmaster,omitempty"`
	SSHPluginVsControlMaster float64 `json:"ssh_plugin_vs_controlmaster,omitempty"`
	// PluginVsFloor is spindle_plugin ÷ ipc_floor: against what any
	// plugin that hands the call to the library in another process must
	// pay (Ansible's connection object, one socket round trip, the wait
	// for the library's run of the command line in a shell).
	PluginVsFloor float64 `json:"spindle_plugin_vs_floor,omitempty"`
	Load1         float64 `json:"load1"` // as ansibleRow's
	Target        string  `json:"target"`
	N             int     `json:"n"`
	Rounds        int     `json:"rounds"`
}

// hotColumn is one column of the hot-path row.
type hotColumn struct {
	name string
	run  func(n int) (hotTiming, error)
	err  error
}

// hotTiming is one round of a hot-path column: ns per call, and for a
// plugin its phases.
type hotTiming struct {
	ns     float64
	phases *hotPhases
}

// hotPhases are hotpath.py's phases of one call, ns each.
type hotPhases struct {
	Setup float64 `json:"setup"`
	Exec  float64 `json:"exec"`
	Close float64 `json:"close"`
}

func (e *benchEnv) ansibleHotRow(bc benchCase, o benchOptions, emit func(any) error) error {
	a, err := e.ansibleBench()
	if err != nil {
		return err
	}
	n := o.n
	if n <= 0 {
		n = bc.N
	}
	alias := benchAlias
	if bc.Latency > 0 {
		alias = benchAlias10ms
	}
	p := e.sshPath(bc.Latency)
	// The plugins' helpers (daemon, master) stay warm through the row's
	// rounds, in a directory of the row's own, and stop at its end.
	runDir, err := a.newRunDir()
	if err != nil {
		return err
	}
	defer stopHelpers(runDir) //nolint:errcheck // nothing to report them to
	floorSock := filepath.Join(runDir, "ipc-floor.sock")
	stopFloor, err := serveIPCFloor(floorSock, func() error {
		_, err := p.spindleShellTrue(e.ctx, 1)
		return err
	})
	if err != nil {
		return err
	}
	defer stopFloor()
	plugin := func(s *ansibleSystem, name string, env ...string) func(n int) (hotTiming, error) {
		return func(n int) (hotTiming, error) {
			if s != nil && s.err != nil {
				return hotTiming{}, s.err
			}
			return a.hotpath(e.ctx, name, alias, runDir, n, env...)
		}
	}
	timed := func(f func(stdctx.Context, int) (float64, error)) func(n int) (hotTiming, error) {
		return func(n int) (hotTiming, error) {
			ns, err := f(e.ctx, n)
			return hotTiming{ns: ns}, err
		}
	}
	cols := []*hotColumn{
		{name: "spindle_plugin", run: plugin(a.system("spindle"), "spindle")},
		{name: "spindle_library", run: timed(p.spindleTrue)},
		{name: "spindle_library_sh", run: timed(p.spindleShellTrue)},
		{name: "openssh_controlmaster", run: timed(p.controlMasterTrue)},
		{name: "ssh_plugin", run: plugin(nil, "ssh")},
		{name: "floor_plugin", run: plugin(nil, "benchfloor")},
		// The spindle plugin's connection object and set_options, then a
		// round trip to a server that runs `/bin/sh -c true` through the
		// library, as spindle_library_sh does, and answers (hotpath.py).
		{name: "ipc_floor", run: plugin(a.system("spindle"), "spindle", "SPINDLE_BENCH_IPC_FLOOR="+floorSock)},
	}
	got := map[string][]hotTiming{}
	for r := 0; r < o.rounds; r++ {
		for i := range cols {
			c := cols[(r+i)%len(cols)]
			if c.err != nil {
				continue
			}
			t, err := c.run(n)
			if err != nil {
				if e.ctx.Err() != nil {
					return e.ctx.Err()
				}
				c.err = err
				fmt.Fprintf(e.g.stderr, "spindle-bench: %s: %s: %v\n", bc.Name, c.name, err)
				continue
			}
			got[c.name] = append(got[c.name], t)
		}
	}
	row := &ansibleHotRow{Name: bc.Name, LatencyMS: bc.Latency, NSPerCall: map[string]float64{},
		Target: a.ssh.label, N: n, Rounds: o.rounds, Load1: load1()}
	for _, c := range cols {
		if ts := got[c.name]; len(ts) > 0 {
			var ns, setup, exec, cl []float64
			for _, t := range ts {
				ns = append(ns, t.ns)
				if t.phases != nil {
					setup, exec, cl = append(setup, t.phases.Setup), append(exec, t.phases.Exec), append(cl, t.phases.Close)
				}
			}
			row.NSPerCall[c.name] = round1(median(ns))
			if len(setup) > 0 {
				if row.Phases == nil {
					row.Phases = map[string]hotPhases{}
				}
				row.Phases[c.name] = hotPhases{Setup: round1(median(setup)), Exec: round1(median(exec)), Close: round1(median(cl))}
			}
		}
		if c.err != nil {
			if row.Errors == nil {
				row.Errors = map[string]string{}
			}
			row.Errors[c.name] = c.err.Error()
		}
	}
	ns := row.NSPerCall
	row.PluginVsLibrary = ratio(ns["spindle_plugin"], ns["spindle_library"])
	row.PluginVsControlMaster = ratio(ns["spindle_plugin"], ns["openssh_controlmaster"])
	row.PluginVsFloor = ratio(ns["spindle_plugin"], ns["ipc_floor"])
	row.SSHPluginVsControlMaster = ratio(ns["ssh_plugin"], ns["openssh_controlmaster"])
	return emit(row)
}

func (a *ansibleBench) system(name string) *ansibleSystem {
	for _, s := range a.systems {
		if s.name == name {
			return s
		}
	}
	return &ansibleSystem{name: name, err: fmt.Errorf("no system %q", name)}
}

// hotpath runs hotpath.py: n calls of `true` through plugin against
// alias, after one untimed call; env is added to its environment.
func (a *ansibleBench) hotpath(ctx stdctx.Context, plugin, alias, runDir string, n int, env ...string) (hotTiming, error) {
	h, err := a.host(alias)
	if err != nil {
		return hotTiming{}, err
	}
	vars, err := json.Marshal(h.vars)
	if err != nil {
		return hotTiming{}, err
	}
	ctx, cancel := stdctx.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, a.python, a.driver, plugin, strconv.Itoa(n), string(vars))
	cmd.Dir = runDir
	// The run's env for both helpers: the ssh plugin's masters and the
	// daemon's socket under runDir.
	cmd.Env = append(a.env(nil, runDir),
		"ANSIBLE_SSH_CONTROL_PATH_DIR="+runDir, "XDG_RUNTIME_DIR="+runDir)
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return hotTiming{}, fmt.Errorf("%s %s %s: %v: %s", a.python, a.driver, plugin, err, tailLines(stderr.String(), 15))
	}
	return parseHotpath(out)
}

// parseHotpath reads hotpath.py's answer.
func parseHotpath(out []byte) (hotTiming, error) {
	var res struct {
		NS    *float64 `json:"ns_per_call"`
		Calls int      `json:"calls"`
		Setup float64  `json:"setup_ns"`
		Exec  float64  `json:"exec_ns"`
		Close float64  `json:"close_ns"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		return hotTiming{}, fmt.Errorf("hotpath.py's output %q: %w", out, err)
	}
	if res.NS == nil || *res.NS <= 0 || res.Calls <= 0 {
		return hotTiming{}, fmt.Errorf("hotpath.py's output %q: no positive ns_per_call and calls", out)
	}
	if res.Setup < 0 || res.Exec <= 0 || res.Close < 0 || res.Setup+res.Exec+res.Close > *res.NS {
		return hotTiming{}, fmt.Errorf("hotpath.py's output %q: phases that do not fit in the call", out)
	}
	return hotTiming{ns: *res.NS, phases: &hotPhases{Setup: res.Setup, Exec: res.Exec, Close: res.Close}}, nil
}

func (a *ansibleBench) close() {
	if a.dir == "" {
		return
	}
	stopHelpers(a.dir) //nolint:errcheck // best effort at exit
	os.RemoveAll(a.dir)
}

// table is the row for --json=false: a line per system.
func (row *ansibleRow) table() []string {
	var out []string
	for _, name := range sortedKeys(row.Systems) {
		f := row.Systems[name]
		line := fmt.Sprintf("%s\t%s\twall %s\tcpu %s\tsent %d KiB\tturns/task %.2f\texcess %s\t",
			row.Name, name, fmtMS(f.WallMS), fmtMS(f.CPUMS), f.SentBytes>>10, f.TurnsPerTask, fmtMS(f.ExcessMS))
		if f.TargetRSSKiB > 0 {
			line += fmt.Sprintf("target rss %d KiB pss %d KiB\t", f.TargetRSSKiB, f.TargetPSSKiB)
		}
		for _, base := range []string{"vanilla", "mitogen"} {
			if r, ok := row.Ratios[name+"/"+base]; ok {
				line += fmt.Sprintf("wall %.2fx %s\t", r.Wall, base)
			}
		}
		out = append(out, line)
	}
	for _, name := range sortedKeys(row.Errors) {
		out = append(out, fmt.Sprintf("%s\t%s\terror: %s\t", row.Name, name, firstLine(row.Errors[name])))
	}
	return out
}

func (row *ansibleHotRow) table() []string {
	var out []string
	for _, name := range sortedKeys(row.NSPerCall) {
		out = append(out, fmt.Sprintf("%s\t%s\t%s\t", row.Name, name, fmtNS(row.NSPerCall[name])))
	}
	for _, name := range sortedKeys(row.Errors) {
		out = append(out, fmt.Sprintf("%s\t%s\terror: %s\t", row.Name, name, firstLine(row.Errors[name])))
	}
	return append(out, fmt.Sprintf("%s\tspindle_plugin/library %.2f\t/controlmaster %.2f\t/ipc_floor %.2f\t",
		row.Name, row.PluginVsLibrary, row.PluginVsControlMaster, row.PluginVsFloor))
}

// ipcFloorAnswer is the IPC floor server's answer: a length-prefixed {}.
var ipcFloorAnswer = []byte{0, 0, 0, 2, '{', '}'}

// serveIPCFloor serves hotpath.py's IPC floor (SPINDLE_BENCH_IPC_FLOOR)
// on a Unix socket at path: each connection's length-prefixed request
// (at most wire.MaxHeader bytes) is read, work run, and ipcFloorAnswer
// written (nothing, if work failed). stop closes it and waits for its
// goroutines.
func serveIPCFloor(path string, work func() error) (stop func(), err error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	serve := func(c net.Conn) {
		defer wg.Done()
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute)) //nolint:errcheck // a socket supports deadlines
		var n [4]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		size := binary.BigEndian.Uint32(n[:])
		if size > wire.MaxHeader {
			return
		}
		if _, err := io.CopyN(io.Discard, c, int64(size)); err != nil {
			return
		}
		if work() != nil {
			return
		}
		c.Write(ipcFloorAnswer) //nolint:errcheck // the client's failure is its own
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go serve(c)
		}
	}()
	return func() { ln.Close(); wg.Wait() }, nil
}

func fmtMS(v float64) string { return fmtDuration(time.Duration(v * float64(time.Millisecond))) }

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// load1 is the 1-minute load average, 0 when /proc/loadavg cannot say.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
