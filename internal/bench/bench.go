package bench

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/internal/cli"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
	"github.com/spindle-rpc/spindle/target"
	"golang.org/x/term"
)

// A benchCase is one row: an operation through Spindle and the baseline
// it is compared with. The groups' files (bench_ssh.go, bench_via.go,
// bench_files.go, bench_tunnel.go) add rows to benchCases.
type benchCase struct {
	Name     string // "ping_rtt"
	Group    string // "core"; `spindle-bench GROUP` selects rows
	Baseline string // the baseline's label, "pipe_rtt_cat"
	N        int    // default iterations per round
	// Latency is the added round-trip time in ms of the ssh group's rows
	// (reported as latency_ms).
	Latency int
	// Spindle and Base run n iterations and return nanoseconds per
	// iteration.
	Spindle func(e *benchEnv, n int) (float64, error)
	Base    func(e *benchEnv, n int) (float64, error)
	// Finish, if set, adds derived fields to the row.
	Finish func(e *benchEnv, r *benchResult)
	// Rows, if set, measures the case in place of Spindle and Base and
	// hands emit rows of its own: the ansible group's have a column per
	// system and figures past time.
	Rows func(e *benchEnv, bc benchCase, o benchOptions, emit func(any) error) error
}

// needsSSH says the case runs against the ssh group's target.
func (bc benchCase) needsSSH() bool { return bc.Group != "core" }

// explicitOnly groups run only when named: files_big moves 1 GiB per row,
// ansible runs minutes of playbooks with a program of its own.
var explicitOnly = map[string]bool{"files_big": true, "ansible": true}

// pipelineDepth is the number of calls in flight for ping_pipelined_64.
const pipelineDepth = 64

var benchCases = []benchCase{
	{
		Name: "ping_rtt", Group: "core", Baseline: "pipe_rtt_cat", N: 5000,
		Spindle: benchPing,
		Base:    benchPipeCat,
	},
	{
		Name: "exec_true", Group: "core", Baseline: "local_fork_exec", N: 300,
		Spindle: func(e *benchEnv, n int) (float64, error) {
			cmd := exec.Cmd{Argv: []string{"/bin/true"}}
			return timePerOp(n, func() error {
				res, err := exec.Run(e.ctx, e.cx, cmd)
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("/bin/true exited with %d", res.ExitCode)
				}
				return err
			})
		},
		Base: func(e *benchEnv, n int) (float64, error) {
			return timePerOp(n, func() error { return osexec.Command("/bin/true").Run() })
		},
	},
	{
		Name: "ping_pipelined_64", Group: "core", Baseline: "sequential_ping", N: 20000,
		Spindle: func(e *benchEnv, n int) (float64, error) {
			futs := make([]*spindle.Future, 0, pipelineDepth)
			t0 := time.Now()
			for i := 0; i < n; i++ {
				if len(futs) == pipelineDepth {
					if err := futs[0].Wait(nil); err != nil {
						return 0, err
					}
					futs = futs[1:]
				}
				futs = append(futs, e.cx.Go(e.ctx, sys.MethodPing, nil))
			}
			for _, f := range futs {
				if err := f.Wait(nil); err != nil {
					return 0, err
				}
			}
			return float64(time.Since(t0).Nanoseconds()) / float64(n), nil
		},
		Base: benchPing,
		Finish: func(_ *benchEnv, r *benchResult) {
			if r.SpindleNS > 0 {
				r.CallsPerSec = 1e9 / r.SpindleNS
			}
		},
	},
}

// benchResult is one output line.
type benchResult struct {
	Name        string  `json:"name"`
	SpindleNS   float64 `json:"spindle_ns"`
	Baseline    string  `json:"baseline"`
	BaselineNS  float64 `json:"baseline_ns"`
	Ratio       float64 `json:"ratio"`
	CallsPerSec float64 `json:"calls_per_sec,omitempty"`
	// LatencyMS is the added round-trip time (ssh group only).
	LatencyMS *int `json:"latency_ms,omitempty"`
	// ExtraNS is cold − cached connect (ssh_connect_cold*), ExtraRTTs the
	// same in round trips of the matching rtt_floor row.
	ExtraNS   float64 `json:"extra_ns,omitempty"`
	ExtraRTTs float64 `json:"extra_rtts,omitempty"`
	// OpenSSHPushNS is what delivering the same compressed agent costs
	// OpenSSH (ssh_connect_cold's baseline − ssh_connect_cached's), and
	// PushRatio is ExtraNS ÷ OpenSSHPushNS.
	OpenSSHPushNS float64 `json:"openssh_push_ns,omitempty"`
	PushRatio     float64 `json:"push_ratio,omitempty"`
	// AgentFormat is how the agent travelled in both (zstd, gzip, raw).
	AgentFormat string `json:"agent_format,omitempty"`
	// RTTRatio is spindle_ns ÷ one round trip through the latency proxy
	// (the rtt_floor row's baseline_ns), for rows with added latency.
	RTTRatio float64 `json:"rtt_ratio,omitempty"`
	// FloorRatio, on a floor row (ssh_true_floor, via_true_floor), is its
	// baseline (the least the command can cost here, see bench_floor.go)
	// ÷ the OpenSSH baseline of the row it bounds: the best ratio any
	// implementation could reach against OpenSSH on this machine. On a
	// files floor row (put_100m_floor, get_100m_floor) it is the raw cat
	// plus two hashes ÷ the raw cat (bench_files_floor.go).
	FloorRatio float64 `json:"floor_ratio,omitempty"`
	// Throughput of a file row, MiB/s, and the peak RSS growth over idle
	// of the controller and the agent during a files_big put.
	SpindleMBps      float64 `json:"spindle_mib_s,omitempty"`
	BaselineMBps     float64 `json:"baseline_mib_s,omitempty"`
	RSSControllerMiB float64 `json:"rss_controller_mib,omitempty"`
	RSSAgentMiB      float64 `json:"rss_agent_mib,omitempty"`
	// FilesDir is where a files row wrote (the target's side; locally the
	// same directory or $TMPDIR).
	FilesDir string `json:"files_dir,omitempty"`
	Target   string `json:"target"`
	N        int    `json:"n"`
	Rounds   int    `json:"rounds"`
}

// globals are the command's own flags and streams, which the cases need
// past their options.
type globals struct {
	stdout, stderr io.Writer
	verbose        int
	timeout        time.Duration
	conn           cli.ConnectFlags // as the CLI's
	// spindle is the CLI binary the cli_* rows run.
	spindle string
}

// benchEnv is what the cases run against; baselines' helpers are started
// on first use and stopped by close.
type benchEnv struct {
	ctx stdctx.Context
	cx  *spindle.Context
	cat *catPipe

	g        *globals
	sshFlags sshBenchFlags
	ssh      *sshBench // the ssh group's target, set up on first use
	sshErr   error
	files    *filesBench // the files groups' sources and remote dir
	// ansible is the ansible group's state, set up on first use.
	ansibleFlags ansibleFlags
	ansible      *ansibleBench
	ansibleErr   error
	// results are the rows so far, by name (for derived fields).
	results map[string]benchResult
}

func (e *benchEnv) close() {
	if e.cat != nil {
		e.cat.close()
	}
	if e.files != nil {
		e.files.close(e.ctx)
	}
	if e.ansible != nil {
		e.ansible.close()
	}
	if e.ssh != nil {
		e.ssh.close()
	}
}

func benchPing(e *benchEnv, n int) (float64, error) {
	return timePerOp(n, func() error { return sys.Ping(e.ctx, e.cx) })
}

// benchPipeCat is the round trip of one byte through a child `cat`.
func benchPipeCat(e *benchEnv, n int) (float64, error) {
	if e.cat == nil {
		c, err := startCat()
		if err != nil {
			return 0, err
		}
		e.cat = c
	}
	return timePerOp(n, e.cat.roundTrip)
}

type catPipe struct {
	cmd *osexec.Cmd
	w   io.WriteCloser
	r   io.ReadCloser
	buf [1]byte
}

func startCat() (*catPipe, error) {
	cmd := osexec.Command("cat")
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("baseline: start cat: %w", err)
	}
	return &catPipe{cmd: cmd, w: w, r: r}, nil
}

func (c *catPipe) roundTrip() error { return echoByte(c.w, c.r, c.buf[:]) }

// echoByte sends one byte (buf, of length 1) to an echo and reads it back.
func echoByte(w io.Writer, r io.Reader, buf []byte) error {
	buf[0] = 'x'
	if _, err := w.Write(buf); err != nil {
		return err
	}
	_, err := io.ReadFull(r, buf)
	return err
}

func (c *catPipe) close() {
	c.w.Close()
	c.cmd.Wait() //nolint:errcheck // cat exits at EOF
}

func timePerOp(n int, op func() error) (float64, error) {
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := op(); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(n), nil
}

// selectCases returns the cases named by args (groups or case names); all
// of them when args is empty.
func selectCases(args []string) ([]benchCase, error) {
	if len(args) == 0 {
		return slices.DeleteFunc(slices.Clone(benchCases), func(bc benchCase) bool { return explicitOnly[bc.Group] }), nil
	}
	var out []benchCase
	for _, bc := range benchCases {
		if slices.Contains(args, bc.Group) || slices.Contains(args, bc.Name) {
			out = append(out, bc)
		}
	}
	for _, a := range args {
		if !slices.ContainsFunc(benchCases, func(bc benchCase) bool { return bc.Group == a || bc.Name == a }) {
			var names []string
			for _, bc := range benchCases {
				if !slices.Contains(names, bc.Group) {
					names = append(names, bc.Group)
				}
			}
			for _, bc := range benchCases {
				names = append(names, bc.Name)
			}
			return nil, fmt.Errorf("unknown benchmark %q (groups and benchmarks: %s)", a, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// benchOptions are the bench command's flags.
type benchOptions struct {
	target     string
	ssh        sshBenchFlags
	rounds     int
	n          int
	json       bool
	cpuprofile string
	ansible    ansibleFlags
}

// runBench measures each case: a warm-up, then rounds of the Spindle side
// and the baseline alternately; each figure is the median of the rounds.
// Each result is handed to emit as soon as it is known: a benchResult,
// or a row of a case of its own kind (benchCase.Rows).
func runBench(e *benchEnv, cases []benchCase, o benchOptions, emit func(any) error) error {
	for _, bc := range cases {
		if bc.Rows != nil {
			if err := bc.Rows(e, bc, o, emit); err != nil {
				return fmt.Errorf("%s: %w", bc.Name, err)
			}
			continue
		}
		n := o.n
		if n <= 0 {
			n = bc.N
		}
		warm := max(1, n/10)
		if _, err := bc.Spindle(e, warm); err != nil {
			return fmt.Errorf("%s: %w", bc.Name, err)
		}
		if _, err := bc.Base(e, warm); err != nil {
			return fmt.Errorf("%s: baseline %s: %w", bc.Name, bc.Baseline, err)
		}
		var sp, base []float64
		for r := 0; r < o.rounds; r++ {
			s, err := bc.Spindle(e, n)
			if err != nil {
				return fmt.Errorf("%s: %w", bc.Name, err)
			}
			b, err := bc.Base(e, n)
			if err != nil {
				return fmt.Errorf("%s: baseline %s: %w", bc.Name, bc.Baseline, err)
			}
			sp, base = append(sp, s), append(base, b)
		}
		slices.Sort(sp)
		slices.Sort(base)
		res := benchResult{Name: bc.Name, Baseline: bc.Baseline, Target: o.target, N: n, Rounds: o.rounds,
			SpindleNS: round1(medianSorted(sp)), BaselineNS: round1(medianSorted(base))}
		if bc.needsSSH() {
			lat := bc.Latency
			res.LatencyMS = &lat
			if e.ssh != nil {
				res.Target = e.ssh.label
			}
		}
		if res.BaselineNS > 0 {
			res.Ratio = round3(res.SpindleNS / res.BaselineNS)
		}
		if e.files != nil && strings.HasPrefix(bc.Group, "files") {
			res.FilesDir = filepath.Dir(e.files.remote)
		}
		if bc.Finish != nil {
			bc.Finish(e, &res)
			res.CallsPerSec = float64(int64(res.CallsPerSec))
		}
		if e.results == nil {
			e.results = map[string]benchResult{}
		}
		e.results[bc.Name] = res
		if err := emit(res); err != nil {
			return err
		}
	}
	return nil
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }
func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// benchNames are the groups and rows spindle-bench takes, for completion.
func benchNames() []string {
	seen := map[string]bool{}
	var names []string
	for _, c := range benchCases {
		for _, n := range []string{c.Group, c.Name} {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	return names
}

// Execute runs spindle-bench with args and returns the process's exit
// status.
func Execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	if f, ok := stdin.(*os.File); ok {
		g.conn.SetInteractive(term.IsTerminal(int(f.Fd())))
	}
	c := newBenchCmd(g)
	c.SetArgs(args)
	c.SetIn(stdin)
	c.SetOut(stdout)
	c.SetErr(stderr)
	err := c.Execute()
	if err != nil {
		fmt.Fprintf(stderr, "spindle-bench: %v\n", err)
	}
	return cli.ExitCode(err)
}

func newBenchCmd(g *globals) *cobra.Command {
	o := benchOptions{}
	c := &cobra.Command{
		Use:   "spindle-bench [GROUP|NAME...]",
		Short: "Measure Spindle against baselines, side by side in one run",
		Long: `Measure Spindle operations against baselines in one run. Each line of
output is one JSON object: name, spindle_ns, baseline, baseline_ns, ratio
(spindle_ns / baseline_ns), each figure the median of --rounds rounds of
--n iterations. Groups:

  core  ping_rtt, exec_true, ping_pipelined_64 (through --target, default local)
  ssh   over SSH, each at 0 ms and at 10 ms of added round-trip time (a
        delaying TCP proxy in front of sshd, 5 ms each way; rows *_10ms):
        ssh_true_seq (exec.Run true through one connection vs OpenSSH
        with a warm ControlMaster), ssh_true_seq_xcrypto (vs x/crypto/ssh,
        a session per command), cli_true_persist (the CLI, one process
        per command: 'spindle run --persist' vs ssh over its master),
        cli_run_many_20 ('spindle run' on 20 targets at once, each a
        name of its own for the server, vs 20 'ssh HOST true &' and
        wait), ssh_connect_cached (connect, with a cold
        ssh -G lookup, + first call + close, vs a fresh 'ssh host
        true'), ssh_connect_cold (the same with the
        agent cache emptied first, vs a fresh ssh piping the same
        compressed agent into 'zstd -dc' or 'gzip -dc' (agent_format
        says which); extra_ns is cold − cached,
        openssh_push_ns what the push costs OpenSSH, push_ratio their
        quotient), rtt_floor_10ms (sys.Ping vs
        one TCP echo round trip through the proxy), ssh_true_floor
        (ssh_true_seq's command vs the least any design pays here:
        starting true plus one byte's round trip through an x/crypto
        session to cat; floor_ratio is that floor ÷ the ControlMaster
        figure, the best ratio reachable on this machine),
        become_sudo_true (100 commands through one sudo hop vs 'ssh
        host sudo -n true')
  via   via_true_seq (a command through two SSH hops vs 'ssh -J' over a
        warm ControlMaster, 0 and 10 ms per hop), via_true_floor (the
        same against true plus an echo through two tunnelled x/crypto
        connections, as ssh_true_floor), via_connect_parallel_20
        (20 hops started through one agent at once vs one; also at 10 ms
        per hop), via_connect_cold (a hop whose target has no cached agent,
        through a new intermediary that must compress its own binary, vs
        the controller's own cold connect, ssh_connect_cold)
  files put_1m/100m (fs.PutFile vs 'ssh host cat > f', _scp, _sftp),
        get_1m/100m (fs.GetFile vs 'ssh host cat f > local', _scp),
        put_100m_hashed and get_100m_hashed (vs OpenSSH's cat with a
        sha256 at each end, checked, and the destination fsynced, as
        Spindle's copies are), put_100m_floor and get_100m_floor (vs
        the raw cat with two sha256s of the bytes taken alongside it;
        floor_ratio is that ÷ the raw cat),
        put_100m_via (one bastion hop vs 'scp -J'), copy_1m/100m_between
        (fs.CopyOne from one remote path to another through here vs
        'scp -3'), put_tree_1000x4k and get_tree_1000x4k
        (fs.PutTree/GetTree vs 'scp -r'); 0 and 10 ms
  files_big  put_1g rows with peak RSS growth (only when named)
  ansible  (only when named) ansible_hostname_100 and ansible_mixed: the
        playbooks of --ansible-dir through ansible-playbook with vanilla
        (ssh, pipelining, ControlPersist), spindle (the plugin that
        'spindle ansible install' installs), mitogen (Mitogen's
        mitogen_linear strategy with -c ssh, unpacked from --mitogen; left
        out with a note when not found) and floor (a plugin that runs
        nothing: Ansible's own cost), each run cold, in rounds that take
        the systems in turn; per system the median wall time, the
        controller's CPU (ansible-playbook's tree plus the master or
        daemon it left), bytes and request/response turns at a proxy in
        front of sshd, the excess over the floor, the peak RSS and PSS of
        what the run starts on the target (when it is the bench's own
        sshd), and ratios to vanilla and spindle/mitogen.
        ansible_exec_true: exec_command('true') through the spindle, ssh
        and floor plugins as Ansible's workers call it (a new connection
        object per call, warm daemon or master), vs Spindle's library
        (ssh_true_seq) and ssh over a warm ControlMaster. 0 and 10 ms
  tunnel tunnel_connect (a new forwarded connection and one byte's round
        trip on it, as 'spindle forward -L' makes it, vs OpenSSH's -L on
        the warm ControlMaster) and tunnel_100m (100 MiB through one);
        0 and 10 ms

The ssh group runs against --ssh-target TARGET (resolved like the CLI's
targets, with -F, -i, -o), or, when running as root with /usr/sbin/sshd,
against a throwaway sshd of its own on 127.0.0.1 (a throwaway user with
passwordless sudo, removed at the end). Without either, 'spindle-bench'
skips it with a note and 'spindle-bench ssh' fails. The cli_* rows run
the spindle command given by --spindle.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		ValidArgsFunction: func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			var out []string
			for _, n := range benchNames() {
				if strings.HasPrefix(n, toComplete) {
					out = append(out, n)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			if o.rounds < 1 {
				return cli.UsageError(c.CommandPath(), fmt.Errorf("--rounds must be at least 1, got %d", o.rounds))
			}
			cases, err := selectCases(args)
			if err != nil {
				return cli.UsageError(c.CommandPath(), err)
			}
			if slices.ContainsFunc(cases, func(bc benchCase) bool { return bc.Group == "ansible" }) {
				if err := ansibleAvailable(o.ansible); err != nil {
					return err
				}
			}
			hasSSH := slices.ContainsFunc(cases, benchCase.needsSSH)
			if err := sshBenchAvailable(o.ssh); err != nil && hasSSH {
				if len(args) > 0 {
					return err
				}
				fmt.Fprintf(g.stderr, "spindle-bench: skipping the ssh group: %v\n", err)
				cases = slices.DeleteFunc(cases, benchCase.needsSSH)
			}
			if g.spindle == "" {
				var err error
				if g.spindle, err = findSpindle(); err != nil && slices.ContainsFunc(cases, benchCase.runsCLI) {
					return err
				}
			}
			ctx, _, stop := cli.SignalContext(c.Context())
			defer stop()
			e := &benchEnv{ctx: ctx, g: g, sshFlags: o.ssh, ansibleFlags: o.ansible}
			defer e.close()
			if slices.ContainsFunc(cases, func(bc benchCase) bool { return !bc.needsSSH() }) {
				ctl, cx, err := g.connect(ctx, o.target)
				if err != nil {
					return err
				}
				defer ctl.Close()
				e.cx = cx
			}
			if o.cpuprofile != "" {
				f, err := os.Create(o.cpuprofile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			var tw *tabwriter.Writer
			emit := func(r any) error {
				b, err := json.Marshal(r)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(g.stdout, "%s\n", b)
				return err
			}
			if !o.json {
				tw = tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintf(tw, "name\tspindle\tbaseline\tbaseline\tratio\tcalls/s\t\n")
				emit = func(row any) error {
					switch r := row.(type) {
					case benchResult:
						cps := ""
						if r.CallsPerSec > 0 {
							cps = fmt.Sprintf("%.0f", r.CallsPerSec)
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%s\t\n", r.Name, fmtNS(r.SpindleNS), r.Baseline, fmtNS(r.BaselineNS), r.Ratio, cps)
					case interface{ table() []string }:
						for _, l := range r.table() {
							fmt.Fprintln(tw, l)
						}
					}
					return nil
				}
			}
			err = runBench(e, cases, o, emit)
			if tw != nil {
				tw.Flush()
			}
			if err != nil && ctx.Err() != nil {
				return errors.Join(err, ctx.Err())
			}
			return err
		},
	}
	f := c.Flags()
	f.CountVarP(&g.verbose, "verbose", "v", "more logging on stderr (-v info, -vv debug)")
	f.DurationVar(&g.timeout, "timeout", 30*time.Second, "time limit for connecting to --target (0 = none)")
	f.StringVar(&g.spindle, "spindle", "", "the spindle command the cli_* rows run (default: the one beside spindle-bench, else $PATH's)")
	g.conn.AddFlags(f)
	f.StringVar(&o.target, "target", "local", "TARGET to measure (core group)")
	f.StringVar(&o.ssh.target, "ssh-target", "", "ssh TARGET for the ssh group (default: a throwaway sshd, as root)")
	f.StringVar(&o.ssh.filesDir, "files-dir", "", "files groups: make the temp directories under this directory on both sides (default /tmp on the target, $TMPDIR here); /dev/shm takes the disk, and the cost of Spindle's durable writes, out of the comparison")
	f.IntVar(&o.rounds, "rounds", 5, "rounds per benchmark; figures are the median")
	f.IntVar(&o.n, "n", 0, "iterations per round (0 = each benchmark's default)")
	f.BoolVar(&o.json, "json", true, "one JSON object per line; --json=false prints a table")
	f.StringVar(&o.cpuprofile, "cpuprofile", "", "write the controller's CPU profile to this file")
	f.StringVar(&o.ansible.dir, "ansible-dir", "", "ansible group: the playbooks' directory (default $"+ansibleDirEnv+", else ../shared/bench/ansible beside the repository)")
	f.StringVar(&o.ansible.python, "ansible-python", "/usr/bin/python3", "ansible group: the target's Python (ansible_python_interpreter)")
	f.StringVar(&o.ansible.mitogen, "mitogen", "", "ansible group: Mitogen's source archive for the mitogen column (default $"+mitogenEnv+", else shared/baselines/"+mitogenArchive+" in the nearest directory above the repository)")
	return c
}

func fmtNS(ns float64) string { return fmtDuration(time.Duration(ns)) }

// fmtDuration prints d in µs with one decimal below 10 ms, else rounded
// (as spindle ping does).
func fmtDuration(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	}
	return d.Round(100 * time.Microsecond).String()
}

// medianSorted is the median of sorted s.
func medianSorted(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// connect opens TARGET, as the CLI does, within --timeout.
func (g *globals) connect(ctx stdctx.Context, raw string) (*spindle.Controller, *spindle.Context, error) {
	t, err := target.Parse(raw)
	if err != nil {
		return nil, nil, cli.UsageError("spindle-bench", err)
	}
	o, err := g.conn.TargetOptions(t)
	if err != nil {
		return nil, nil, err
	}
	steps, err := t.Steps(o)
	if err != nil {
		return nil, nil, err
	}
	if g.timeout > 0 {
		var cancel stdctx.CancelFunc
		ctx, cancel = stdctx.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	ctl := spindle.NewController(spindle.Options{Logger: cli.Logger(g.stderr, g.verbose), Verbosity: g.verbose})
	cx, err := target.Open(ctx, ctl, steps)
	if err != nil {
		ctl.Close()
		return nil, nil, err
	}
	return ctl, cx, nil
}

// runsCLI says whether the case runs the spindle command itself.
func (bc benchCase) runsCLI() bool { return strings.HasPrefix(bc.Name, "cli_") }

// findSpindle is --spindle's default: the spindle beside this executable
// (bin/spindle beside bin/spindle-bench), else the one in $PATH.
func findSpindle() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "spindle")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	p, err := osexec.LookPath("spindle")
	if err != nil {
		return "", fmt.Errorf("the cli_* rows run the spindle command: none beside spindle-bench or in $PATH (give --spindle PATH, or run make build)")
	}
	return p, nil
}
