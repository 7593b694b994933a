package integration_test

import (
	stdctx "context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/services/sys"
)

// privateKeysUnder lists the files below dir that hold a private key.
func privateKeysUnder(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err != nil || fi.Size() > 1<<20 {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "PRIVATE KEY") {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// TestSSHHopThroughAgent: the agent on one host makes the SSH connection
// to the next with the controller's key (signed over the bus) and the
// controller's known_hosts; no private key ever lands on either host.
func TestSSHHopThroughAgent(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/bash")
	_, cx := mustConnect(t, first, first.opts())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()

	hop, err := cx.Connect(ctx, second.opts())
	if err != nil {
		t.Fatalf("ssh hop through %s: %v", cx.Name(), err)
	}
	if want := "ssh:127.0.0.1 → ssh:127.0.0.1"; hop.Name() != want {
		t.Errorf("hop name %q, want %q", hop.Name(), want)
	}
	info, err := sys.Info(ctx, hop)
	if err != nil || info.UID != second.u.UID {
		t.Fatalf("behind the hop: %+v, %v; want uid %d", info, err, second.u.UID)
	}
	// The far agent's parent is an sshd session, not the first agent:
	// the first agent really made an SSH connection.
	if got := run(t, hop, "sh", "-c", `p=$(cut -d" " -f4 /proc/$PPID/stat); cat /proc/$p/comm`); !strings.HasPrefix(got, "sshd") {
		t.Errorf("far agent's parent is %q, want sshd", got)
	}
	for _, u := range []string{first.u.Home, second.u.Home} {
		if keys := privateKeysUnder(t, u); len(keys) > 0 {
			t.Errorf("private key files on a target: %v", keys)
		}
	}
	if !strings.Contains(logText(first.logs), "signing for an ssh hop") {
		t.Errorf("the controller never signed for the hop; logs:\n%s", logText(first.logs))
	}
	// The same hop again is the running child.
	again, err := cx.Connect(ctx, second.opts())
	if err != nil || again != hop {
		t.Errorf("second Connect: %v, %v; want the running hop", again, err)
	}
}

// TestSSHHopHostKeys: the hop's host key is checked against the
// controller's known_hosts, under the controller's policy.
func TestSSHHopHostKeys(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/sh")
	_, cx := mustConnect(t, first, first.opts())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()

	empty := filepath.Join(t.TempDir(), "known_hosts")
	o := second.opts()
	o.KnownHostsFiles = []string{empty}
	_, err := cx.Connect(ctx, o)
	if !errors.Is(err, spindle.ErrHostKey) || !strings.Contains(err.Error(), "not known") {
		t.Fatalf("unknown host key through a hop: %v, want ErrHostKey naming it", err)
	}
	if !strings.Contains(err.Error(), "ssh:127.0.0.1 → ssh:127.0.0.1") {
		t.Errorf("error does not name the chain: %v", err)
	}
	o.HostKeyPolicy = ssh.HostKeyAcceptNew
	hop, err := cx.Connect(ctx, o)
	if err != nil {
		t.Fatalf("accept-new through a hop: %v", err)
	}
	b, _ := os.ReadFile(empty)
	if !strings.Contains(string(b), "[127.0.0.1]:"+strconv.Itoa(second.s.Port)) {
		t.Fatalf("accept-new did not record the key in the controller's file: %q", b)
	}
	hop.Close()

	// A changed key is refused whatever the policy.
	second.s.RestartWithNewHostKey(t)
	_, err = cx.Connect(ctx, o)
	if !errors.Is(err, spindle.ErrHostKey) || !strings.Contains(err.Error(), "CHANGED") {
		t.Fatalf("changed host key through a hop: %v", err)
	}
}

// TestSSHHopAuthFailure: a key the far host does not accept fails the hop
// with ErrAuth naming it, and the first agent stays usable.
func TestSSHHopAuthFailure(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/sh")
	_, cx := mustConnect(t, first, first.opts())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	o := second.opts()
	o.IdentityFiles = []string{first.key.Path} // not authorized on second
	_, err := cx.Connect(ctx, o)
	if !errors.Is(err, spindle.ErrAuth) {
		t.Fatalf("wrong key through a hop: %v, want ErrAuth", err)
	}
	if _, err := sys.Info(ctx, cx); err != nil {
		t.Fatalf("first agent after a failed hop: %v", err)
	}
}
