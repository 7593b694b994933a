package ssh

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// addKeys is ssh_config's AddKeysToAgent: whether a key loaded from a
// file (its passphrase asked for once) is handed to the ssh-agent once it
// has signed for a login, so that the next connection finds it there and
// asks nothing, as with ssh.
type addKeys struct {
	on       bool
	ask      bool          // ask the user before adding ("ask")
	confirm  bool          // the agent asks before each use ("confirm", ssh-add -c)
	lifetime time.Duration // 0: the agent's default (ssh-add -t)
}

// parseAddKeys reads AddKeysToAgent as ssh_config writes it (yes, no,
// ask, confirm, each optionally followed by a time, or a time alone) and
// as `ssh -G` prints it (true, false, ask, confirm, seconds).
func parseAddKeys(v string) (addKeys, error) {
	f := strings.Fields(strings.ToLower(v))
	var a addKeys
	if len(f) == 0 || len(f) > 2 {
		return a, fmt.Errorf("bad AddKeysToAgent %q (want yes, no, ask or confirm, optionally with a time)", v)
	}
	switch f[0] {
	case "no", "false":
		if len(f) > 1 {
			return a, fmt.Errorf("bad AddKeysToAgent %q: no takes no time", v)
		}
		return a, nil
	case "yes", "true":
		a.on = true
	case "ask":
		a.on, a.ask = true, true
	case "confirm":
		a.on, a.confirm = true, true
	default:
		d, err := seconds(f[0])
		if err != nil || d <= 0 || len(f) > 1 {
			return addKeys{}, fmt.Errorf("bad AddKeysToAgent %q (want yes, no, ask or confirm, optionally with a time)", v)
		}
		return addKeys{on: true, lifetime: d}, nil
	}
	if len(f) == 2 {
		d, err := seconds(f[1])
		if err != nil || d <= 0 {
			return addKeys{}, fmt.Errorf("bad AddKeysToAgent %q: bad time %q", v, f[1])
		}
		a.lifetime = d
	}
	return a, nil
}

// keyAdder adds keys loaded from files to an ssh-agent under a policy.
type keyAdder struct {
	ag     agent.ExtendedAgent
	policy addKeys
	// ask puts the "ask" question to the user; nil refuses.
	ask func(question string) (string, error)
	log *zap.Logger
}

// newKeyAdder returns nil when nothing is to be added.
func newKeyAdder(ag agent.ExtendedAgent, policy addKeys, ask func(string) (string, error), log *zap.Logger) *keyAdder {
	if ag == nil || !policy.on {
		return nil
	}
	return &keyAdder{ag: ag, policy: policy, ask: ask, log: log}
}

// add hands key (loaded from path) to the agent. A failure is logged,
// not returned: the login goes on with the key in hand.
func (k *keyAdder) add(path string, key any, pub gossh.PublicKey) {
	fp := gossh.FingerprintSHA256(pub)
	if k.policy.ask {
		if k.ask == nil {
			k.log.Debug("AddKeysToAgent ask: nobody to ask; key not added", zap.String("file", path))
			return
		}
		a, err := k.ask(fmt.Sprintf("Add key %s (%s) to agent? (yes/no) ", path, fp))
		if err != nil || !strings.EqualFold(strings.TrimSpace(a), "yes") {
			return
		}
	}
	err := k.ag.Add(agent.AddedKey{PrivateKey: key, Comment: path,
		LifetimeSecs: uint32(k.policy.lifetime / time.Second), ConfirmBeforeUse: k.policy.confirm})
	if err != nil {
		k.log.Warn("AddKeysToAgent: the ssh-agent refused the key", zap.String("file", path), zap.Error(err))
		return
	}
	k.log.Info("identity added to the ssh-agent", zap.String("file", path), zap.String("key", pub.Type()+" "+fp))
}

// addingSigner is a key loaded from a file that a keyAdder hands to the
// agent the first time it signs: when the server has accepted it.
type addingSigner struct {
	gossh.AlgorithmSigner
	once sync.Once
	add  func()
}

func (a *addingSigner) Sign(rand io.Reader, data []byte) (*gossh.Signature, error) {
	sig, err := a.AlgorithmSigner.Sign(rand, data)
	if err == nil {
		a.once.Do(a.add)
	}
	return sig, err
}

func (a *addingSigner) SignWithAlgorithm(rand io.Reader, data []byte, algorithm string) (*gossh.Signature, error) {
	sig, err := a.AlgorithmSigner.SignWithAlgorithm(rand, data, algorithm)
	if err == nil {
		a.once.Do(a.add)
	}
	return sig, err
}

// wrap returns s, which signs with key loaded from path, as a signer
// that adds key to the agent after its first signature; s itself when k
// is nil or s cannot sign with a chosen algorithm.
func (k *keyAdder) wrap(path string, key any, s gossh.Signer) gossh.Signer {
	as, ok := s.(gossh.AlgorithmSigner)
	if k == nil || !ok {
		return s
	}
	return &addingSigner{AlgorithmSigner: as, add: func() { k.add(path, key, s.PublicKey()) }}
}
