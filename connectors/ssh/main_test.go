package ssh

import (
	"io"
	"net"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(netcatEnv); addr != "" {
		os.Exit(netcat(addr))
	}
	goleak.VerifyTestMain(m)
}

// netcatEnv, set to HOST:PORT, makes the test binary a netcat between its
// stdin/stdout and that address: the proxy command of the ProxyCommand
// tests, which cannot count on nc being installed. With netcatMarkEnv set
// it first creates that file, so that a test sees the command ran.
const (
	netcatEnv     = "SPINDLE_TEST_NETCAT"
	netcatMarkEnv = "SPINDLE_TEST_NETCAT_MARK"
)

func netcat(addr string) int {
	if mark := os.Getenv(netcatMarkEnv); mark != "" {
		if err := os.WriteFile(mark, []byte(addr), 0o600); err != nil {
			os.Stderr.WriteString("netcat: " + err.Error() + "\n")
			return 1
		}
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		os.Stderr.WriteString("netcat: " + err.Error() + "\n")
		return 1
	}
	go func() {
		io.Copy(c, os.Stdin)
		c.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(os.Stdout, c)
	return 0
}
