package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// Defaults, like ssh's where it has one.
const (
	DefaultConnectTimeout    = 30 * time.Second
	DefaultKeepaliveInterval = 15 * time.Second
	DefaultKeepaliveCountMax = 3
	maxJumpDepth             = 8
)

// link is one authenticated SSH connection, with its keepalive and the
// jump connection it runs through (if any).
type link struct {
	client *gossh.Client
	// started ends the connection's quick ACKs (withQuickAck) once its
	// agent is up.
	started func()
	// qa is the connection's quick-ACK switch; nil if it is not TCP.
	qa   *quickAckConn
	jump *link
	name string
	env  []string // sent with the session of the agent started on a connection of its own
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

// Close stops the keepalive, closes the connection (failing every session
// on it) and then the jump host's connection, and waits for every goroutine
// the link started.
func (l *link) Close() error {
	l.once.Do(func() {
		close(l.stop)
		err := l.client.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
		l.wg.Wait()
		if l.jump != nil {
			l.jump.Close()
		}
		l.err = err
	})
	return l.err
}

// settings are Options merged with ssh_config: what one hop will use.
type settings struct {
	display         string // the host as the user named it
	hostname        string
	port            int
	user            string
	knownAddr       string // host:port looked up in known_hosts
	timeout         time.Duration
	kaInterval      time.Duration // <0: off
	kaCount         int
	attempts        int // TCP connects to try, a second apart (ConnectionAttempts)
	policy          HostKeyPolicy
	knownFiles      []string
	knownWrite      string
	hashKnown       bool
	identitiesOnly  bool
	identityFiles   []string // from config, after Options.IdentityFiles
	certFiles       []string // Options.CertificateFiles, then config's
	batchMode       bool     // no prompts (ssh_config's BatchMode)
	env             []string // NAME=VALUE for the session (SendEnv, SetEnv)
	methods         []string // the auth methods to try, in order
	agentSocket     string   // the ssh-agent's socket; "" for none
	forwardAgent    string   // the socket of the ssh-agent to forward; "" for none
	addKeys         addKeys
	forwards        Forwards // ssh_config's LocalForward, RemoteForward, DynamicForward
	escapeChar      string   // ssh_config's EscapeChar; "" unset
	proxyJump       string
	proxyCommand    string // expanded; "" when proxyJump is set or none applies
	proxySource     string // where proxyCommand came from, for messages
	crypto          cryptoPrefs
	passwordPrompts int // NumberOfPasswordPrompts; 0: ssh's default, -1: none
}

// splitTarget parses "[user@]host[:port]" (a ProxyJump element, or
// Options.Host). A bracketed IPv6 literal may carry a port.
func splitTarget(s string) (user, host string, port int, err error) {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		user, s = s[:i], s[i+1:]
	}
	host = s
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		h, p, serr := net.SplitHostPort(s)
		if serr == nil {
			n, perr := strconv.Atoi(p)
			if perr != nil || n <= 0 || n > 65535 {
				return "", "", 0, fmt.Errorf("bad port in %q", s)
			}
			host, port = h, n
		} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			host = s[1 : len(s)-1]
		}
	}
	if host == "" {
		return "", "", 0, fmt.Errorf("no host in %q", s)
	}
	return user, host, port, nil
}

// settle resolves ssh_config for o and merges Options over it.
func (o *Options) settle(ctx context.Context, log *zap.Logger) (*settings, error) {
	if o.Host == "" {
		return nil, errors.New("no host given")
	}
	user, host, port, err := splitTarget(o.Host)
	if err != nil {
		return nil, err
	}
	if o.User != "" {
		user = o.User
	}
	if o.Port != 0 {
		port = o.Port
	}
	hc, err := resolveConfig(ctx, host, o.ConfigFile, user, port, log)
	if err != nil {
		return nil, err
	}
	s := &settings{display: host, hostname: hc.HostName, port: hc.Port, user: hc.User}
	if s.hostname == "" {
		s.hostname = host
	}
	if user != "" {
		s.user = user
	}
	if port != 0 {
		s.port = port
	}
	if s.port == 0 {
		s.port = 22
	}
	if s.user == "" {
		return nil, fmt.Errorf("no user name for %s: set User", host)
	}
	keyHost := s.hostname
	if hc.HostKeyAlias != "" && hc.HostKeyAlias != "none" {
		keyHost = hc.HostKeyAlias
	}
	s.knownAddr = net.JoinHostPort(keyHost, strconv.Itoa(s.port))

	s.timeout = firstDuration(o.ConnectTimeout, hc.ConnectTimeout, DefaultConnectTimeout)
	s.kaInterval = firstDuration(o.KeepaliveInterval, hc.ServerAliveInterval, DefaultKeepaliveInterval)
	s.attempts = o.ConnectionAttempts
	if s.attempts <= 0 {
		s.attempts = max(hc.ConnectionAttempts, 1)
	}
	s.kaCount = o.KeepaliveCountMax
	if s.kaCount <= 0 {
		s.kaCount = hc.ServerAliveCountMax
	}
	if s.kaCount <= 0 {
		s.kaCount = DefaultKeepaliveCountMax
	}

	s.policy = o.HostKeyPolicy
	if s.policy == "" {
		s.policy = policyFromConfig(hc.StrictHostKeyChecking)
	}
	s.hashKnown = hc.HashKnownHosts
	if len(o.KnownHostsFiles) > 0 {
		for _, f := range o.KnownHostsFiles {
			s.knownFiles = append(s.knownFiles, expandHome(f))
		}
		s.knownWrite = s.knownFiles[0]
	} else {
		user := hc.UserKnownHostsFiles
		if len(user) == 0 && hc.Source != "ssh -G" {
			user = []string{filepath.Join(homeDir(), ".ssh", "known_hosts")}
		}
		for _, f := range user {
			s.knownFiles = append(s.knownFiles, expandHome(f))
		}
		if len(s.knownFiles) > 0 {
			s.knownWrite = s.knownFiles[0]
		}
		s.knownFiles = append(s.knownFiles, hc.GlobalKnownHostsFiles...)
	}

	s.identitiesOnly = hc.IdentitiesOnly
	if o.IdentitiesOnly != nil {
		s.identitiesOnly = *o.IdentitiesOnly
	}
	s.identityFiles = hc.IdentityFiles
	if len(o.IdentityFiles) > 0 {
		// Like ssh -i: OpenSSH's default key files count only when no
		// identity is given, and ssh -G lists them either way. Offering
		// them too could use up the server's MaxAuthTries.
		s.identityFiles = withoutDefaultIdentities(hc.IdentityFiles)
	}

	s.certFiles = append(append([]string{}, o.CertificateFiles...), hc.CertificateFiles...)
	s.batchMode = hc.BatchMode
	s.passwordPrompts = hc.PasswordPrompts
	s.env = sessionEnv(os.Environ(), append(slices.Clone(hc.SendEnv), o.SendEnv...), append(slices.Clone(hc.SetEnv), o.SetEnv...))
	s.methods = hc.PreferredMethods
	if o.PreferredAuthentications != nil {
		s.methods = o.PreferredAuthentications
	}
	if s.methods == nil {
		s.methods = defaultMethods
	}
	s.methods = slices.DeleteFunc(slices.Clone(s.methods), func(m string) bool { return slices.Contains(hc.NoMethods, m) })

	var dropped []string
	s.crypto, dropped, err = resolveCrypto(algorithmSpecs{o.Ciphers, o.MACs, o.KexAlgorithms, o.HostKeyAlgorithms}, hc)
	if err != nil {
		return nil, err
	}
	if len(dropped) > 0 {
		log.Debug("ssh algorithms Spindle does not implement, skipped", zap.String("host", host), zap.Strings("skipped", dropped))
	}

	identityAgent := hc.IdentityAgent
	if o.IdentityAgent != "" {
		identityAgent = expandSocket(o.IdentityAgent, nil)
	}
	s.agentSocket = agentSocket(identityAgent)
	s.forwards = configForwards(hc)
	s.escapeChar = hc.EscapeChar
	addKeys, where := hc.AddKeysToAgent, "ssh config ("+hc.Source+")"
	if o.AddKeysToAgent != "" {
		addKeys, where = o.AddKeysToAgent, "Options.AddKeysToAgent"
	}
	if addKeys != "" {
		if s.addKeys, err = parseAddKeys(addKeys); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	// ForwardAgent yes forwards the agent ssh itself uses (IdentityAgent's);
	// a socket names another.
	forward := hc.ForwardAgent
	if o.ForwardAgent != "" {
		forward = expandSocket(o.ForwardAgent, nil)
	}
	switch {
	case yes(forward):
		s.forwardAgent = s.agentSocket
	case !isYesNo(forward):
		s.forwardAgent = agentSocket(forward)
	}

	// ProxyJump and ProxyCommand compete as in ssh: the first one set
	// wins, and Options (ssh's -o, -J) come before any config file; ssh -G
	// has already dropped the loser of a config file's two.
	command := ""
	switch {
	case o.ProxyJump != "":
		s.proxyJump = o.ProxyJump
	case o.ProxyCommand != "":
		command, s.proxySource = o.ProxyCommand, "Options.ProxyCommand"
	case hc.ProxyJump != "" && hc.ProxyJump != "none":
		s.proxyJump = hc.ProxyJump
	default:
		command, s.proxySource = hc.ProxyCommand, "ssh config ("+hc.Source+")"
	}
	if s.proxyJump == "none" {
		s.proxyJump = ""
	}
	if command != "" && command != "none" {
		if s.proxyCommand, err = expandProxyCommand(command, s, keyHost); err != nil {
			return nil, fmt.Errorf("%s: %w", s.proxySource, err)
		}
	}
	return s, nil
}

// prompter asks through fn unless BatchMode forbids asking.
func (s *settings) prompter(fn func(string) (string, error)) *prompter {
	if s.batchMode || s.passwordPrompts < 0 {
		fn = nil
	}
	return &prompter{fn: fn, tries: s.passwordPrompts}
}

// keyAdder is what hands keys loaded from files to ag (AddKeysToAgent);
// nil when nothing is to be added. Its "ask" question goes through
// HostKeyPrompt, the CLI's echoed question, unless BatchMode forbids it.
func (s *settings) keyAdder(ag agent.ExtendedAgent, o Options, pr *prompter, log *zap.Logger) *keyAdder {
	var ask func(string) (string, error)
	if o.HostKeyPrompt != nil && !s.batchMode {
		ask = func(q string) (string, error) { return pr.askWith(o.HostKeyPrompt, q) }
	}
	return newKeyAdder(ag, s.addKeys, ask, log)
}

// firstDuration returns the first non-zero value; a negative one means off.
func firstDuration(ds ...time.Duration) time.Duration {
	for _, d := range ds {
		if d != 0 {
			return d
		}
	}
	return 0
}

// connect resolves, dials (directly or through ProxyJump), checks the host
// key, authenticates and starts keepalives. depth counts jump hops.
func connect(ctx context.Context, o Options, log *zap.Logger, depth int) (*link, error) {
	if depth > maxJumpDepth {
		return nil, fmt.Errorf("more than %d ProxyJump hops: is there a loop in your ssh config?", maxJumpDepth)
	}
	s, err := o.settle(ctx, log)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(s.hostname, strconv.Itoa(s.port))

	hk, err := newHostKeyChecker(s.policy, s.knownFiles, s.knownWrite, s.hashKnown, log)
	if err != nil {
		return nil, err
	}

	pr := s.prompter(o.PasswordPrompt)
	if o.HostKeyPrompt != nil && !s.batchMode {
		hk.confirm = func(q string) (string, error) { return pr.askWith(o.HostKeyPrompt, q) }
	}
	ag, agConn := dialAgent(s.agentSocket, log)
	auth, err := buildAuth(ag, o.IdentityFiles, s.identityFiles, s.certFiles, s.identitiesOnly, o.Password, pr,
		s.keyAdder(ag, o, pr, log), s.user+"@"+s.display, log)
	if agConn != nil {
		auth.agent = agConn
	}
	if err != nil {
		auth.close()
		return nil, err
	}
	defer auth.close()
	auth.only(s.methods)
	if len(auth.methods) == 0 {
		log.Debug("no keys, password or prompt: only the \"none\" method can succeed", zap.String("host", s.display))
	}

	var jump *link
	var proxy *proxyConn
	var conn net.Conn
	start := time.Now()
	if s.proxyJump != "" {
		hops := strings.Split(s.proxyJump, ",")
		last := strings.TrimSpace(hops[len(hops)-1])
		ju, jh, jp, err := splitTarget(last)
		if err != nil {
			return nil, fmt.Errorf("ProxyJump %q: %w", s.proxyJump, err)
		}
		jo := Options{Host: jh, User: ju, Port: jp, ConfigFile: o.ConfigFile, PasswordPrompt: o.PasswordPrompt, HostKeyPrompt: o.HostKeyPrompt,
			KnownHostsFiles: o.KnownHostsFiles, HostKeyPolicy: o.HostKeyPolicy, ConnectTimeout: o.ConnectTimeout,
			KeepaliveInterval: o.KeepaliveInterval, KeepaliveCountMax: o.KeepaliveCountMax}
		if len(hops) > 1 {
			jo.ProxyJump = strings.Join(hops[:len(hops)-1], ",")
		}
		log.Debug("connecting through jump host", zap.String("host", s.display), zap.String("jump", last))
		jump, err = connect(ctx, jo, log, depth+1)
		if err != nil {
			return nil, fmt.Errorf("jump host %s: %w", last, err)
		}
		start = time.Now()
		dctx, cancel := context.WithTimeout(ctx, s.timeout)
		conn, err = jump.client.DialContext(dctx, "tcp", addr)
		cancel()
		if err != nil {
			jump.Close()
			if dctx.Err() != nil && ctx.Err() == nil {
				return nil, timeoutError(fmt.Sprintf("connect to %s through %s: timed out after %v (ConnectTimeout)", addr, last, s.timeout))
			}
			return nil, fmt.Errorf("connect to %s through jump host %s: %w", addr, last, err)
		}
	} else if s.proxyCommand != "" {
		log.Debug("connecting through ProxyCommand", zap.String("host", s.display), zap.String("proxy_command", s.proxyCommand))
		if proxy, err = dialProxyCommand(s.proxyCommand, s.proxySource, s.display, log); err != nil {
			return nil, err
		}
		conn = proxy
	} else {
		var took time.Duration
		if conn, took, err = dialTCP(ctx, addr, s.timeout, s.attempts, log); err != nil {
			return nil, err
		}
		start = time.Now().Add(-took) // the handshake's share of ConnectTimeout excludes earlier attempts
	}

	cfg := &gossh.ClientConfig{
		User:            s.user,
		Auth:            auth.methods,
		HostKeyCallback: hk.callback(s.display),
		BannerCallback: func(msg string) error {
			log.Debug("ssh banner", zap.String("host", s.display), zap.String("banner", strings.TrimSpace(msg)))
			return nil
		},
	}
	s.crypto.apply(cfg, hk.algorithms(s.knownAddr))
	auth.tune(cfg)
	remaining := s.timeout - time.Since(start)
	conn, started := withQuickAck(conn)
	client, err := handshake(ctx, conn, s.knownAddr, cfg, remaining, pr)
	if err != nil {
		if jump != nil {
			jump.Close()
		}
		err = classifyHandshake(err, hk, s, addr)
		if proxy != nil {
			err = proxy.explain(err)
		}
		return nil, err
	}
	l := &link{client: client, started: started, jump: jump, name: s.display, env: s.env, stop: make(chan struct{})}
	l.qa, _ = conn.(*quickAckConn)
	if s.kaInterval > 0 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.keepalive(s.kaInterval, s.kaCount, log.With(zap.String("host", s.display)))
		}()
	}
	log.Debug("ssh connected", zap.String("host", s.display), zap.String("addr", addr), zap.String("user", s.user))
	return l, nil
}

// errTimedOut marks a handshake that hit ConnectTimeout.
var errTimedOut = errors.New("timed out")

// handshake runs the SSH handshake and authentication on conn, bounded by
// timeout (paused while a PasswordPrompt is waiting for the user) and by
// ctx. x/crypto's ClientConfig.Timeout would bound only the TCP connect.
func handshake(ctx context.Context, conn net.Conn, addr string, cfg *gossh.ClientConfig, timeout time.Duration, pr *prompter) (*gossh.Client, error) {
	if timeout <= 0 {
		timeout = time.Millisecond
	}
	var timedOut atomic.Bool
	var mu sync.Mutex
	deadline := time.Now().Add(timeout)
	var left time.Duration
	timer := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		conn.Close()
	})
	pr.setDeadlineHooks(func() {
		mu.Lock()
		defer mu.Unlock()
		if timer.Stop() {
			left = time.Until(deadline)
		}
	}, func() {
		mu.Lock()
		defer mu.Unlock()
		if left > 0 && !timedOut.Load() {
			deadline = time.Now().Add(left)
			timer.Reset(left)
			left = 0
		}
	})
	stopCtx := context.AfterFunc(ctx, func() { conn.Close() })
	c, chans, reqs, err := gossh.NewClientConn(conn, addr, cfg)
	stopCtx()
	mu.Lock()
	timer.Stop()
	left = 0
	mu.Unlock()
	pr.setDeadlineHooks(nil, nil)
	if err != nil {
		conn.Close()
		if timedOut.Load() {
			return nil, fmt.Errorf("%w: %w", errTimedOut, err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, err
	}
	if timedOut.Load() {
		c.Close()
		return nil, errTimedOut
	}
	return gossh.NewClient(c, chans, reqs), nil
}

// timeoutError is a timeout that errors.Is both errkind.ErrTimeout and
// context.DeadlineExceeded.
func timeoutError(msg string) error {
	return &errkind.Error{Kind: errkind.ErrTimeout, Msg: msg, Err: context.DeadlineExceeded}
}

// dialTCP connects to addr, trying attempts times a connectionRetry
// apart as ssh does with ConnectionAttempts (a host still booting), each
// try bounded by timeout. The last try's error is returned, saying how
// many there were. took is how long the successful try took: ConnectTimeout
// bounds it and the handshake together.
func dialTCP(ctx context.Context, addr string, timeout time.Duration, attempts int, log *zap.Logger) (net.Conn, time.Duration, error) {
	d := net.Dialer{Timeout: timeout}
	for try := 1; ; try++ {
		start := time.Now()
		conn, err := dialer(ctx, &d, addr)
		if err == nil {
			return conn, time.Since(start), nil
		}
		err = dialError(ctx, addr, timeout, err)
		if try >= attempts || ctx.Err() != nil {
			if attempts > 1 {
				err = &errkind.Error{Msg: fmt.Sprintf("%v (%d attempts, ConnectionAttempts)", err, try), Err: err}
			}
			return nil, 0, err
		}
		log.Debug("connect failed; trying again (ConnectionAttempts)", zap.String("addr", addr), zap.Int("attempt", try), zap.Error(err))
		select {
		case <-ctx.Done():
		case <-time.After(connectionRetry):
		}
	}
}

// connectionRetry is the pause between ConnectionAttempts (ssh's: one
// second); dialer makes one try. Tests replace both.
var (
	connectionRetry = time.Second
	dialer          = func(ctx context.Context, d *net.Dialer, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	}
)

// dialError turns a net.Dialer error into "connect to ADDR: REASON".
func dialError(ctx context.Context, addr string, timeout time.Duration, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("connect to %s: %w", addr, ctx.Err())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return timeoutError(fmt.Sprintf("connect to %s: timed out after %v (ConnectTimeout)", addr, timeout))
	}
	reason := err
	var se *os.SyscallError
	if errors.As(err, &se) {
		reason = se.Err
	} else {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			reason = oe.Err
		}
	}
	return &errkind.Error{Msg: fmt.Sprintf("connect to %s: %v", addr, reason), Err: err}
}

// classifyHandshake gives a handshake failure its kind and a message that
// says what to do.
func classifyHandshake(err error, hk *hostKeyChecker, s *settings, addr string) error {
	if hkErr := hk.rejected(); hkErr != nil {
		return hkErr
	}
	if errors.Is(err, errTimedOut) {
		return timeoutError(fmt.Sprintf("ssh handshake with %s did not complete within %v (ConnectTimeout): is an SSH server listening there?", addr, s.timeout))
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("ssh handshake with %s: %w", addr, err)
	}
	if errors.Is(err, errPasswordsRefused) {
		return &errkind.Error{Kind: errkind.ErrAuth, Err: err, Msg: fmt.Sprintf(
			"authentication as %s@%s failed: the server refused each of the %d passwords typed (NumberOfPasswordPrompts)",
			s.user, s.display, (&prompter{tries: s.passwordPrompts}).maxTries())}
	}
	if hint, ok := negotiationHint(err); ok {
		return &errkind.Error{Msg: fmt.Sprintf("ssh handshake with %s: %s", addr, hint), Err: err}
	}
	msg := err.Error()
	if strings.Contains(msg, "unable to authenticate") || strings.Contains(msg, "no supported methods remain") ||
		strings.Contains(msg, "Too many authentication failures") {
		return &errkind.Error{Kind: errkind.ErrAuth, Err: err, Msg: fmt.Sprintf(
			"authentication as %s@%s failed (%s): check the user name, load your key into ssh-agent (ssh-add) or set IdentityFiles, or give a password",
			s.user, s.display, strings.TrimPrefix(msg, "ssh: handshake failed: "))}
	}
	return fmt.Errorf("ssh handshake with %s: %w", addr, err)
}

// keepalive sends keepalive@openssh.com every interval while the link is
// idle, one request at a time. Each interval that passes without the reply
// counts as one missed keepalive; after count in a row it closes the
// client, so that the link's reads fail and every pending call fails as
// disconnected. It returns when l.stop is closed or the client dies; the
// request goroutine it leaves behind ends when the client closes, which
// link.Close does before waiting for l.wg.
func (l *link) keepalive(interval time.Duration, count int, log *zap.Logger) {
	idle := time.NewTimer(interval)
	defer idle.Stop()
	wait := time.NewTimer(interval)
	defer wait.Stop()
	fails := 0
	var reply chan error // the outstanding request, if any
	for {
		if reply == nil {
			select {
			case <-l.stop:
				return
			case <-idle.C:
			}
			reply = make(chan error, 1)
			l.wg.Add(1)
			go func(reply chan<- error) {
				defer l.wg.Done()
				_, _, err := l.client.SendRequest("keepalive@openssh.com", true, nil)
				reply <- err
			}(reply)
		}
		wait.Reset(interval)
		select {
		case <-l.stop:
			return
		case err := <-reply:
			reply = nil
			if err != nil {
				log.Debug("ssh connection closed", zap.Error(err))
				return
			}
			fails = 0
			idle.Reset(interval)
			continue
		case <-wait.C:
		}
		fails++
		log.Debug("ssh keepalive unanswered", zap.Int("missed", fails), zap.Int("max", count))
		if fails >= count {
			log.Warn("ssh server stopped answering keepalives: closing the connection",
				zap.Duration("interval", interval), zap.Int("missed", fails))
			l.client.Close()
			return
		}
	}
}
