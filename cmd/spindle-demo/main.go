// Command spindle-demo shows Spindle over SSH on a machine with no sshd:
// it starts a throwaway SSH server embedded in Go (sshtest.Embedded, the
// project's SSH fixture: 127.0.0.1, fresh
// ed25519 host and client keys, a temp known_hosts, a temp HOME and
// XDG_RUNTIME_DIR; a salted agent, so the first connect is cold, removed
// again at the end), then connects through
// it with the ssh connector and prints the cold and cached bootstrap
// times, the call latency and a command's output. `make demo` runs it.
package main

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
)

// pings is how many sys.Ping calls the latency figure is the median of.
const pings = 1000

func main() {
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "spindle-demo: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx stdctx.Context, w io.Writer) error {
	srv, err := sshtest.StartEmbedded()
	if err != nil {
		return fmt.Errorf("start the demo SSH server: %w", err)
	}
	defer srv.Close()
	u, err := user.Current()
	if err != nil {
		return err
	}
	// A salted agent (its hash is new): the cold start is cold even where
	// an agent of this build is cached already.
	src := bootstrap.Salted(bootstrap.Default())
	bin, err := src.Agent(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return err
	}
	yes := true
	opts := ssh.Options{
		Host: "127.0.0.1", Port: srv.Port, User: u.Username,
		ConfigFile:      "none", // the user's ~/.ssh/config plays no part
		IdentityFiles:   []string{srv.KeyFile},
		IdentitiesOnly:  &yes,
		KnownHostsFiles: []string{srv.KnownHosts},
		HostKeyPolicy:   ssh.HostKeyStrict,
		ConnectTimeout:  30 * time.Second,
		Agent:           src,
	}
	conn, ok := any(opts).(spindle.Connector)
	if !ok {
		return errors.New("connectors/ssh.Options does not implement spindle.Connector in this build")
	}
	fmt.Fprintf(w, "SSH server: 127.0.0.1:%d (embedded in Go, fresh ed25519 host key, key auth, empty agent cache)\n", srv.Port)

	// Cold: the cache is empty, so the first stage asks for the agent and
	// the controller uploads it.
	ctl := spindle.NewController(spindle.Options{})
	t0 := time.Now()
	if _, err := ctl.Connect(ctx, conn); err != nil {
		ctl.Close()
		return fmt.Errorf("cold connect: %w", err)
	}
	cold := time.Since(t0)
	ctl.Close()
	cached, err := srv.CachedAgent(bin.Hash)
	if err != nil {
		return fmt.Errorf("after the first connect: %w", err)
	}
	fmt.Fprintf(w, "connect, cold (agent uploaded):  %8s   cached as %s\n", fmtDur(cold), cached)

	// Cached: the first stage execs the cached agent at once.
	ctl = spindle.NewController(spindle.Options{})
	defer ctl.Close()
	t0 = time.Now()
	cx, err := ctl.Connect(ctx, conn)
	if err != nil {
		return fmt.Errorf("cached connect: %w", err)
	}
	warm := time.Since(t0)
	fmt.Fprintf(w, "connect, cached:                 %8s\n", fmtDur(warm))

	rtts := make([]time.Duration, 0, pings)
	for range pings {
		t := time.Now()
		if err := sys.Ping(ctx, cx); err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		rtts = append(rtts, time.Since(t))
	}
	slices.Sort(rtts)
	fmt.Fprintf(w, "call latency (sys.Ping, median of %d): %s\n", pings, fmtDur(rtts[len(rtts)/2]))

	t0 = time.Now()
	res, err := exec.Run(ctx, cx, exec.Cmd{Argv: []string{"uname", "-a"}})
	if err != nil {
		return fmt.Errorf("uname -a: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("uname -a exited with %d: %s", res.ExitCode, res.Stderr)
	}
	fmt.Fprintf(w, "run uname -a (%s): %s\n", fmtDur(time.Since(t0)), strings.TrimSpace(string(res.Stdout)))
	return nil
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return d.Round(10 * time.Millisecond).String()
}
