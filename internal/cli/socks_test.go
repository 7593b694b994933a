package cli

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"regexp"
	"syscall"
	"testing"
)

func TestParseDynamicForward(t *testing.T) {
	for in, want := range map[string]string{"1080": "127.0.0.1:1080", "0": "127.0.0.1:0", "0.0.0.0:1080": "0.0.0.0:1080",
		"*:1080": ":1080", "[::1]:1080": "[::1]:1080"} {
		if got, err := parseDynamicForward(in); err != nil || got != want {
			t.Errorf("parseDynamicForward(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "host:", "70000"} {
		if _, err := parseDynamicForward(bad); err == nil {
			t.Errorf("parseDynamicForward(%q) accepted", bad)
		}
	}
}

// socksConnectRequest builds a CONNECT request to a domain name.
func socksConnectRequest(host string, port uint16) []byte {
	b := []byte{socksVersion, socksConnect, 0, socksDomain, byte(len(host))}
	b = append(b, host...)
	return binary.BigEndian.AppendUint16(b, port)
}

func TestSOCKSRequest(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
		rep  byte // the reply for a refused request; 0: a plain error
	}{
		{socksConnectRequest("db.internal", 5432), "db.internal:5432", 0},
		{[]byte{5, 1, 0, socksIPv4, 10, 0, 0, 7, 0, 22}, "10.0.0.7:22", 0},
		{append([]byte{5, 1, 0, socksIPv6}, append(net.ParseIP("fd00::7").To16(), 0, 80)...), "[fd00::7]:80", 0},
		{[]byte{5, 2, 0, socksIPv4, 10, 0, 0, 7, 0, 22}, "", socksBadCommand}, // BIND
		{[]byte{5, 1, 0, 9, 0, 0}, "", socksBadAddress},
		{[]byte{5, 1, 0, socksDomain, 0, 0, 80}, "", socksBadAddress},
		{socksConnectRequest("a]b", 80), "", socksBadAddress},
		{socksConnectRequest("::1", 80), "[::1]:80", 0},
		{[]byte{4, 1, 0, 80}, "", 0},
		{[]byte{5, 1, 0, socksDomain, 20, 'a'}, "", 0}, // cut short
	} {
		got, err := readSOCKSRequest(bytes.NewReader(c.in))
		var se *errSOCKS
		switch {
		case c.want != "" && (err != nil || got != c.want):
			t.Errorf("%v: %q, %v; want %q", c.in, got, err, c.want)
		case c.want == "" && err == nil:
			t.Errorf("%v: accepted as %q", c.in, got)
		case c.rep != 0 && (!errors.As(err, &se) || se.rep != c.rep):
			t.Errorf("%v: %v; want reply %d", c.in, err, c.rep)
		}
	}
	if ok, err := readSOCKSGreeting(bytes.NewReader([]byte{5, 2, 2, 0})); !ok || err != nil {
		t.Errorf("greeting offering no-auth: %v %v", ok, err)
	}
	if ok, err := readSOCKSGreeting(bytes.NewReader([]byte{5, 1, 2})); ok || err != nil {
		t.Errorf("greeting offering only user/password: %v %v", ok, err)
	}
}

// FuzzSOCKS: whatever a local client sends, the parsers return (no
// panic, no allocation beyond the 255 bytes a length byte allows).
func FuzzSOCKS(f *testing.F) {
	f.Add(append([]byte{5, 1, 0}, socksConnectRequest("localhost", 80)...))
	f.Add([]byte{5, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 4})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		if ok, err := readSOCKSGreeting(r); !ok || err != nil {
			return
		}
		addr, err := readSOCKSRequest(r)
		if err == nil {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				t.Fatalf("%q is not host:port", addr)
			}
		}
	})
}

// spindle forward -D, as curl --socks5-hostname uses it: a name resolved
// by the target, an address, and a refused port with its reply code.
func TestE2EForwardSOCKS(t *testing.T) {
	ln := upperServer(t)
	_, portStr, _ := net.SplitHostPort(ln.Addr().String())
	var port uint16
	for _, ch := range portStr {
		port = port*10 + uint16(ch-'0')
	}

	cmd, r := startForward(t, "-D", "0", "local")
	line, _ := r.ReadString('\n')
	m := regexp.MustCompile(`^spindle: SOCKS5 proxy on (127\.0\.0\.1:\d+) → local\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("spindle forward -D said %q", line)
	}
	try := func(req []byte) (reply []byte, body string) {
		t.Helper()
		c, err := net.Dial("tcp", m[1])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte{5, 1, 0})
		greet := make([]byte, 2)
		if _, err := io.ReadFull(c, greet); err != nil || greet[1] != socksNoAuth {
			t.Fatalf("greeting: %v %v", greet, err)
		}
		c.Write(req)
		reply = make([]byte, 10)
		if _, err := io.ReadFull(c, reply); err != nil {
			t.Fatalf("reply: %v", err)
		}
		if reply[1] != socksOK {
			return reply, ""
		}
		io.WriteString(c, "socks")
		c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(c)
		return reply, string(b)
	}
	if rep, body := try(socksConnectRequest("localhost", port)); rep[1] != socksOK || body != "SOCKS" {
		t.Errorf("by name: reply %v, %q", rep, body)
	}
	if rep, body := try([]byte{5, 1, 0, socksIPv4, 127, 0, 0, 1, byte(port >> 8), byte(port)}); rep[1] != socksOK || body != "SOCKS" {
		t.Errorf("by address: reply %v, %q", rep, body)
	}
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	cport := uint16(closed.Addr().(*net.TCPAddr).Port)
	closed.Close()
	if rep, _ := try([]byte{5, 1, 0, socksIPv4, 127, 0, 0, 1, byte(cport >> 8), byte(cport)}); rep[1] != socksRefused {
		t.Errorf("a closed port: reply %v, want code %d (refused)", rep, socksRefused)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	rest, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v (stderr %q)", err, rest)
	}
}
