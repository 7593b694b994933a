package bench

import (
	"bufio"
	"bytes"
	stdctx "context"
	"errors"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	"github.com/spindle-rpc/spindle/daemon"
	"github.com/spindle-rpc/spindle/internal/cli"
	"github.com/spindle-rpc/spindle/internal/latency"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	"github.com/spindle-rpc/spindle/target"

	"github.com/skeema/knownhosts"
	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// The "ssh" group of `spindle-bench`: Spindle over one SSH connection
// against OpenSSH (warm ControlMaster, and a fresh connection) and
// x/crypto/ssh (a session per command), at 0 ms and at 10 ms of added
// round-trip time. The 10 ms figures go through latency.Proxy (5 ms each
// way) in front of the same sshd.

// sshLatency is the one-way delay of the latency proxy: 10 ms round trip.
const sshLatency = 5 * time.Millisecond

func sshCases() []benchCase {
	var cs []benchCase
	for _, ms := range []int{0, 10} {
		sfx := latencySuffix(ms)
		if ms > 0 {
			cs = append(cs, benchCase{
				Name: "rtt_floor" + sfx, Group: "ssh", Latency: ms, Baseline: "tcp_echo_rtt" + sfx, N: 200,
				Spindle: func(e *benchEnv, n int) (float64, error) {
					cx, err := e.sshPath(ms).context(e.ctx)
					if err != nil {
						return 0, err
					}
					return timePerOp(n, func() error { return sys.Ping(e.ctx, cx) })
				},
				Base: func(e *benchEnv, n int) (float64, error) {
					b, err := e.sshBench()
					if err != nil {
						return 0, err
					}
					return b.echoRTT(n)
				},
			})
		}
		n := map[int]int{0: 100, 10: 20}[ms]
		nc := map[int]int{0: 10, 10: 5}[ms]
		cs = append(cs,
			benchCase{
				Name: "ssh_true_seq" + sfx, Group: "ssh", Latency: ms, Baseline: "openssh_controlmaster" + sfx, N: n,
				Spindle: func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).spindleTrue(e.ctx, n) },
				Base:    func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).controlMasterTrue(e.ctx, n) },
			},
			floorCase("ssh_true_floor"+sfx, "ssh", "ssh_true_seq"+sfx, ms, n, 1,
				func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).spindleTrue(e.ctx, n) }),
			benchCase{
				Name: "ssh_true_seq_xcrypto" + sfx, Group: "ssh", Latency: ms, Baseline: "xcrypto_session_per_cmd" + sfx, N: n,
				Spindle: func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).spindleTrue(e.ctx, n) },
				Base:    func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).xcryptoTrue(e.ctx, n) },
			},
			benchCase{
				Name: "cli_true_persist" + sfx, Group: "ssh", Latency: ms, Baseline: "openssh_controlmaster" + sfx, N: n / 2,
				Spindle: func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).cliPersistTrue(e.ctx, n) },
				Base:    func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).controlMasterTrue(e.ctx, n) },
			},
			benchCase{
				Name: fmt.Sprintf("cli_run_many_%d", fanTargets) + sfx, Group: "ssh", Latency: ms, Baseline: "openssh_parallel_fresh_true" + sfx, N: 1,
				Spindle: func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).cliRunMany(e.ctx, n) },
				Base:    func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).parallelFreshTrue(e.ctx, n) },
			},
			benchCase{
				Name: fmt.Sprintf("cli_run_many_%d_persist", fanTargets) + sfx, Group: "ssh", Latency: ms, Baseline: "openssh_parallel_controlmaster_true" + sfx, N: 5,
				Spindle: func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).cliRunManyPersist(e.ctx, n) },
				Base:    func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).parallelMasterTrue(e.ctx, n) },
			},
			benchCase{
				// A connection's whole life on each side: Spindle's connect
				// (a cold ssh -G lookup included), first call and Close, vs
				// a fresh ssh process running true (spindleConnect).
				Name: "ssh_connect_cached" + sfx, Group: "ssh", Latency: ms, Baseline: "openssh_fresh_true" + sfx, N: nc,
				Spindle: func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).spindleConnect(e.ctx, n, false) },
				Base:    func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).freshTrue(e.ctx, n) },
			},
			benchCase{
				Name: "ssh_connect_cold" + sfx, Group: "ssh", Latency: ms, Baseline: "openssh_fresh_push_agent" + sfx, N: nc,
				Spindle: func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).spindleConnect(e.ctx, n, true) },
				Base:    func(e *benchEnv, n int) (float64, error) { return e.sshPath(ms).freshPushAgent(e.ctx, n) },
				Finish: func(e *benchEnv, r *benchResult) {
					if c, ok := e.results["ssh_connect_cached"+sfx]; ok {
						r.ExtraNS = round1(r.SpindleNS - c.SpindleNS)
						// This row's baseline delivers the agent on a fresh
						// connection, the cached row's runs true on one: the
						// difference is what the transfer costs OpenSSH on
						// this machine, the yardstick for ExtraNS.
						r.OpenSSHPushNS = round1(r.BaselineNS - c.BaselineNS)
						if r.OpenSSHPushNS > 0 {
							r.PushRatio = round3(r.ExtraNS / r.OpenSSHPushNS)
						}
						if f, ok := e.results["rtt_floor"+sfx]; ok && f.BaselineNS > 0 {
							r.ExtraRTTs = round3(r.ExtraNS / f.BaselineNS)
						}
						r.AgentFormat = e.sshPath(ms).pushFormat
					}
				},
			},
		)
	}
	// Become: commands as root through one sudo hop, started once by the
	// target's agent, vs sudo on every command over the warm ControlMaster.
	cs = append(cs, benchCase{
		Name: "become_sudo_true", Group: "ssh", Baseline: "openssh_controlmaster_sudo_n", N: 100,
		Spindle: func(e *benchEnv, n int) (float64, error) { return e.sshPath(0).spindleSudoTrue(e.ctx, n) },
		Base: func(e *benchEnv, n int) (float64, error) {
			p := e.sshPath(0)
			if err := p.warmMaster(e.ctx); err != nil {
				return 0, err
			}
			return timePerOp(n, func() error { return p.run(e.ctx, true, "sudo -n true") })
		},
	})
	// Every 10 ms row says how many round trips it costs.
	for i := range cs {
		if cs[i].Latency > 0 && cs[i].Finish == nil && !strings.HasPrefix(cs[i].Name, "rtt_floor") {
			floor := "rtt_floor" + latencySuffix(cs[i].Latency)
			cs[i].Finish = func(e *benchEnv, r *benchResult) {
				if f, ok := e.results[floor]; ok && f.BaselineNS > 0 {
					r.RTTRatio = round3(r.SpindleNS / f.BaselineNS)
				}
			}
		}
	}
	return cs
}

func init() { benchCases = append(benchCases, sshCases()...) }

// latencySuffix names a row's added round-trip time: "" at 0 ms, "_10ms".
func latencySuffix(ms int) string {
	if ms == 0 {
		return ""
	}
	return fmt.Sprintf("_%dms", ms)
}

// sshBench is the target of the ssh group, set up on first use.
type sshBench struct {
	dir   string
	label string
	rmCmd string // empties the target user's agent cache (run through ssh)
	sshd  *throwawaySSHD
	proxy *latency.Proxy // in front of the target's sshd
	// count is a proxy that adds no delay, in front of the same sshd: the
	// ansible group's 0 ms runs go through it so that what they send is
	// counted, as proxy counts the 10 ms runs'.
	count *latency.Proxy
	echo  *echoServer
	echoP *latency.Proxy
	echoC net.Conn
	paths map[int]*sshPath
	// spindle is the CLI the cli_* rows run (--spindle).
	spindle string
	sinkState
}

// sshPath is one way to the target: direct (0 ms) or through the proxy.
type sshPath struct {
	b    *sshBench
	ms   int
	err  error // setup error, reported by every operation
	opts ssh.Options
	// sshArgs precede the destination in every OpenSSH command line.
	sshArgs []string
	dest    string
	// cliArgs are spindle's flags and TARGET for the same destination,
	// for rows that run the CLI itself.
	cliArgs []string
	cliRT   string // the CLI rows' XDG_RUNTIME_DIR, where their daemon lives
	// fanMasters is the directory of the fan-out aliases' ControlMaster
	// sockets, once started.
	fanMasters string

	ctl  *spindle.Controller
	cx   *spindle.Context
	cx2  *spindle.Context // a second connection, for copies between two
	cm   string           // ControlPath
	cmUp bool
	xc   *xssh.Client
	echo [3]*sshEcho // by number of hops: the floor rows' x/crypto echoes

	// The agent as a cold connect sends it to this target, and its
	// format, for freshPushAgent.
	pushPayload []byte
	pushFormat  string

	via    *spindle.Context // the via group's second hop, through cx
	jumpCM string           // the via group's ssh -J ControlPath, once up

	forwards map[string]string // the tunnel group's ssh -L: local address by destination
}

// ssh benchmarks' own flags.
type sshBenchFlags struct {
	target string // --ssh-target
	// filesDir is where the files groups make their temp directories, on
	// the target and locally (--files-dir); empty: /tmp on the target and
	// $TMPDIR here.
	filesDir string
}

// sshdAvailable says whether a throwaway sshd can be started here (a
// variable for the tests).
var sshdAvailable = canStartSSHD

// sshBenchAvailable says whether the ssh group can run.
func sshBenchAvailable(f sshBenchFlags) error {
	if f.target != "" {
		return nil
	}
	if err := sshdAvailable(); err != nil {
		return fmt.Errorf("the ssh benchmarks need a target: give --ssh-target TARGET (resolved like the CLI's, e.g. -F cfg --ssh-target web1), or run as root with %s installed so that the bench starts a throwaway sshd itself (%v)", sshtest.SSHD, err)
	}
	return nil
}

func (e *benchEnv) sshBench() (*sshBench, error) {
	if e.ssh == nil && e.sshErr == nil {
		e.ssh, e.sshErr = newSSHBench(e.g, e.sshFlags)
	}
	return e.ssh, e.sshErr
}

// sshPath never fails: an unusable path reports its error when used.
func (e *benchEnv) sshPath(ms int) *sshPath {
	b, err := e.sshBench()
	if err != nil {
		return &sshPath{err: err}
	}
	return b.paths[ms]
}

const (
	benchAlias     = "spindle-bench"
	benchAlias10ms = "spindle-bench-10ms"
	// benchAliasCounted reaches the target through the counting proxy.
	benchAliasCounted = "spindle-bench-counted"
)

func newSSHBench(g *globals, f sshBenchFlags) (_ *sshBench, err error) {
	if err := sshBenchAvailable(f); err != nil {
		return nil, err
	}
	if _, err := osexec.LookPath("ssh"); err != nil {
		return nil, errors.New("the ssh benchmarks compare with OpenSSH: ssh not found (apt-get install openssh-client)")
	}
	dir, err := os.MkdirTemp("", "sb-") // short: ControlPath must fit a socket address
	if err != nil {
		return nil, err
	}
	b := &sshBench{dir: dir, paths: map[int]*sshPath{}, spindle: g.spindle}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	cfg := filepath.Join(dir, "ssh_config")
	if f.target == "" {
		b.sshd, err = startSSHD(func(port int) []int {
			up := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			if b.proxy, err = latency.Start(up, sshLatency); err != nil {
				return nil
			}
			if b.count, err = latency.Start(up, 0); err != nil {
				return nil
			}
			return []int{b.proxy.Port(), b.count.Port()}
		})
		if err != nil {
			return nil, err
		}
		if b.proxy == nil || b.count == nil {
			return nil, errors.New("cannot start the latency proxies")
		}
		s := b.sshd
		var conf strings.Builder
		for _, h := range []struct {
			alias string
			port  int
		}{{benchAlias, s.Port}, {benchAlias10ms, b.proxy.Port()}, {benchAliasCounted, b.count.Port()}, {fanPattern(0), s.Port}, {fanPattern(10), b.proxy.Port()}} {
			fmt.Fprintf(&conf, "Host %s\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n\n",
				h.alias, h.port, s.User, s.KeyFile, s.KnownHosts)
		}
		if err := os.WriteFile(cfg, []byte(conf.String()), 0o600); err != nil {
			return nil, err
		}
		b.label = fmt.Sprintf("ssh:%s@127.0.0.1:%d (throwaway sshd)", s.User, s.Port)
		b.rmCmd = emptyAgentCache
		copts := (&cli.ConnectFlags{}).ForConfig(cfg)
		// A salted agent: one that no cache dir on this machine holds
		// already, whatever the throwaway user's dirs may share.
		src := bootstrap.Salted(bootstrap.Default())
		for ms, alias := range map[int]string{0: benchAlias, 10: benchAlias10ms} {
			p := &sshPath{b: b, ms: ms, sshArgs: []string{"-F", cfg}, dest: alias, cliArgs: []string{"-F", cfg, alias}}
			p.opts, p.err = copts.SSHOptions(target.SSHAddr{Host: alias})
			p.opts.Agent = src
			b.paths[ms] = p
		}
	} else {
		t, err := target.Parse(f.target)
		if err != nil {
			return nil, err
		}
		if t.Hops[0].Kind != "ssh" {
			return nil, fmt.Errorf("--ssh-target %q is not an ssh target", f.target)
		}
		a, err := target.ParseSSHAddr(t.Hops[0].Arg)
		if err != nil {
			return nil, err
		}
		p0 := &sshPath{b: b, ms: 0}
		p0.opts, err = g.conn.SSHOptions(a)
		if err != nil {
			return nil, err
		}
		p0.sshArgs, p0.dest = g.conn.OpenSSHArgs(a)
		p0.cliArgs = append(g.conn.Args(), f.target)
		b.paths[0] = p0
		res, err := sshResolve(p0.sshArgs, p0.dest)
		if err != nil {
			return nil, err
		}
		host, port := first(res["hostname"]), first(res["port"])
		b.proxy, err = latency.Start(net.JoinHostPort(host, port), sshLatency)
		if err != nil {
			return nil, err
		}
		b.count, err = latency.Start(net.JoinHostPort(host, port), 0)
		if err != nil {
			return nil, err
		}
		// Through the proxy the server is 127.0.0.1:PORT, which known_hosts
		// does not know: a private known_hosts, filled on first use (the
		// proxy only ever reaches the host checked on the direct path).
		// The fan-out rows' aliases name the same server many times over
		// (directly, and through the proxy), known_hosts filled the same
		// way: by then the rows before have checked the host's key.
		var conf strings.Builder
		for _, h := range []struct {
			alias, host, port string
		}{{benchAlias10ms, "127.0.0.1", strconv.Itoa(b.proxy.Port())}, {benchAliasCounted, "127.0.0.1", strconv.Itoa(b.count.Port())}, {fanPattern(0), host, port}, {fanPattern(10), "127.0.0.1", strconv.Itoa(b.proxy.Port())}} {
			fmt.Fprintf(&conf, "Host %s\n  HostName %s\n  Port %s\n  User %s\n  UserKnownHostsFile %s\n  StrictHostKeyChecking accept-new\n",
				h.alias, h.host, h.port, first(res["user"]), filepath.Join(dir, "known_hosts_proxy"))
			for _, id := range res["identityfile"] {
				if _, err := os.Stat(id); err == nil {
					fmt.Fprintf(&conf, "  IdentityFile %s\n", id)
				}
			}
			if v := first(res["identitiesonly"]); v != "" {
				fmt.Fprintf(&conf, "  IdentitiesOnly %s\n", v)
			}
		}
		if err := os.WriteFile(cfg, []byte(conf.String()), 0o600); err != nil {
			return nil, err
		}
		p10 := &sshPath{b: b, ms: 10, sshArgs: []string{"-F", cfg}, dest: benchAlias10ms, cliArgs: []string{"-F", cfg, benchAlias10ms}}
		p10.opts, p10.err = g.conn.ForConfig(cfg).SSHOptions(target.SSHAddr{Host: benchAlias10ms})
		b.paths[10] = p10
		b.label = "ssh:" + a.String()
		b.rmCmd = emptyAgentCache
	}
	for _, p := range b.paths {
		p.cm = filepath.Join(dir, fmt.Sprintf("cm%d", p.ms))
	}
	if b.echo, err = startEcho(); err != nil {
		return nil, err
	}
	if b.echoP, err = latency.Start(b.echo.Addr(), sshLatency); err != nil {
		return nil, err
	}
	return b, nil
}

// sshResolve asks OpenSSH for the configuration it would use (ssh -G).
func sshResolve(args []string, dest string) (map[string][]string, error) {
	out, err := osexec.Command("ssh", append(append(append([]string{}, args...), "-G"), dest)...).Output()
	if err != nil {
		var ee *osexec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("ssh -G %s: %v: %s", dest, err, bytes.TrimSpace(ee.Stderr))
		}
		return nil, fmt.Errorf("ssh -G %s: %w", dest, err)
	}
	res := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		res[k] = append(res[k], v)
	}
	return res, nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// emptyAgentCache removes the target user's agent cache directories (all
// of the first stage's candidates), run through ssh before a cold connect.
const emptyAgentCache = `sh -c 'rm -rf /dev/shm/spindle-$(id -u) "$HOME/.cache/spindle" /tmp/spindle-$(id -u) "${XDG_RUNTIME_DIR:-/nonexistent}/spindle"'`

func (b *sshBench) close() {
	for _, p := range b.paths {
		p.close()
	}
	if b.echoC != nil {
		b.echoC.Close()
	}
	if b.sink != nil {
		b.sink.Close()
	}
	if b.echoP != nil {
		b.echoP.Close()
	}
	if b.echo != nil {
		b.echo.Close()
	}
	if b.proxy != nil {
		b.proxy.Close()
	}
	if b.count != nil {
		b.count.Close()
	}
	if b.sshd != nil {
		b.sshd.Close()
	}
	os.RemoveAll(b.dir)
}

// echoRTT is one byte's round trip through the latency proxy to an echo
// server: the floor for anything that needs one round trip.
func (b *sshBench) echoRTT(n int) (float64, error) {
	if b.echoC == nil {
		c, err := net.Dial("tcp", b.echoP.Addr())
		if err != nil {
			return 0, err
		}
		b.echoC = c // Go sets TCP_NODELAY by default
	}
	buf := []byte{'x'}
	return timePerOp(n, func() error {
		if _, err := b.echoC.Write(buf); err != nil {
			return err
		}
		_, err := b.echoC.Read(buf)
		return err
	})
}

func (p *sshPath) connector() (spindle.Connector, error) {
	if p.err != nil {
		return nil, p.err
	}
	return p.opts, nil
}

// context is the path's long-lived Spindle connection.
func (p *sshPath) context(ctx stdctx.Context) (*spindle.Context, error) {
	if p.cx != nil {
		return p.cx, nil
	}
	c, err := p.connector()
	if err != nil {
		return nil, err
	}
	p.ctl = spindle.NewController(spindle.Options{})
	p.cx, err = p.ctl.Connect(ctx, c)
	if err != nil {
		p.ctl.Close()
		p.ctl = nil
		return nil, err
	}
	return p.cx, nil
}

// secondContext is another connection to the path's target, with an
// agent of its own: the far end of a copy "between two hosts".
func (p *sshPath) secondContext(ctx stdctx.Context) (*spindle.Context, error) {
	if p.cx2 != nil {
		return p.cx2, nil
	}
	if _, err := p.context(ctx); err != nil {
		return nil, err
	}
	c, err := p.connector()
	if err != nil {
		return nil, err
	}
	p.cx2, err = p.ctl.Connect(ctx, c)
	return p.cx2, err
}

func (p *sshPath) spindleTrue(ctx stdctx.Context, n int) (float64, error) {
	cx, err := p.context(ctx)
	if err != nil {
		return 0, err
	}
	return timeTrue(ctx, cx, n)
}

// spindleShellTrue runs `/bin/sh -c true` through the path's context, as
// Ansible's exec_command("true") must (a command line, run by a shell):
// the library's side of the plugin's floor.
func (p *sshPath) spindleShellTrue(ctx stdctx.Context, n int) (float64, error) {
	cx, err := p.context(ctx)
	if err != nil {
		return 0, err
	}
	return timeCmd(ctx, cx, exec.Cmd{Shell: "true"}, n)
}

// spindleSudoTrue runs true as root through a sudo hop of the path's
// context: the hop is started once (Connect reuses it) and every command
// after that is one call.
func (p *sshPath) spindleSudoTrue(ctx stdctx.Context, n int) (float64, error) {
	cx, err := p.context(ctx)
	if err != nil {
		return 0, err
	}
	root, err := cx.Connect(ctx, sudo.Options{User: "root"})
	if err != nil {
		return 0, err
	}
	return timeTrue(ctx, root, n)
}

// spindleConnect times a whole connection's life on a new controller, as
// its baseline (a fresh `ssh host true`: process start, configuration
// lookup, connect, command, teardown) times one: the connect with a cold
// `ssh -G` lookup (the answers shared within this process are dropped
// first), the first call, and Close. The agent cache is emptied first
// (untimed) when cold.
func (p *sshPath) spindleConnect(ctx stdctx.Context, n int, cold bool) (float64, error) {
	c, err := p.connector()
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for i := 0; i < n; i++ {
		if cold {
			if err := p.b.paths[0].run(ctx, true, p.b.rmCmd); err != nil {
				return 0, fmt.Errorf("empty the agent cache: %w", err)
			}
		}
		ssh.ForgetConfigAnswers()
		ctl := spindle.NewController(spindle.Options{})
		t0 := time.Now()
		cx, err := ctl.Connect(ctx, c)
		if err == nil {
			err = sys.Ping(ctx, cx)
		}
		ctl.Close()
		total += time.Since(t0)
		if err != nil {
			return 0, err
		}
	}
	return float64(total.Nanoseconds()) / float64(n), nil
}

// openssh runs ssh with the path's arguments, through the ControlMaster
// or on a fresh connection, and the remote command.
func (p *sshPath) run(ctx stdctx.Context, master bool, remote string) error {
	return p.runStdin(ctx, master, remote, nil)
}

// runStdin is run with the remote command's standard input from stdin.
func (p *sshPath) runStdin(ctx stdctx.Context, master bool, remote string, stdin []byte) error {
	if p.err != nil {
		return p.err
	}
	args := []string{"-T", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"}
	if master {
		args = append(args, "-o", "ControlMaster=auto", "-o", "ControlPath="+p.cm, "-o", "ControlPersist=60")
		p.cmUp = true
	} else {
		args = append(args, "-o", "ControlMaster=no", "-o", "ControlPath=none")
	}
	args = append(append(args, p.sshArgs...), p.dest, remote)
	cmd := osexec.CommandContext(ctx, "ssh", args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ssh %s %s: %v: %s", p.dest, remote, err, bytes.TrimSpace(errb.Bytes()))
	}
	return nil
}

// warmMaster starts the path's ControlMaster, if it is not up, so that
// timed OpenSSH commands ride a warm one.
func (p *sshPath) warmMaster(ctx stdctx.Context) error {
	if p.cmUp {
		return nil
	}
	return p.run(ctx, true, "true")
}

func (p *sshPath) controlMasterTrue(ctx stdctx.Context, n int) (float64, error) {
	if err := p.warmMaster(ctx); err != nil {
		return 0, err
	}
	return timePerOp(n, func() error { return p.run(ctx, true, "true") })
}

// cliPersistTrue runs true through the spindle CLI with --persist, one
// process per command as a script runs it, in a runtime dir of the
// bench's own (its daemon's); the first run, which starts the daemon and
// connects, is not timed.
func (p *sshPath) cliPersistTrue(ctx stdctx.Context, n int) (float64, error) {
	if p.err != nil {
		return 0, p.err
	}
	exe := p.b.spindle
	flags, target := p.cliArgs[:len(p.cliArgs)-1], p.cliArgs[len(p.cliArgs)-1]
	env, err := p.persistEnv()
	if err != nil {
		return 0, err
	}
	return timeCLI(ctx, exe, env, append(append([]string{}, flags...), "run", "--persist", "5m", target, "--", "true"), n)
}

// persistEnv is the environment of the CLI rows with --persist: this
// one, with an XDG_RUNTIME_DIR of the path's own, where their daemon
// lives (stopped by close).
func (p *sshPath) persistEnv() ([]string, error) {
	if p.cliRT == "" {
		rt := filepath.Join(p.b.dir, fmt.Sprintf("rt%d", p.ms))
		if err := os.Mkdir(rt, 0o700); err != nil {
			return nil, err
		}
		p.cliRT = rt
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") && !strings.HasPrefix(kv, cli.PersistEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_RUNTIME_DIR="+p.cliRT), nil
}

// timeCLI runs the CLI (exe) with args once, to warm what it connects to,
// then times n more runs.
func timeCLI(ctx stdctx.Context, exe string, env, args []string, n int) (float64, error) {
	run := func() error {
		cmd := osexec.CommandContext(ctx, exe, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("spindle %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	if err := run(); err != nil {
		return 0, err
	}
	return timePerOp(n, run)
}

// fanTargets is how many targets the cli_run_many rows run true on: every
// one a name of its own (fanPattern) for the same server, so that each is
// a connection of its own, as distinct hosts would be.
const fanTargets = 20

// fanPattern is the ssh_config Host pattern of the fan-out aliases at ms
// of added latency; fanAliases are the names.
func fanPattern(ms int) string { return fmt.Sprintf("spindle-fan%d-*", ms) }

func (p *sshPath) fanAliases() []string {
	names := make([]string, fanTargets)
	for i := range names {
		names[i] = strings.Replace(fanPattern(p.ms), "*", strconv.Itoa(i+1), 1)
	}
	return names
}

// fanConfig is the ssh_config that names the fan-out aliases.
func (p *sshPath) fanConfig() string { return filepath.Join(p.b.dir, "ssh_config") }

// cliRunMany is one `spindle run T1..T20 -- true`: the CLI, connecting to
// the twenty in parallel (their agents cached, after a first run).
func (p *sshPath) cliRunMany(ctx stdctx.Context, n int) (float64, error) {
	if p.err != nil {
		return 0, p.err
	}
	exe := p.b.spindle
	args := append([]string{"-F", p.fanConfig(), "run"}, p.fanAliases()...)
	return timeCLI(ctx, exe, nil, append(args, "--", "true"), n)
}

// cliRunManyPersist is one `spindle run --persist 5m T1..T20 -- true`,
// after a first one (untimed) left the daemon with the twenty connections.
func (p *sshPath) cliRunManyPersist(ctx stdctx.Context, n int) (float64, error) {
	if p.err != nil {
		return 0, p.err
	}
	exe := p.b.spindle
	env, err := p.persistEnv()
	if err != nil {
		return 0, err
	}
	args := append([]string{"-F", p.fanConfig(), "run", "--persist", "5m"}, p.fanAliases()...)
	return timeCLI(ctx, exe, env, append(args, "--", "true"), n)
}

// parallelMasterTrue is OpenSSH's best at it: `ssh HOST true &` for each
// of the twenty, each over a ControlMaster of its own that a first round
// (untimed) started, then wait.
func (p *sshPath) parallelMasterTrue(ctx stdctx.Context, n int) (float64, error) {
	if p.err != nil {
		return 0, p.err
	}
	dir := filepath.Join(p.b.dir, fmt.Sprintf("fancm%d", p.ms))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	round := func() error {
		var wg sync.WaitGroup
		errs := make([]error, fanTargets)
		for i, alias := range p.fanAliases() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				args := []string{"-T", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ControlMaster=auto",
					"-o", "ControlPath=" + filepath.Join(dir, alias), "-o", "ControlPersist=60", "-F", p.fanConfig(), alias, "true"}
				if out, err := osexec.CommandContext(ctx, "ssh", args...).CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("ssh %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	if err := round(); err != nil {
		return 0, err
	}
	p.fanMasters = dir
	return timePerOp(n, round)
}

// parallelFreshTrue is what one would do without Spindle: `ssh HOST true &`
// for each of the twenty, then wait.
func (p *sshPath) parallelFreshTrue(ctx stdctx.Context, n int) (float64, error) {
	if p.err != nil {
		return 0, p.err
	}
	return timePerOp(n, func() error {
		var wg sync.WaitGroup
		errs := make([]error, fanTargets)
		for i, alias := range p.fanAliases() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				args := []string{"-T", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ControlMaster=no", "-o", "ControlPath=none",
					"-F", p.fanConfig(), alias, "true"}
				if out, err := osexec.CommandContext(ctx, "ssh", args...).CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("ssh %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

func (p *sshPath) freshTrue(ctx stdctx.Context, n int) (float64, error) {
	return timePerOp(n, func() error { return p.run(ctx, false, "true") })
}

// pushAgentScript is what the first stage does with the agent as it
// travels (format: zstd, gzip or raw), minus the checks: unpack it into a
// file. Through sh, since the login shell may be fish or tcsh; no single
// quotes inside.
func pushAgentScript(format string) string {
	unpack := format + " -dc"
	if format == "raw" {
		unpack = "cat"
	}
	return `sh -c 'f=/tmp/spindle-bench-push.$$; ` + unpack + ` > $f; s=$?; rm -f $f; exit $s'`
}

// The first stage's probe for decompressors, whose answer the SPINDLE-NEED
// line carries.
const decompressorsProbe = `for c in gzip xz zstd; do command -v $c >/dev/null 2>&1 && echo $c; done; true`

// freshPushAgent is OpenSSH delivering what a cold connect delivers: a
// fresh connection that writes the agent, compressed as Spindle sends it
// to this target, into the same decompressor there.
func (p *sshPath) freshPushAgent(ctx stdctx.Context, n int) (float64, error) {
	if p.pushPayload == nil {
		cx, err := p.context(ctx)
		if err != nil {
			return 0, err
		}
		info, err := sys.Info(ctx, cx)
		if err != nil {
			return 0, err
		}
		probe, err := exec.Run(ctx, cx, exec.Cmd{Shell: decompressorsProbe})
		if err != nil {
			return 0, err
		}
		src := p.opts.Agent
		if src == nil {
			src = bootstrap.Default()
		}
		bin, err := src.Agent(info.OS, info.Arch)
		if err != nil {
			return 0, err
		}
		if p.pushPayload, p.pushFormat, err = bin.Payload(strings.Fields(string(probe.Stdout))); err != nil {
			return 0, err
		}
	}
	script := pushAgentScript(p.pushFormat)
	return timePerOp(n, func() error { return p.runStdin(ctx, false, script, p.pushPayload) })
}

// xcryptoTrue runs `true` in a new session per command on one
// x/crypto/ssh client, as Go SSH libraries do.
func (p *sshPath) xcryptoTrue(ctx stdctx.Context, n int) (float64, error) {
	if p.xc == nil {
		c, err := p.dialXCrypto(ctx)
		if err != nil {
			return 0, fmt.Errorf("x/crypto/ssh: %w", err)
		}
		p.xc = c
	}
	return timePerOp(n, func() error {
		s, err := p.xc.NewSession()
		if err != nil {
			return err
		}
		defer s.Close()
		return s.Run("true")
	})
}

// dialXCrypto connects with what OpenSSH resolves for the path (ssh -G):
// its host, port, user, unencrypted identity files and ssh-agent keys,
// and its known_hosts files.
func (p *sshPath) dialXCrypto(ctx stdctx.Context) (*xssh.Client, error) {
	addr, cfg, err := p.xcryptoConfig(ctx)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return xcryptoClient(conn, addr, cfg)
}

// xcryptoClient runs the SSH handshake on conn, bounded in time.
func xcryptoClient(conn net.Conn, addr string, cfg *xssh.ClientConfig) (*xssh.Client, error) {
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	c, chans, reqs, err := xssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return xssh.NewClient(c, chans, reqs), nil
}

// xcryptoConfig is the address and client configuration that OpenSSH
// resolves for the path (see dialXCrypto).
func (p *sshPath) xcryptoConfig(ctx stdctx.Context) (string, *xssh.ClientConfig, error) {
	if !p.cmUp && p.ms > 0 {
		// A proxied path of a --ssh-target records its host key on first
		// use: let OpenSSH do that first.
		if err := p.run(ctx, true, "true"); err != nil {
			return "", nil, err
		}
	}
	res, err := sshResolve(p.sshArgs, p.dest)
	if err != nil {
		return "", nil, err
	}
	var signers []xssh.Signer
	for _, id := range res["identityfile"] {
		if pem, err := os.ReadFile(id); err == nil {
			if s, err := xssh.ParsePrivateKey(pem); err == nil {
				signers = append(signers, s)
			}
		}
	}
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" && first(res["identitiesonly"]) != "yes" {
		if c, err := net.Dial("unix", sock); err == nil {
			defer c.Close()
			if ss, err := agent.NewClient(c).Signers(); err == nil {
				signers = append(signers, ss...)
			}
		}
	}
	var khFiles []string
	for _, v := range res["userknownhostsfile"] {
		for _, f := range strings.Fields(v) {
			if _, err := os.Stat(f); err == nil {
				khFiles = append(khFiles, f)
			}
		}
	}
	addr := net.JoinHostPort(first(res["hostname"]), first(res["port"]))
	kh, err := knownhosts.NewDB(khFiles...)
	if err != nil {
		return "", nil, err
	}
	return addr, &xssh.ClientConfig{
		User:              first(res["user"]),
		Auth:              []xssh.AuthMethod{xssh.PublicKeys(signers...)},
		HostKeyCallback:   kh.HostKeyCallback(),
		HostKeyAlgorithms: kh.HostKeyAlgorithms(addr),
		Timeout:           30 * time.Second,
	}, nil
}

func (p *sshPath) close() {
	if p.cliRT != "" {
		daemon.StopAll(p.cliRT)
	}
	if p.xc != nil {
		p.xc.Close()
	}
	for _, e := range p.echo {
		if e != nil {
			e.close()
		}
	}
	if p.ctl != nil {
		p.ctl.Close()
	}
	for _, cm := range []string{p.cm, p.jumpCM} {
		if cm == "" || (cm == p.cm && !p.cmUp) {
			continue
		}
		args := append([]string{"-o", "ControlPath=" + cm, "-O", "exit"}, p.sshArgs...)
		cmd := osexec.Command("ssh", append(args, p.dest)...)
		cmd.Run() //nolint:errcheck // the master may be gone
	}
	if p.fanMasters != "" {
		for _, alias := range p.fanAliases() {
			cmd := osexec.Command("ssh", "-o", "ControlPath="+filepath.Join(p.fanMasters, alias), "-O", "exit", "-F", p.fanConfig(), alias)
			cmd.Run() //nolint:errcheck // the master may be gone
		}
	}
}
