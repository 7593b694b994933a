package cli

import (
	stdctx "context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spindle-rpc/spindle/services/tunnel"
)

// SOCKS5 (RFC 1928), the part ssh -D serves: no authentication, CONNECT,
// to IPv4, IPv6 and domain-name addresses (resolved by the target).
const (
	socksVersion     = 5
	socksNoAuth      = 0
	socksNoMethod    = 0xff
	socksConnect     = 1
	socksIPv4        = 1
	socksDomain      = 3
	socksIPv6        = 4
	socksOK          = 0
	socksFailure     = 1
	socksUnreachable = 4
	socksRefused     = 5
	socksBadCommand  = 7
	socksBadAddress  = 8
)

// errSOCKS is a request the proxy cannot serve; rep says the reply code.
type errSOCKS struct {
	rep byte
	msg string
}

func (e *errSOCKS) Error() string { return e.msg }

// readSOCKSGreeting reads the client's methods and says whether it offers
// no authentication, the only method served.
func readSOCKSGreeting(r io.Reader) (bool, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return false, err
	}
	if hdr[0] != socksVersion {
		return false, fmt.Errorf("SOCKS version %d (only 5 is served)", hdr[0])
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return false, err
	}
	for _, m := range methods {
		if m == socksNoAuth {
			return true, nil
		}
	}
	return false, nil
}

// readSOCKSRequest reads a request and returns the host:port to connect
// to; an *errSOCKS names the reply for a request it cannot serve.
func readSOCKSRequest(r io.Reader) (string, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", err
	}
	if hdr[0] != socksVersion {
		return "", fmt.Errorf("SOCKS version %d in a request", hdr[0])
	}
	var host string
	switch hdr[3] {
	case socksIPv4, socksIPv6:
		ip := make(net.IP, map[byte]int{socksIPv4: 4, socksIPv6: 16}[hdr[3]])
		if _, err := io.ReadFull(r, ip); err != nil {
			return "", err
		}
		host = ip.String()
	case socksDomain:
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return "", err
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(r, name); err != nil {
			return "", err
		}
		if !validHostName(string(name)) {
			return "", &errSOCKS{socksBadAddress, fmt.Sprintf("SOCKS: bad host name %q", name)}
		}
		host = string(name)
	default:
		return "", &errSOCKS{socksBadAddress, fmt.Sprintf("SOCKS: address type %d", hdr[3])}
	}
	var port [2]byte
	if _, err := io.ReadFull(r, port[:]); err != nil {
		return "", err
	}
	if hdr[1] != socksConnect {
		return "", &errSOCKS{socksBadCommand, fmt.Sprintf("SOCKS: command %d (only CONNECT is served)", hdr[1])}
	}
	return net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:])))), nil
}

// validHostName accepts a DNS name (letters, digits, '-', '_', '.') or an
// IP address literal, which clients sometimes send as a name.
func validHostName(h string) bool {
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil {
		return true
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// socksReply writes a reply with an unspecified bound address.
func socksReply(w io.Writer, rep byte) error {
	_, err := w.Write([]byte{socksVersion, rep, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

// socksDialReply maps a failed tunnel.Dial to a reply code.
func socksDialReply(err error) byte {
	switch msg := err.Error(); {
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(msg, "connection refused"):
		return socksRefused
	case strings.Contains(msg, "no route") || strings.Contains(msg, "unreachable") || strings.Contains(msg, "no such host"):
		return socksUnreachable
	}
	return socksFailure
}

// serveSOCKS accepts on ln until it is closed and serves each client as a
// SOCKS5 proxy whose connections s's target makes.
func (g *globals) serveSOCKS(ctx stdctx.Context, s *session, ln net.Listener, wg *sync.WaitGroup) {
	acceptEach(ctx, ln, wg, func(conn net.Conn) {
		ok, err := readSOCKSGreeting(conn)
		if err != nil {
			return
		}
		if !ok {
			conn.Write([]byte{socksVersion, socksNoMethod})
			return
		}
		if _, err := conn.Write([]byte{socksVersion, socksNoAuth}); err != nil {
			return
		}
		addr, err := readSOCKSRequest(conn)
		if err != nil {
			var se *errSOCKS
			if errors.As(err, &se) {
				socksReply(conn, se.rep)
			}
			return
		}
		rc, err := tunnel.Dial(ctx, s.cx, "tcp", addr)
		if err != nil {
			socksReply(conn, socksDialReply(err))
			g.forwardReport("forward (SOCKS) %s → %s: %v", ln.Addr(), addr, err)
			return
		}
		defer rc.Close()
		stop := stdctx.AfterFunc(ctx, func() { rc.Close() })
		defer stop()
		if socksReply(conn, socksOK) != nil {
			return
		}
		tunnel.Splice(conn, rc)
	})
}
