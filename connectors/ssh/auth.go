package ssh

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"sync"

	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// prompter asks the user for secrets through Options.PasswordPrompt. pause
// and resume (set once the connection exists) suspend the handshake
// deadline while the user types.
type prompter struct {
	fn func(prompt string) (string, error)
	// tries is how often a password or passphrase is asked before giving
	// up (ssh_config's NumberOfPasswordPrompts); 0 means ssh's 3.
	tries  int
	mu     sync.Mutex
	pause  func()
	resume func()
}

func (p *prompter) ok() bool { return p != nil && p.fn != nil }

func (p *prompter) maxTries() int {
	if p == nil || p.tries <= 0 {
		return defaultPasswordPrompts
	}
	return p.tries
}

// defaultPasswordPrompts is ssh's NumberOfPasswordPrompts default.
const defaultPasswordPrompts = 3

func (p *prompter) ask(prompt string) (string, error) { return p.askWith(p.fn, prompt) }

// askWith asks through fn, with the handshake deadline suspended as for
// a password: a host-key question takes as long as the user needs.
func (p *prompter) askWith(fn func(string) (string, error), prompt string) (string, error) {
	p.mu.Lock()
	pause, resume := p.pause, p.resume
	p.mu.Unlock()
	if pause != nil {
		pause()
		defer resume()
	}
	return fn(prompt)
}

func (p *prompter) setDeadlineHooks(pause, resume func()) {
	p.mu.Lock()
	p.pause, p.resume = pause, resume
	p.mu.Unlock()
}

// authSet is everything offered to the server, in order.
type authSet struct {
	signers []gossh.Signer // publickey, identity files first
	methods []gossh.AuthMethod
	names   []string                    // methods' SSH names, in order
	named   map[string]gossh.AuthMethod // methods by their SSH name
	agent   io.Closer                   // the ssh-agent connection, closed after the handshake
}

// defaultMethods is the order ssh tries the methods Spindle has.
var defaultMethods = []string{"publickey", "keyboard-interactive", "password"}

// method adds m under its SSH name.
func (a *authSet) method(name string, m gossh.AuthMethod) {
	if a.named == nil {
		a.named = map[string]gossh.AuthMethod{}
	}
	a.named[name] = m
	a.methods = append(a.methods, m)
	a.names = append(a.names, name)
}

// maxEagerKeys is how many public keys may be tried before the "none"
// request (firstMethodFirst): on a server that allows no public key each
// is a failed attempt, and servers give up after MaxAuthTries (6 by
// default).
const maxEagerKeys = 2

// firstMethodFirst says whether authentication may open with the first
// method instead of "none" (ClientConfig.FirstMethodFirst): when it is
// publickey with at most maxEagerKeys keys. Most logins are by key, and
// they save the round trip of "none"; a password-only server costs the
// keys' failed attempts instead. Other methods wait for the server's
// list, as they might ask the user for a password the server would
// not take.
func (a *authSet) firstMethodFirst() bool {
	return len(a.names) > 0 && a.names[0] == "publickey" && len(a.signers) <= maxEagerKeys
}

// eagerSigner is a key whose login is signed at once, without first
// asking the server whether it would take the key: the patched x/crypto's
// SignerWithoutQuery (upstream's ignores the method and asks first).
type eagerSigner struct{ gossh.Signer }

func (eagerSigner) SignWithoutQuery() bool { return true }

// signsAtOnce makes s an eagerSigner when signing costs nothing but the
// signature: an Ed25519 or ECDSA key (one signature algorithm each,
// nothing to negotiate), from a file or the ssh-agent, that asks for no
// passphrase (lazySigner) or touch (security keys), and that is not
// handed to the agent after its first signature (AddKeysToAgent: not
// before the server took it). Only the first key gets it: the one most
// likely taken, and at most one signature spent on a server that takes
// none.
func signsAtOnce(s gossh.Signer) gossh.Signer {
	switch s.(type) {
	case *lazySigner, *addingSigner:
		return s
	}
	switch s.PublicKey().Type() {
	case gossh.KeyAlgoED25519, gossh.KeyAlgoECDSA256, gossh.KeyAlgoECDSA384, gossh.KeyAlgoECDSA521:
		return eagerSigner{s}
	}
	return s
}

// tune sets cfg.FirstMethodFirst by name: the field is the patched
// x/crypto's (third_party/xcrypto), and a program that builds Spindle
// with upstream x/crypto has none, and works as before.
func (a *authSet) tune(cfg *gossh.ClientConfig) {
	if f := reflect.ValueOf(cfg).Elem().FieldByName("FirstMethodFirst"); f.IsValid() && f.Kind() == reflect.Bool {
		f.SetBool(a.firstMethodFirst())
	}
}

// only keeps the methods named, in that order (ssh_config's
// PreferredAuthentications, less the ones turned off).
func (a *authSet) only(names []string) {
	a.methods, a.names = a.methods[:0], a.names[:0]
	for _, n := range names {
		if m, ok := a.named[n]; ok {
			a.methods = append(a.methods, m)
			a.names = append(a.names, n)
		}
	}
}

func (a *authSet) close() {
	if a.agent != nil {
		a.agent.Close()
	}
}

// agentSocket resolves IdentityAgent as ssh does: unset or
// "SSH_AUTH_SOCK" means $SSH_AUTH_SOCK, "none" no agent, "$VAR" (not
// "${VAR}…") the variable's value, anything else a socket path (~, ${VAR}
// and %-tokens already expanded by resolveConfig or settle).
func agentSocket(identityAgent string) string {
	switch {
	case identityAgent == "" || identityAgent == "SSH_AUTH_SOCK":
		return os.Getenv("SSH_AUTH_SOCK")
	case identityAgent == "none":
		return ""
	case legacyEnvRef(identityAgent):
		return os.Getenv(identityAgent[1:])
	}
	return identityAgent
}

// dialAgent connects to the ssh-agent at sock (agentSocket), or returns
// nil.
func dialAgent(sock string, log *zap.Logger) (agent.ExtendedAgent, io.Closer) {
	if sock == "" {
		return nil, nil
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		log.Debug("ssh-agent unreachable; not using it", zap.String("socket", sock), zap.Error(err))
		return nil, nil
	}
	return agent.NewClient(c), c
}

// identity is one identity file, as far as we could load it.
type identity struct {
	path string
	pub  gossh.PublicKey // nil when unknown
}

// buildAuth assembles the auth methods: public keys (identity files first,
// then the other ssh-agent keys unless identitiesOnly), then
// keyboard-interactive and password when a password or a prompt exists.
// explicit identity files (Options.IdentityFiles) that do not exist are
// warned about; config/default ones are skipped quietly.
//
// adder, when not nil, hands keys loaded from files to the agent once they
// have signed (AddKeysToAgent).
func buildAuth(ag agent.ExtendedAgent, explicit, fromConfig, certFiles []string, identitiesOnly bool,
	password string, pr *prompter, adder *keyAdder, userHost string, log *zap.Logger) (*authSet, error) {
	as := &authSet{}
	seen := map[string]bool{}
	add := func(s gossh.Signer) bool {
		k := string(s.PublicKey().Marshal())
		if seen[k] {
			return false
		}
		seen[k] = true
		as.signers = append(as.signers, s)
		return true
	}

	var agentSigners []gossh.Signer
	if ag != nil {
		ss, err := ag.Signers()
		if err != nil {
			log.Debug("ssh-agent: cannot list keys", zap.Error(err))
		}
		agentSigners = ss
	}
	agentFor := func(pub gossh.PublicKey) gossh.Signer {
		if pub == nil {
			return nil
		}
		for _, s := range agentSigners {
			if bytes.Equal(s.PublicKey().Marshal(), pub.Marshal()) {
				return s
			}
		}
		return nil
	}

	files := make([]string, 0, len(explicit)+len(fromConfig))
	isExplicit := map[string]bool{}
	for _, f := range explicit {
		f = expandHome(f)
		isExplicit[f] = true
		files = append(files, f)
	}
	for _, f := range fromConfig {
		files = append(files, expandHome(f))
	}
	done := map[string]bool{}
	for _, path := range files {
		if done[path] {
			continue
		}
		done[path] = true
		s, err := loadIdentity(path, agentFor, pr, adder, log)
		if err != nil {
			if isExplicit[path] {
				log.Warn("identity file skipped", zap.String("file", path), zap.Error(err))
			} else if !os.IsNotExist(err) {
				log.Debug("identity file skipped", zap.String("file", path), zap.Error(err))
			}
			continue
		}
		if s == nil {
			continue
		}
		add(s)
		// A certificate beside the key (ssh's KEY-cert.pub) is offered too.
		if cert := loadCert(path + "-cert.pub"); cert != nil {
			if cs, err := gossh.NewCertSigner(cert, s); err == nil {
				add(cs)
			}
		}
	}
	// CertificateFile: each certificate goes with the private key it
	// certifies, from an identity file or the ssh-agent, as in ssh.
	for _, path := range certFiles {
		path = expandHome(path)
		cert := loadCert(path)
		if cert == nil {
			log.Debug("certificate file skipped: missing, or not an OpenSSH certificate", zap.String("file", path))
			continue
		}
		key := cert.Key.Marshal()
		var signer gossh.Signer
		for _, s := range append(append([]gossh.Signer{}, as.signers...), agentSigners...) {
			if bytes.Equal(s.PublicKey().Marshal(), key) {
				signer = s
				break
			}
		}
		if signer == nil {
			log.Warn("certificate file skipped: no identity file or ssh-agent key for the key it certifies", zap.String("file", path))
			continue
		}
		if cs, err := gossh.NewCertSigner(cert, signer); err == nil {
			add(cs)
		}
	}
	if !identitiesOnly {
		for _, s := range agentSigners {
			add(s)
		}
	}
	if len(as.signers) > 0 {
		signers := append([]gossh.Signer{signsAtOnce(as.signers[0])}, as.signers[1:]...)
		as.method("publickey", gossh.PublicKeysCallback(func() ([]gossh.Signer, error) { return signers, nil }))
	}

	if password != "" || pr.ok() {
		pa := &passwordAsker{given: password, pr: pr, prompt: userHost + "'s password: "}
		getPassword := pa.next
		as.method("keyboard-interactive", gossh.KeyboardInteractive(func(name, instruction string, questions []string, echos []bool) ([]string, error) {
			answers := make([]string, len(questions))
			for i, q := range questions {
				lq := strings.ToLower(q)
				switch {
				case !echos[i] && (strings.Contains(lq, "password") || strings.Contains(lq, "passphrase")):
					a, err := getPassword()
					if err != nil {
						return nil, err
					}
					answers[i] = a
				case pr.ok():
					prompt := q
					if instruction != "" {
						prompt = instruction + "\n" + q
					}
					a, err := pr.ask(prompt)
					if err != nil {
						return nil, err
					}
					answers[i] = a
				default:
					return nil, fmt.Errorf("the server asks %q and no PasswordPrompt is set", q)
				}
			}
			return answers, nil
		}))
		as.method("password", gossh.PasswordCallback(getPassword))
		pa.retry(as)
	}
	return as, nil
}

// errPasswordsRefused ends authentication once the user has typed
// NumberOfPasswordPrompts passwords and the server refused each.
var errPasswordsRefused = errors.New("permission denied: the server refused each password typed")

// passwordAsker answers a server's password questions, as ssh does: a
// given password (Options.Password) as is, every time; else the user's
// answer to a prompt, asked again after each refusal ("Permission denied,
// please try again."), up to tries prompts in all across
// keyboard-interactive and password.
type passwordAsker struct {
	given  string
	pr     *prompter
	prompt string

	mu    sync.Mutex
	asked int
}

func (a *passwordAsker) next() (string, error) {
	if a.given != "" {
		return a.given, nil
	}
	if !a.pr.ok() {
		return "", errors.New("no password given")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.asked >= a.pr.maxTries() {
		return "", errPasswordsRefused
	}
	prompt := a.prompt
	if a.asked > 0 {
		prompt = "Permission denied, please try again.\n" + prompt
	}
	a.asked++
	return a.pr.ask(prompt)
}

// passwordTries is how often a password method may be tried: once for a
// given password, NumberOfPasswordPrompts for one the user types.
func passwordTries(given string, pr *prompter) int {
	if given != "" || !pr.ok() {
		return 1
	}
	return pr.maxTries()
}

// retry lets the user try again after a refused password: the password
// and keyboard-interactive methods are retried while the prompts last. A
// given password is not: the same one again would only use up the
// server's MaxAuthTries.
func (a *passwordAsker) retry(as *authSet) { as.retryPasswords(passwordTries(a.given, a.pr)) }

// retryPasswords lets the password and keyboard-interactive methods be
// tried up to tries times. x/crypto may call a method once more than
// that: the passwordAsker then ends authentication with
// errPasswordsRefused, which says why, instead of x/crypto's "no
// supported methods remain".
func (a *authSet) retryPasswords(tries int) {
	if tries <= 1 {
		return
	}
	for i, name := range a.names {
		if name == "password" || name == "keyboard-interactive" {
			a.methods[i] = gossh.RetryableAuthMethod(a.methods[i], tries+1)
			a.named[name] = a.methods[i]
		}
	}
}

// loadIdentity returns a signer for the private key at path: the ssh-agent's
// signer when the agent holds the same key (no passphrase needed), the key
// itself when unencrypted, a signer that asks for the passphrase the first
// time the server accepts the key when it is encrypted and a prompt exists,
// or nil (skipped) when it is encrypted and nothing can unlock it.
func loadIdentity(path string, agentFor func(gossh.PublicKey) gossh.Signer, pr *prompter, adder *keyAdder, log *zap.Logger) (gossh.Signer, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		// No private key, but a .pub whose key the agent holds works too.
		if pub := loadPub(path + ".pub"); pub != nil {
			if s := agentFor(pub); s != nil {
				return s, nil
			}
		}
		return nil, err
	}
	raw, err := gossh.ParseRawPrivateKey(pem)
	if err == nil {
		s, err := gossh.NewSignerFromKey(raw)
		if err != nil {
			return nil, fmt.Errorf("cannot use private key: %w", err)
		}
		return adder.wrap(path, raw, s), nil
	}
	var missing *gossh.PassphraseMissingError
	if !errors.As(err, &missing) {
		return nil, fmt.Errorf("cannot parse private key: %w", err)
	}
	pub := missing.PublicKey
	if pub == nil {
		pub = loadPub(path + ".pub")
	}
	if s := agentFor(pub); s != nil {
		log.Debug("encrypted identity file: using its key from ssh-agent", zap.String("file", path))
		return s, nil
	}
	if !pr.ok() {
		log.Debug("encrypted identity file skipped: no passphrase prompt", zap.String("file", path))
		return nil, nil
	}
	if pub == nil {
		// Unknown public key: decrypt now, there is no way to offer it lazily.
		return decrypt(path, pem, pr, adder)
	}
	return &lazySigner{path: path, pem: pem, pub: pub, pr: pr, adder: adder}, nil
}

func loadPub(path string) gossh.PublicKey {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	pub, _, _, _, err := gossh.ParseAuthorizedKey(b)
	if err != nil {
		return nil
	}
	return pub
}

func loadCert(path string) *gossh.Certificate {
	pub := loadPub(path)
	if c, ok := pub.(*gossh.Certificate); ok {
		return c
	}
	return nil
}

// decrypt asks for the passphrase of an encrypted key, up to
// NumberOfPasswordPrompts times. The passphrase never appears in an error.
func decrypt(path string, pem []byte, pr *prompter, adder *keyAdder) (gossh.Signer, error) {
	for try := 0; try < pr.maxTries(); try++ {
		pass, err := pr.ask(fmt.Sprintf("Enter passphrase for key '%s': ", path))
		if err != nil {
			return nil, fmt.Errorf("passphrase for %s: %w", path, err)
		}
		raw, err := gossh.ParseRawPrivateKeyWithPassphrase(pem, []byte(pass))
		if err == nil {
			s, err := gossh.NewSignerFromKey(raw)
			if err != nil {
				return nil, fmt.Errorf("cannot use %s: %v", path, err)
			}
			return adder.wrap(path, raw, s), nil
		}
		if !errors.Is(err, x509.IncorrectPasswordError) {
			return nil, fmt.Errorf("cannot decrypt %s: %v", path, err)
		}
	}
	return nil, fmt.Errorf("cannot decrypt %s: wrong passphrase", path)
}

// lazySigner is an encrypted identity whose public key is known: it is
// offered to the server as is and decrypted (asking the passphrase) only
// when the server accepts it, like ssh does.
type lazySigner struct {
	path  string
	pem   []byte
	pub   gossh.PublicKey
	pr    *prompter
	adder *keyAdder

	mu   sync.Mutex
	real gossh.Signer
	err  error
}

func (l *lazySigner) PublicKey() gossh.PublicKey { return l.pub }

func (l *lazySigner) signer() (gossh.Signer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.real == nil && l.err == nil {
		l.real, l.err = decrypt(l.path, l.pem, l.pr, l.adder)
		l.pem = nil
	}
	return l.real, l.err
}

func (l *lazySigner) Sign(rand io.Reader, data []byte) (*gossh.Signature, error) {
	s, err := l.signer()
	if err != nil {
		return nil, err
	}
	return s.Sign(rand, data)
}

func (l *lazySigner) SignWithAlgorithm(rand io.Reader, data []byte, algorithm string) (*gossh.Signature, error) {
	s, err := l.signer()
	if err != nil {
		return nil, err
	}
	if as, ok := s.(gossh.AlgorithmSigner); ok {
		return as.SignWithAlgorithm(rand, data, algorithm)
	}
	if algorithm != "" && algorithm != s.PublicKey().Type() {
		return nil, fmt.Errorf("key %s cannot sign with %s", l.path, algorithm)
	}
	return s.Sign(rand, data)
}

var _ gossh.AlgorithmSigner = (*lazySigner)(nil)
