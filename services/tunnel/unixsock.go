package tunnel

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ListenUnixPrivate listens on a Unix socket at path that only this
// process's user (and root) may use, as ssh's forwarded sockets are
// (StreamLocalBindMask 0177): the socket is made 0600, and since the
// mode is set just after the bind, a connection from any other user is
// closed as soon as it is accepted (its credentials are checked). An
// existing file at path is an error, as in ssh without
// StreamLocalBindUnlink, unless it is a stale socket of this user's that
// nothing listens on any more (left by a run that was killed), which is
// replaced. Closing the listener removes the socket.
func ListenUnixPrivate(path string) (net.Listener, error) {
	ln, err := net.Listen("unix", path)
	if err != nil && errors.Is(err, unix.EADDRINUSE) && removeStaleSocket(path) {
		ln, err = net.Listen("unix", path)
	}
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return &privateListener{Listener: ln, uid: os.Getuid()}, nil
}

type privateListener struct {
	net.Listener
	uid int
}

// Accept returns the next connection from this user or root.
func (l *privateListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if uid, ok := peerUID(c); ok && (uid == l.uid || uid == 0) {
			return c, nil
		}
		c.Close()
	}
}

// peerUID is the user at the other end of a Unix socket connection.
func peerUID(c net.Conn) (int, bool) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return 0, false
	}
	return int(cred.Uid), true
}

// removeStaleSocket removes path if it is a socket owned by this user
// that refuses connections: its listener is gone. Anything else (a
// regular file, another user's socket, a live one) is left alone.
func removeStaleSocket(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return false
	}
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
		return false // alive
	}
	if !errors.Is(err, unix.ECONNREFUSED) {
		return false
	}
	return os.Remove(path) == nil
}
