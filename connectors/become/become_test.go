package become_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/become"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/becometest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { becometest.Main(m) }

// fakeTool is a become tool in sh: `fake MODE EXPECTED -- CMD…`. It asks
// for the password on /dev/tty like sudo, three times at most.
const fakeTool = `#!/bin/sh
mode=$1; exp=$2; shift 3
case $mode in
sleep) exec sleep 60;;
deny) echo "fake: alice is not allowed to do that" > /dev/tty; exit 1;;
locale) echo "fake: LC_ALL=$LC_ALL LANG=$LANG" > /dev/tty; exit 1;;
tty) test -t 2 && test "$(tty < /dev/tty)" != "not a tty" && test ! -t 0 && test ! -t 1 && exec "$@"; echo "fake: sorry, no tty" > /dev/tty; exit 1;;
nopass) exec "$@";;
stageerr) s=${3#*n=}; echo "SPINDLE-ERROR ${s%%;*} boom $exp"; exit 1;;
esac
n=0
while :; do
	printf '[fake] Password: ' > /dev/tty
	IFS= read -r pw < /dev/tty || exit 1
	test "$mode" = echo && { echo "fake: you typed $pw" > /dev/tty; exit 1; }
	test "$pw" = "$exp" && exec "$@"
	echo "Sorry, try again." > /dev/tty
	n=$((n+1)); test $n -ge 3 && { echo "fake: 3 incorrect password attempts" > /dev/tty; exit 1; }
done
`

func fake(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "fake-become")
	if err := os.WriteFile(p, []byte(fakeTool), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func start(t *testing.T, argv []string, p become.Prompter) (*bootstrap.Conn, string, error) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	req := connectors.StartRequest{ID: 3, Parent: 1, Name: "fake:root", Logger: zap.New(core), Agent: bootstrap.Default()}
	conn, err := become.Start(context.Background(), req, argv, p)
	var b strings.Builder
	for _, e := range logs.All() {
		fmt.Fprintf(&b, "%s %v\n", e.Message, e.ContextMap())
	}
	return conn, b.String(), err
}

func prompter(password string) become.Prompter {
	return become.Prompter{
		Tool: "fake", Package: "fake-pkg", Password: password,
		IsPrompt: func(out string) bool { return strings.HasSuffix(out, "[fake] Password: ") },
		Classify: func(out string) error {
			switch {
			case strings.Contains(out, "not allowed"):
				return become.ErrNotAllowed
			case strings.Contains(out, "no tty"):
				return become.ErrNeedTTY
			}
			return nil
		},
	}
}

func argv(t *testing.T, mode, exp string) []string {
	return []string{fake(t), mode, exp, "--", "sh", "-c", become.Script}
}

const secret = "S3cret-pass-xyz"

func TestPasswordAccepted(t *testing.T) {
	conn, logs, err := start(t, argv(t, "ask", secret), prompter(secret))
	if err != nil {
		t.Fatal(err)
	}
	if conn.Hello.UID != os.Getuid() {
		t.Errorf("uid %d", conn.Hello.UID)
	}
	conn.Close()
	if strings.Contains(logs, secret) {
		t.Errorf("password in logs:\n%s", logs)
	}
}

func TestNoPromptNoPassword(t *testing.T) {
	conn, _, err := start(t, argv(t, "nopass", ""), prompter(""))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

func TestWrongPassword(t *testing.T) {
	t0 := time.Now()
	_, logs, err := start(t, argv(t, "ask", "the-right-one"), prompter(secret))
	if !errors.Is(err, become.ErrWrongPassword) || !errors.Is(err, errkind.ErrAuth) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(logs, secret) {
		t.Errorf("password leaked: %v\n%s", err, logs)
	}
	t.Log(err)
}

func TestPasswordRequired(t *testing.T) {
	_, _, err := start(t, argv(t, "ask", "x"), prompter(""))
	if !errors.Is(err, become.ErrPasswordRequired) || !errors.Is(err, errkind.ErrAuth) {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}

// The tool prints the password back: it must be redacted.
func TestRedactEcho(t *testing.T) {
	_, logs, err := start(t, argv(t, "echo", ""), prompter(secret))
	if err == nil {
		t.Fatal("started")
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(logs, secret) {
		t.Errorf("password leaked: %v\n%s", err, logs)
	}
	if !strings.Contains(err.Error(), "you typed ********") {
		t.Errorf("err = %v", err)
	}
}

func TestClassify(t *testing.T) {
	_, _, err := start(t, argv(t, "deny", ""), prompter(""))
	if !errors.Is(err, become.ErrNotAllowed) || !errors.Is(err, errkind.ErrPermission) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "alice is not allowed") {
		t.Errorf("err lacks the tool's message: %v", err)
	}
	t.Log(err)
}

// The child has the PTY as stderr and controlling terminal, pipes on
// stdin/stdout.
func TestHybridTerminal(t *testing.T) {
	conn, _, err := start(t, argv(t, "tty", ""), prompter(""))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

func TestLocale(t *testing.T) {
	t.Setenv("LANG", "de_DE.UTF-8")
	t.Setenv("LC_MESSAGES", "de_DE.UTF-8")
	_, _, err := start(t, argv(t, "locale", ""), prompter(""))
	if err == nil || !strings.Contains(err.Error(), "LC_ALL=C LANG=C") {
		t.Fatalf("err = %v", err)
	}
}

func TestTimeout(t *testing.T) {
	p := prompter("")
	p.Timeout = 300 * time.Millisecond
	t0 := time.Now()
	_, _, err := start(t, argv(t, "sleep", ""), p)
	if !errors.Is(err, become.ErrTimeout) || !errors.Is(err, errkind.ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	t.Log(err)
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req := connectors.StartRequest{ID: 3, Parent: 1, Name: "fake:root", Agent: bootstrap.Default()}
	_, err := become.Start(ctx, req, argv(t, "sleep", ""), prompter(""))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestNotInstalled(t *testing.T) {
	_, _, err := start(t, []string{"spindle-no-such-tool", become.Script}, prompter(""))
	if !errors.Is(err, become.ErrNotInstalled) || !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), `"fake-pkg"`) {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}

// The Conn carries the protocol: a second Start after Close works, and the
// agent's stderr after the hello does not disturb anything.
func TestCloseAndRestart(t *testing.T) {
	for i := 0; i < 2; i++ {
		conn, _, err := start(t, argv(t, "ask", secret), prompter(secret))
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Errors the tool does not explain keep their kinds (the retry needs
// bootstrap.ErrStaleAgent) and lose the password.
func TestUnclassifiedKeepsKind(t *testing.T) {
	_, logs, err := start(t, argv(t, "stageerr", secret), prompter(secret))
	if !errors.Is(err, bootstrap.ErrAgent) {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(logs, secret) || !strings.Contains(err.Error(), "boom ********") {
		t.Errorf("err = %v\n%s", err, logs)
	}
}
