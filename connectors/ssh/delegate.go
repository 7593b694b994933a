package ssh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/internal/wire"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// An SSH hop started by an agent (bastion → web) dials from the agent's
// network, but everything secret or trusted stays on the controller:
// ssh_config is resolved here, the hop's SSH client signs through an
// ssh-agent served by the controller on a circuit (agent forwarding over
// the bus, alive only while the hop starts), and the host key is checked
// against the controller's known_hosts through an extension request on
// that same circuit. accept-new records new keys in the controller's file.

// Extension request types on the helper circuit. Their replies are
// agentSuccess followed by a msgpack helperReply.
const (
	extHostKey  = "hostkey@spindle-rpc"
	extPassword = "password@spindle-rpc"
	// extAgent asks for another platform's agent (gzip), which the hop's
	// target needs and the hop's agent, built for its own platform, lacks.
	extAgent = "agent@spindle-rpc"
	// agentSuccess is SSH_AGENT_SUCCESS: the first byte of a reply that
	// x/crypto's agent client passes through as data.
	agentSuccess = 6
)

type hostKeyRequest struct {
	Hostname string `msgpack:"host"`
	Remote   string `msgpack:"remote"`
	Key      []byte `msgpack:"key"` // wire format
}

type agentRequest struct {
	OS   string `msgpack:"os"`
	Arch string `msgpack:"arch"`
}

type helperReply struct {
	Err      string `msgpack:"err,omitempty"`
	Kind     string `msgpack:"kind,omitempty"` // "hostkey", "auth", "agent"
	Password string `msgpack:"pw,omitempty"`
	Gz       []byte `msgpack:"gz,omitempty"` // extAgent: the agent, gzipped
}

var _ connectors.Delegated = Options{}

// Delegate implements connectors.Delegated: it resolves o on the
// controller and returns the Hop an agent runs, plus the helper that lends
// it the controller's keys, password and known_hosts.
func (o Options) Delegate(ctx context.Context, log *zap.Logger) (connectors.Remote, connectors.Helper, error) {
	if log == nil {
		log = zap.NewNop()
	}
	s, err := o.settle(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	if s.proxyJump != "" {
		// The chain of agents is the jump: the previous hop dials.
		log.Debug("ProxyJump is not used for a hop started by an agent", zap.String("host", s.display), zap.String("ProxyJump", s.proxyJump))
	}
	if s.proxyCommand != "" {
		// Likewise; and the command is the controller machine's (its
		// programs, its credentials), not the intermediary's to run.
		log.Debug("ProxyCommand is not used for a hop started by an agent", zap.String("host", s.display), zap.String("ProxyCommand", s.proxyCommand))
	}
	hk, err := newHostKeyChecker(s.policy, s.knownFiles, s.knownWrite, s.hashKnown, log)
	if err != nil {
		return nil, nil, err
	}
	pr := s.prompter(o.PasswordPrompt)
	if o.HostKeyPrompt != nil && !s.batchMode {
		// The hop's agent pauses its handshake deadline while the
		// controller asks (Hop.Start), so the question can wait for the
		// user as it does for a direct connection.
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
		return nil, nil, err
	}
	h := &Hop{
		Display:           s.display,
		Addr:              net.JoinHostPort(s.hostname, strconv.Itoa(s.port)),
		KnownAddr:         s.knownAddr,
		User:              s.user,
		HostKeyAlgorithms: s.crypto.hostKeys(hk.algorithms(s.knownAddr)),
		Ciphers:           s.crypto.Ciphers,
		MACs:              s.crypto.MACs,
		KeyExchanges:      s.crypto.KeyExchanges,
		Timeout:           s.timeout,
		KeepaliveInterval: s.kaInterval,
		KeepaliveCountMax: s.kaCount,
		Attempts:          s.attempts,
		Password:          o.Password != "" || pr.ok(),
		PasswordTries:     passwordTries(o.Password, pr),
		Methods:           s.methods,
		Env:               s.env,
		ContextName:       o.ContextName,
		OwnConnection:     o.OwnConnection,
		Trust:             trustKey(s, o),
	}
	agents := o.Agent
	if agents == nil {
		agents = bootstrap.Default()
	}
	// The hop's agent knows every platform's agent by its manifest and
	// asks for the bytes only if the target needs one it lacks.
	h.Agents = bootstrap.Manifests(agents)
	helper := &delegateHelper{auth: auth, hk: hk, agents: agents, display: s.display, log: log,
		password: &passwordAsker{given: o.Password, pr: pr, prompt: s.user + "@" + s.display + "'s password: "}}
	return h, helper, nil
}

// delegateHelper is an ssh-agent (read-only: list and sign) with two
// extensions, served to one hop while it starts.
type delegateHelper struct {
	auth     *authSet
	hk       *hostKeyChecker
	agents   bootstrap.Source
	display  string
	password *passwordAsker // asked once per password the hop's server asks for
	log      *zap.Logger
}

func (h *delegateHelper) Serve(conn net.Conn) {
	if err := agent.ServeAgent(h, conn); err != nil && !errors.Is(err, net.ErrClosed) {
		h.log.Debug("ssh hop helper ended", zap.String("host", h.display), zap.Error(err))
	}
}

func (h *delegateHelper) Close() error {
	h.auth.close()
	return nil
}

func (h *delegateHelper) signer(key gossh.PublicKey) gossh.Signer {
	want := string(key.Marshal())
	for _, s := range h.auth.signers {
		if string(s.PublicKey().Marshal()) == want {
			return s
		}
	}
	return nil
}

func (h *delegateHelper) List() ([]*agent.Key, error) {
	keys := make([]*agent.Key, 0, len(h.auth.signers))
	for _, s := range h.auth.signers {
		pub := s.PublicKey()
		keys = append(keys, &agent.Key{Format: pub.Type(), Blob: pub.Marshal(), Comment: "spindle controller"})
	}
	return keys, nil
}

func (h *delegateHelper) Sign(key gossh.PublicKey, data []byte) (*gossh.Signature, error) {
	return h.SignWithFlags(key, data, 0)
}

func (h *delegateHelper) SignWithFlags(key gossh.PublicKey, data []byte, flags agent.SignatureFlags) (*gossh.Signature, error) {
	s := h.signer(key)
	if s == nil {
		return nil, errors.New("no such key")
	}
	h.log.Debug("signing for an ssh hop", zap.String("host", h.display), zap.String("key", gossh.FingerprintSHA256(key)))
	if as, ok := s.(gossh.AlgorithmSigner); ok {
		switch {
		case flags&agent.SignatureFlagRsaSha512 != 0:
			return as.SignWithAlgorithm(nil, data, gossh.KeyAlgoRSASHA512)
		case flags&agent.SignatureFlagRsaSha256 != 0:
			return as.SignWithAlgorithm(nil, data, gossh.KeyAlgoRSASHA256)
		}
	}
	return s.Sign(nil, data)
}

func (h *delegateHelper) Signers() ([]gossh.Signer, error) { return h.auth.signers, nil }

var errReadOnly = errors.New("the controller's keys are read-only to a hop")

func (h *delegateHelper) Add(agent.AddedKey) error     { return errReadOnly }
func (h *delegateHelper) Remove(gossh.PublicKey) error { return errReadOnly }
func (h *delegateHelper) RemoveAll() error             { return errReadOnly }
func (h *delegateHelper) Lock([]byte) error            { return errReadOnly }
func (h *delegateHelper) Unlock([]byte) error          { return errReadOnly }

func (h *delegateHelper) Extension(typ string, contents []byte) ([]byte, error) {
	var r helperReply
	switch typ {
	case extHostKey:
		var req hostKeyRequest
		if err := wire.Unmarshal(contents, &req); err != nil {
			return nil, err
		}
		key, err := gossh.ParsePublicKey(req.Key)
		if err != nil {
			return nil, err
		}
		remote, _ := net.ResolveTCPAddr("tcp", req.Remote)
		if remote == nil {
			remote = &net.TCPAddr{}
		}
		if err := h.hk.callback(h.display)(req.Hostname, remote, key); err != nil {
			r = helperReply{Err: err.Error(), Kind: "hostkey"}
		}
	case extPassword:
		if pw, err := h.password.next(); err != nil {
			r = helperReply{Err: err.Error(), Kind: "auth"}
		} else {
			r.Password = pw
		}
	case extAgent:
		var req agentRequest
		if err := wire.Unmarshal(contents, &req); err != nil {
			return nil, err
		}
		h.log.Debug("sending an agent to a hop", zap.String("host", h.display), zap.String("platform", req.OS+"/"+req.Arch))
		bin, err := h.agents.Agent(req.OS, req.Arch)
		if err == nil {
			r.Gz, err = bin.Gzip()
		}
		if err != nil {
			r = helperReply{Err: err.Error(), Kind: "agent"}
		}
	default:
		return nil, agent.ErrExtensionUnsupported
	}
	b, err := wire.Marshal(&r)
	if err != nil {
		return nil, fmt.Errorf("encode %s reply: %w", typ, err)
	}
	return append([]byte{agentSuccess}, b...), nil
}

// trustKey summarises how a hop's connection is checked and authenticated
// (host-key policy, known_hosts files, identities and the ssh-agent that
// holds them; not the password, only whether there is one). Hops share a
// connection only if theirs are equal: a hop with strict checking must not
// ride on a connection that another hop accepted with the policy off, nor
// one that asked for a given key on one authenticated with another.
func trustKey(s *settings, o Options) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%v\x00%q\x00%q\x00%q\x00%v", s.policy, s.hashKnown, s.knownFiles, s.knownWrite,
		append(append(append([]string{}, o.IdentityFiles...), s.identityFiles...), s.certFiles...), s.identitiesOnly)
	fmt.Fprintf(h, "\x00%v\x00%q\x00%q", o.Password != "" || o.PasswordPrompt != nil, s.agentSocket, s.methods)
	return hex.EncodeToString(h.Sum(nil)[:16])
}
