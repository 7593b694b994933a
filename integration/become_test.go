package integration_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/su"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	sexec "github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
)

// sudoers grants user sudo with a password through a drop-in removed when
// the test ends.
func sudoers(t *testing.T, line string) {
	t.Helper()
	if _, err := exec.LookPath("visudo"); err != nil {
		t.Fatalf("needs sudo (scripts/test-deps.sh): %v", err)
	}
	path := filepath.Join("/etc/sudoers.d", "spindle-it-"+strconv.Itoa(os.Getpid())+"-"+strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.WriteFile(path, []byte(line+"\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	if out, err := exec.Command("visudo", "-cf", path).CombinedOutput(); err != nil {
		t.Fatalf("visudo rejects %q: %v: %s", line, err, out)
	}
}

// TestSSHSudoSuChain: ssh as an unprivileged user, sudo to root with the
// user's password, su from root to a third user; calls at the end of the
// chain run as that user, and many run at once through one sudo hop.
func TestSSHSudoSuChain(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/bash")
	other := sshtest.CreateUser(t, "/bin/bash")
	// Root needs the user's password; the third user does not (the last
	// matching rule wins).
	sudoers(t, tg.u.Name+" ALL=(ALL:ALL) ALL\n"+tg.u.Name+" ALL=("+other.Name+") NOPASSWD: ALL")
	_, cx, err := connect(t, tg, tg.opts())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()

	// sudo without a password where sudoers allows it.
	nopass, err := cx.Connect(ctx, sudo.Options{User: other.Name})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := sys.Info(ctx, nopass); err != nil || info.UID != other.UID {
		t.Fatalf("sudo without a password: %+v, %v; want uid %d", info, err, other.UID)
	}
	// No password where one is needed: sudo -n fails at once, clearly.
	if _, err := cx.Connect(ctx, sudo.Options{User: "root"}); !errors.Is(err, spindle.ErrAuth) {
		t.Fatalf("sudo without a password: %v, want ErrAuth", err)
	}
	// A wrong password is refused, and never shown.
	_, err = cx.Connect(ctx, sudo.Options{User: "root", Password: "wrong-" + tg.u.Password})
	if !errors.Is(err, spindle.ErrAuth) || strings.Contains(err.Error(), tg.u.Password) {
		t.Fatalf("sudo with a wrong password: %v", err)
	}
	root, err := cx.Connect(ctx, sudo.Options{User: "root", Password: tg.u.Password})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := sys.Info(ctx, root); err != nil || info.UID != 0 {
		t.Fatalf("behind sudo: %+v, %v", info, err)
	}
	last, err := root.Connect(ctx, su.Options{User: other.Name})
	if err != nil {
		t.Fatal(err)
	}
	if want := "ssh:127.0.0.1 → sudo:root → su:" + other.Name; last.Name() != want {
		t.Fatalf("chain name %q, want %q", last.Name(), want)
	}
	if info, err := sys.Info(ctx, last); err != nil || info.UID != other.UID {
		t.Fatalf("at the end of the chain: %+v, %v; want uid %d", info, err, other.UID)
	}

	// Concurrent calls through one become hop.
	const n = 50
	futures := make([]*spindle.Future, n)
	for i := range futures {
		futures[i] = root.Go(ctx, sexec.MethodRun, &sexec.Cmd{Argv: []string{"id", "-u"}})
	}
	for i, f := range futures {
		var res sexec.Result
		if err := f.Wait(&res); err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
			t.Fatalf("concurrent call %d through sudo: %q, %v", i, res.Stdout, err)
		}
	}
	// The controller logged at debug and agents forwarded at debug (the
	// most verbose level): the password is nowhere in it.
	if len(tg.logs.All()) == 0 {
		t.Fatal("no logs were observed: the check below would prove nothing")
	}
	for _, e := range tg.logs.All() {
		if strings.Contains(e.Message+fmt.Sprint(e.ContextMap()), tg.u.Password) {
			t.Fatalf("the password reached a log: %q %v", e.Message, e.ContextMap())
		}
	}
}
