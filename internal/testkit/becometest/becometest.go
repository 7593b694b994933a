// Package becometest helps test the become connectors (sudo, su, doas)
// against the real tools: throw-away users, sudoers drop-ins, doas.conf,
// and running a connector's Start as an unprivileged user (the test binary
// re-executes itself as that user).
package becometest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/become"
	"github.com/spindle-rpc/spindle/internal/testkit/testagent"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

const (
	helperKind = "SPINDLE_BECOME_HELPER"
	helperOpts = "SPINDLE_BECOME_OPTS"
)

// Main is TestMain for the connector packages: as a re-executed helper it
// performs one Start and exits; otherwise it builds the agent and runs the
// tests with goleak.
func Main(m *testing.M) {
	if kind := os.Getenv(helperKind); kind != "" {
		os.Exit(helper(kind, os.Getenv(helperOpts)))
	}
	if _, err := testagent.Build(); err != nil {
		fmt.Fprintln(os.Stderr, "build the agent:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if shareDir != "" {
			os.RemoveAll(shareDir)
		}
		os.Exit(code)
	}))
}

// Need skips t loudly, or fails it when CI=true, unless ok.
func Need(t testing.TB, ok bool, why string) {
	t.Helper()
	testkit.Need(t, ok, why)
}

// NeedRoot requires root and the named tools.
func NeedRoot(t testing.TB, tools ...string) {
	t.Helper()
	Need(t, os.Geteuid() == 0, "these tests create users and edit sudoers/doas.conf: they must run as root")
	for _, tool := range append([]string{"useradd", "userdel", "chpasswd", "visudo"}, tools...) {
		_, err := exec.LookPath(tool)
		Need(t, err == nil, tool+" is not installed (scripts/test-deps.sh installs sudo, opendoas, passwd)")
	}
}

// User is a throw-away account.
type User struct {
	Name     string
	Password string
	UID, GID int
	Home     string
}

func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// NewUser creates a user with a home, /bin/bash and password (none when
// empty); it is removed when the test ends.
func NewUser(t testing.TB, password string) User {
	t.Helper()
	name := "spt" + random(5)
	run(t, "useradd", "-m", "-s", "/bin/bash", name)
	t.Cleanup(func() {
		exec.Command("pkill", "-KILL", "-u", name).Run()
		if out, err := exec.Command("userdel", "-r", "-f", name).CombinedOutput(); err != nil {
			t.Logf("userdel %s: %v: %s", name, err, out)
		}
	})
	if password != "" {
		c := exec.Command("chpasswd")
		c.Stdin = strings.NewReader(name + ":" + password + "\n")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("chpasswd: %v: %s", err, out)
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// Uids are reused once a test user is deleted, and the agent cache
	// dirs outside the home are named by uid: clear them both ways, so a
	// test never sees another run's agents.
	clearCaches := func() {
		for _, d := range []string{"/dev/shm/spindle-" + u.Uid, filepath.Join(os.TempDir(), "spindle-"+u.Uid)} {
			os.RemoveAll(d)
		}
	}
	clearCaches()
	t.Cleanup(clearCaches)
	return User{Name: name, Password: password, UID: uid, GID: gid, Home: u.HomeDir}
}

// Password returns a fresh random password.
func Password() string { return "Pw-" + random(8) }

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

// Sudoers installs a sudoers drop-in (checked with visudo -cf) for the
// test's duration.
func Sudoers(t testing.TB, content string) {
	t.Helper()
	path := "/etc/sudoers.d/spindle-test-" + random(4)
	if err := os.WriteFile(path, []byte(content), 0o440); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	if out, err := exec.Command("visudo", "-cf", path).CombinedOutput(); err != nil {
		t.Fatalf("visudo -cf rejects %q: %v: %s", content, err, out)
	}
}

var doasMu sync.Mutex

// doasLock is held (flock) while a test owns /etc/doas.conf: test
// binaries of several packages run at once and share the file.
const doasLock = "/tmp/spindle-test-doas.conf.lock"

// DoasConf replaces /etc/doas.conf for the test's duration (restoring the
// original, or removing the file if there was none). One test at a time,
// across test processes, holds it.
func DoasConf(t testing.TB, content string) {
	t.Helper()
	doasMu.Lock()
	lock, err := os.OpenFile(doasLock, os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		doasMu.Unlock()
		t.Fatalf("lock %s: %v", doasLock, err)
	}
	unlock := func() {
		lock.Close() // releases the flock
		doasMu.Unlock()
	}
	const path = "/etc/doas.conf"
	old, err := os.ReadFile(path)
	existed := err == nil
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		unlock()
		t.Fatal(err)
	}
	os.Chmod(path, 0o600)
	t.Cleanup(func() {
		if existed {
			os.WriteFile(path, old, 0o600)
		} else {
			os.Remove(path)
		}
		unlock()
	})
}

// Result is what one Start did.
type Result struct {
	UID  int             `json:"uid"` // the agent's uid from its hello; -1 on error
	Err  string          `json:"err"`
	Is   map[string]bool `json:"is"` // error kinds the error satisfies
	Logs string          `json:"logs"`
}

var kinds = map[string]error{
	"wrong_password":    become.ErrWrongPassword,
	"password_required": become.ErrPasswordRequired,
	"not_allowed":       become.ErrNotAllowed,
	"need_tty":          become.ErrNeedTTY,
	"no_such_user":      become.ErrNoSuchUser,
	"not_installed":     become.ErrNotInstalled,
	"timeout":           become.ErrTimeout,
	"auth":              errkind.ErrAuth,
	"permission":        errkind.ErrPermission,
	"rpc_timeout":       errkind.ErrTimeout,
	"not_found":         errkind.ErrNotFound,
}

// StartHere runs r.Start in this process with a Debug-level observer and
// reports the result.
func StartHere(r connectors.Remote) Result {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	req := connectors.StartRequest{ID: 7, Parent: 1, Name: r.Name(), Logger: log, Agent: bootstrap.Default()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := r.Start(ctx, req)
	res := Result{UID: -1, Is: map[string]bool{}}
	if err != nil {
		res.Err = err.Error()
		for k, e := range kinds {
			res.Is[k] = errors.Is(err, e)
		}
	} else {
		res.UID = conn.Hello.UID
		conn.Close()
	}
	var b strings.Builder
	for _, e := range logs.All() {
		b.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			fmt.Fprintf(&b, " %s=%v", k, v)
		}
		b.WriteString("\n")
	}
	res.Logs = b.String()
	return res
}

func helper(kind, opts string) int {
	newZero, ok := connectors.Lookup(kind)
	if !ok {
		fmt.Fprintln(os.Stderr, "helper: unknown kind", kind)
		return 2
	}
	raw, err := hex.DecodeString(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	r := newZero()
	if err := msgpack.Unmarshal(raw, r); err != nil {
		fmt.Fprintln(os.Stderr, "helper: decode options:", err)
		return 2
	}
	json.NewEncoder(os.Stdout).Encode(StartHere(r))
	return 0
}

var (
	shareOnce sync.Once
	shareDir  string
	shareErr  error
)

// share copies the test binary and the agent where any user can run them.
func share() (string, error) {
	shareOnce.Do(func() {
		shareDir, shareErr = os.MkdirTemp("", "spindle-become-")
		if shareErr != nil {
			return
		}
		os.Chmod(shareDir, 0o755)
		exe, err := os.Executable()
		if err != nil {
			shareErr = err
			return
		}
		agent, err := testagent.Build()
		if err != nil {
			shareErr = err
			return
		}
		for src, dst := range map[string]string{exe: "test", agent: "spindle-agent"} {
			if shareErr = copyFile(src, filepath.Join(shareDir, dst)); shareErr != nil {
				return
			}
		}
	})
	return shareDir, shareErr
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// RunAs performs r.Start as u, in a copy of the test binary run with u's
// credentials in a session of its own (no controlling terminal), and
// returns the result.
func RunAs(t testing.TB, u User, r connectors.Remote) Result {
	t.Helper()
	dir, err := share()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := msgpack.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "test"), "-test.run=^$")
	cmd.Dir = dir
	cmd.Env = []string{helperKind + "=" + r.Kind(), helperOpts + "=" + hex.EncodeToString(raw),
		"SPINDLE_AGENT=" + filepath.Join(dir, "spindle-agent"),
		"HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name,
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=de_DE.UTF-8"} // become forces C
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true,
		Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper as %s: %v\nstderr: %s", u.Name, err, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("helper output %q: %v\nstderr: %s", out, err, stderr.String())
	}
	if s := stderr.String(); s != "" {
		t.Logf("helper stderr: %s", s)
	}
	return res
}

// CheckNoSecret fails t if secret appears in the result's error or logs.
func CheckNoSecret(t testing.TB, res Result, secret string) {
	t.Helper()
	if secret == "" {
		return
	}
	if strings.Contains(res.Err, secret) {
		t.Errorf("the password appears in the error: %s", res.Err)
	}
	if strings.Contains(res.Logs, secret) {
		t.Errorf("the password appears in the logs:\n%s", res.Logs)
	}
}
