package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/wire"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

func init() {
	connectors.Register("ssh", func() connectors.Remote { return &Hop{} })
}

// Hop is an SSH connection made by an agent, as Options.Delegate resolved
// it on the controller: where to dial, as whom, and how long to wait. It
// carries no secret: keys, passwords and known_hosts are served by the
// controller on the StartRequest's Helper circuit.
type Hop struct {
	Display           string   `msgpack:"display"`
	Addr              string   `msgpack:"addr"`  // host:port to dial
	KnownAddr         string   `msgpack:"known"` // host:port looked up in known_hosts
	User              string   `msgpack:"user"`
	HostKeyAlgorithms []string `msgpack:"hkalgs,omitempty"`
	// Ciphers, MACs and KeyExchanges are the controller's resolved lists
	// (nil: x/crypto's defaults).
	Ciphers           []string      `msgpack:"ciphers,omitempty"`
	MACs              []string      `msgpack:"macs,omitempty"`
	KeyExchanges      []string      `msgpack:"kex,omitempty"`
	Timeout           time.Duration `msgpack:"timeout"`
	KeepaliveInterval time.Duration `msgpack:"ka"`
	KeepaliveCountMax int           `msgpack:"kacount"`
	Attempts          int           `msgpack:"attempts,omitempty"` // TCP connects to try (ConnectionAttempts)
	Password          bool          `msgpack:"pw,omitempty"`       // the helper can answer password prompts
	PasswordTries     int           `msgpack:"pwtries,omitempty"`
	// Env is sent with the hop's session (NAME=VALUE: the controller's
	// SendEnv variables and SetEnv).
	Env []string `msgpack:"env,omitempty"`
	// Methods are the auth methods to try, in order (ssh_config's
	// PreferredAuthentications less those turned off); empty: all.
	Methods []string `msgpack:"methods,omitempty"`
	// OwnConnection: dial a connection for this hop alone instead of
	// sharing one with the agent's other hops to the same user@host:port.
	OwnConnection bool `msgpack:"own,omitempty"`
	// Trust summarises the controller's host-key and auth settings for
	// this hop (trustKey): hops share a connection only if it is equal.
	Trust       string `msgpack:"trust,omitempty"`
	ContextName string `msgpack:"name,omitempty"`
	// Agents are the controller's agents by platform; the helper sends
	// the bytes of one the target needs and this agent lacks.
	Agents []bootstrap.Manifest `msgpack:"agents,omitempty"`
}

// Kind implements connectors.Remote.
func (h Hop) Kind() string { return "ssh" }

// Name implements connectors.Connector.
func (h Hop) Name() string {
	if h.ContextName != "" {
		return h.ContextName
	}
	return "ssh:" + h.Display
}

// Start implements connectors.Connector on the agent that makes the hop.
func (h Hop) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	if req.Helper == nil {
		return nil, errors.New("an SSH hop started by an agent needs the controller's keys: start it with Context.Connect(ssh.Options{…})")
	}
	log := req.Logger
	if log == nil {
		log = zap.NewNop()
	}
	name := req.Name
	if name == "" {
		name = h.Name()
	}
	lent := agent.NewClient(req.Helper)
	signers, err := lent.Signers()
	if err != nil {
		return nil, fmt.Errorf("ssh %s: the controller's keys: %w", h.Display, err)
	}
	// The controller may put a question to its user (a password, an
	// unknown host key): as for the controller's own connections, the
	// user's time does not count against the handshake's ConnectTimeout,
	// which runs here, on the agent.
	pr := &prompter{}
	askUser := func(typ string, req any) (r *helperReply, err error) {
		pr.askWith(func(string) (string, error) {
			r, err = ask(lent, typ, req)
			return "", err
		}, "")
		return r, err
	}
	auth := authSet{signers: signers}
	if len(signers) > 0 {
		auth.method("publickey", gossh.PublicKeys(signers...))
	}
	if h.Password {
		pw := func() (string, error) {
			r, err := askUser(extPassword, nil)
			if err != nil {
				return "", err
			}
			return r.Password, nil
		}
		auth.method("keyboard-interactive", gossh.KeyboardInteractive(func(_, _ string, questions []string, echos []bool) ([]string, error) {
			answers := make([]string, len(questions))
			for i, q := range questions {
				lq := strings.ToLower(q)
				if echos[i] || !(strings.Contains(lq, "password") || strings.Contains(lq, "passphrase")) {
					return nil, fmt.Errorf("the server asks %q, which a hop cannot answer", q)
				}
				a, err := pw()
				if err != nil {
					return nil, err
				}
				answers[i] = a
			}
			return answers, nil
		}))
		auth.method("password", gossh.PasswordCallback(pw))
		auth.retryPasswords(h.PasswordTries)
	}
	if len(h.Methods) > 0 {
		auth.only(h.Methods)
	}
	methods := auth.methods
	var hostKeyErr error
	cfg := &gossh.ClientConfig{
		User:              h.User,
		Auth:              methods,
		HostKeyAlgorithms: h.HostKeyAlgorithms,
		Config:            gossh.Config{Ciphers: h.Ciphers, MACs: h.MACs, KeyExchanges: h.KeyExchanges},
		HostKeyCallback: func(hostname string, remote net.Addr, key gossh.PublicKey) error {
			r, err := askUser(extHostKey, &hostKeyRequest{Hostname: hostname, Remote: remote.String(), Key: key.Marshal()})
			if err == nil && r.Err != "" {
				err = errkind.Errorf(errkind.ErrHostKey, "%s", r.Err)
			}
			hostKeyErr = err
			return err
		},
		BannerCallback: func(msg string) error {
			log.Debug("ssh banner", zap.String("host", h.Display), zap.String("banner", strings.TrimSpace(msg)))
			return nil
		},
	}
	auth.tune(cfg)

	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	kaCount := h.KeepaliveCountMax
	if kaCount <= 0 {
		kaCount = DefaultKeepaliveCountMax
	}
	var dialAck func() // set when this hop dialled the connection it uses
	dial := func() (*link, error) {
		conn, took, err := dialTCP(ctx, h.Addr, timeout, max(h.Attempts, 1), log)
		if err != nil {
			return nil, err
		}
		start := time.Now().Add(-took)
		conn, started := withQuickAck(conn)
		client, err := handshake(ctx, conn, h.KnownAddr, cfg, timeout-time.Since(start), pr)
		if err != nil {
			if hostKeyErr != nil {
				return nil, hostKeyErr
			}
			s := &settings{display: h.Display, user: h.User, timeout: timeout}
			return nil, classifyHandshake(err, &hostKeyChecker{}, s, h.Addr)
		}
		l := &link{client: client, started: started, name: h.Display, env: h.Env, stop: make(chan struct{})}
		l.qa, _ = conn.(*quickAckConn)
		if h.KeepaliveInterval > 0 {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.keepalive(h.KeepaliveInterval, kaCount, log.With(zap.String("host", h.Display)))
			}()
		}
		log.Debug("ssh hop connected", zap.String("host", h.Display), zap.String("addr", h.Addr), zap.String("user", h.User))
		dialAck = started
		return l, nil
	}
	src := bootstrap.WithManifests(req.Agent, h.Agents, func(goos, goarch string) ([]byte, error) {
		r, err := ask(lent, extAgent, &agentRequest{OS: goos, Arch: goarch})
		if err == nil && r.Err != "" {
			err = errors.New(r.Err)
		}
		if err != nil {
			return nil, err
		}
		return r.Gz, nil
	})

	if h.OwnConnection {
		l, err := dial()
		if err != nil {
			return nil, err
		}
		return l.startOwnAgent(ctx, &req, src, name, log)
	}
	key := hopKey{addr: h.Addr, known: h.KnownAddr, user: h.User, hostKeyAlgs: strings.Join(h.HostKeyAlgorithms, ","), trust: h.Trust,
		crypto:  strings.Join(h.Ciphers, ",") + ";" + strings.Join(h.MACs, ",") + ";" + strings.Join(h.KeyExchanges, ","),
		timeout: timeout, kaInterval: h.KeepaliveInterval, kaCount: kaCount}
	for attempt := 1; ; attempt++ {
		dialAck = nil
		s, err := hopConns.acquire(ctx, key, dial)
		if err != nil {
			return nil, err
		}
		l := s.conn
		ack := dialAck
		if ack == nil {
			ack = l.ackAgain()
			log.Debug("ssh hop shares a connection", zap.String("host", h.Display), zap.String("user", h.User), zap.String("context", name))
		}
		release := sync.OnceValue(func() error {
			hopConns.release(key, s, true) // the hop's session is closed
			return nil
		})
		c, err := l.startAgentFresh(ctx, &req, src, name, h.Env, log, release)
		ack()
		if err == nil {
			return c, nil
		}
		// A refusal on a connection that other hops use or are starting
		// on is MaxSessions: use or dial another. On one this hop has to
		// itself, a refusal is the server's verdict.
		retry := sessionRefused(err) && hopConns.users(s) > 1 && attempt < maxSessionRetries
		if retry {
			hopConns.markFull(s)
		}
		hopConns.release(key, s, !retry)
		if !retry {
			return nil, err
		}
		log.Debug("ssh server refused one more session on a shared connection", zap.String("host", h.Display), zap.Error(err))
	}
}

// maxSessionRetries bounds how many shared connections a hop tries
// before it gives up with the last refusal.
const maxSessionRetries = 8

// hopKey is what hops must have in common to share a connection: where
// and as whom it is made, and how it is checked and kept alive.
type hopKey struct {
	addr, known, user, hostKeyAlgs, trust string
	crypto                                string // Ciphers;MACs;KeyExchanges
	timeout, kaInterval                   time.Duration
	kaCount                               int
}

// hopConns are the SSH connections this process's hops share.
var hopConns = func() *sharePool[hopKey, *link] {
	p := newSharePool[hopKey](func(l *link) { l.Close() }, func(l *link) { l.client.Wait() })
	// OpenSSH's default MaxSessions: the eleventh of many hops starting
	// together dials a second connection at once, in parallel with the
	// first, rather than after the server refused it a session.
	p.maxUsers = sessionsPerConnection
	return p
}()

// sessionsPerConnection is how many hops share one connection at most.
const sessionsPerConnection = 10

// ask sends one extension request to the controller's helper.
func ask(lent agent.ExtendedAgent, typ string, req any) (*helperReply, error) {
	var body []byte
	if req != nil {
		b, err := wire.Marshal(req)
		if err != nil {
			return nil, err
		}
		body = b
	}
	raw, err := lent.Extension(typ, body)
	if err != nil {
		return nil, fmt.Errorf("asking the controller (%s): %w", typ, err)
	}
	if len(raw) == 0 || raw[0] != agentSuccess {
		return nil, fmt.Errorf("asking the controller (%s): malformed reply", typ)
	}
	var r helperReply
	if err := wire.Unmarshal(raw[1:], &r); err != nil {
		return nil, fmt.Errorf("asking the controller (%s): %w", typ, err)
	}
	if r.Kind == "auth" {
		return nil, errkind.Errorf(errkind.ErrAuth, "%s", r.Err)
	}
	return &r, nil
}
