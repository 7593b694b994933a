package daemon

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/spindle-rpc/spindle/daemon/proto"
	"github.com/spindle-rpc/spindle/version"
)

// volatileEnv are the variables that may differ between two commands that
// should share a daemon: a shell's bookkeeping, not what a connection
// reads.
var volatileEnv = []string{"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES", "TERM"}

// Socket is the daemon's socket for this user, environment and
// executable: $XDG_RUNTIME_DIR/spindle-daemon, else
// $TMPDIR/spindle-daemon-UID (a directory of the user's, 0700, apart from
// the agent caches that a user may empty), then daemon-HASH.sock. The
// hash covers the environment (less a shell's bookkeeping and the
// variables in ignore), so that a daemon never connects with another SSH
// agent, HOME or PATH than the client would have, and the executable and
// its version, so that a new spindle never talks to an old daemon.
func Socket(ignore ...string) (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("spindle-daemon-%d", os.Getuid()))
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
		if fi, err := os.Stat(rt); err == nil && fi.IsDir() {
			dir = filepath.Join(rt, "spindle-daemon")
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || st == nil || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s must be a directory of uid %d with mode 0700, not a symlink", dir, os.Getuid())
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(volatileEnv, name) && !slices.Contains(ignore, name) {
			env = append(env, kv)
		}
	}
	slices.Sort(env)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", version.Version, exe, strings.Join(env, "\x00"))
	return filepath.Join(dir, "daemon-"+hex.EncodeToString(h.Sum(nil))[:16]+".sock"), nil
}

// StopAll stops the daemons whose sockets are under the runtime directory
// rt (what Socket picks with XDG_RUNTIME_DIR=rt), through their pid
// files, without waiting.
func StopAll(rt string) {
	pids, _ := filepath.Glob(filepath.Join(rt, "spindle-daemon", "*.pid"))
	for _, f := range pids {
		if b, err := os.ReadFile(f); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGTERM) //nolint:errcheck // it may be gone
			}
		}
	}
}

// ReadyFD is the descriptor on which a daemon that Start runs finds the
// pipe for Options.Ready.
const ReadyFD = 3

// Start runs argv (a daemon serving socket, told to answer on ReadyFD) in
// the background, in a session of its own (a terminal's hangup does not
// end it), in / (it keeps no directory busy), and waits until it serves
// socket. "busy", another daemon that started first, is success.
func Start(socket string, argv []string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := osexec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{w} // the first is descriptor 3, ReadyFD
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("start the spindle daemon: %w", err)
	}
	defer cmd.Process.Release()                         //nolint:errcheck // it runs on alone
	r.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a pipe has deadlines
	line, err := bufio.NewReader(r).ReadString('\n')
	switch line = strings.TrimSpace(line); {
	case line == "ok", line == "busy":
		return nil
	case err != nil && line == "":
		return fmt.Errorf("the spindle daemon did not start: %w (see %s.log)", err, socket)
	}
	return fmt.Errorf("the spindle daemon did not start: %s", line)
}

// Dial connects to the daemon serving socket. When none does and start is
// not nil, it starts one with Start(socket, start) first.
func Dial(socket string, start []string) (net.Conn, error) {
	c, err := net.Dial("unix", socket)
	if err == nil || start == nil {
		return c, err
	}
	if err := Start(socket, start); err != nil {
		return nil, err
	}
	return net.Dial("unix", socket)
}

// Client is a CLI client's side of the protocol of package proto, on a
// connection to the daemon: the control stream's frames, and the
// command's stdin, stdout and stderr.
type Client struct {
	Stdin          net.Conn // closing it is the command's end of file
	Stdout, Stderr net.Conn
	control        net.Conn
	ys             *yamux.Session
	wmu            sync.Mutex
}

// NewClient opens the four streams on conn.
func NewClient(conn net.Conn) (*Client, error) {
	ys, err := yamux.Client(conn, yamuxConfig())
	if err != nil {
		return nil, err
	}
	streams := make([]net.Conn, 4)
	for i, role := range []proto.Role{proto.RoleControl, proto.RoleStdin, proto.RoleStdout, proto.RoleStderr} {
		st, err := ys.Open()
		if err == nil {
			_, err = st.Write([]byte{byte(role)})
		}
		if err != nil {
			ys.Close()
			return nil, err
		}
		streams[i] = st
	}
	return &Client{control: streams[0], Stdin: streams[1], Stdout: streams[2], Stderr: streams[3], ys: ys}, nil
}

// Send writes m on the control stream; it may be called from several
// goroutines.
func (c *Client) Send(m *proto.Msg) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return proto.WriteMsg(c.control, m)
}

// Recv reads the daemon's next frame (one goroutine at a time).
func (c *Client) Recv() (*proto.Msg, error) { return proto.ReadMsg(c.control) }

// Close ends the session (not the connection it runs on).
func (c *Client) Close() error { return c.ys.Close() }
