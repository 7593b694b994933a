package ssh

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/skeema/knownhosts"
	"github.com/spindle-rpc/spindle/errkind"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// hostKeyChecker checks a server's host key against known_hosts files
// under a policy.
type hostKeyChecker struct {
	policy HostKeyPolicy
	files  []string // all files read
	write  string   // where accept-new records a key ("" = nowhere)
	hash   bool     // hash host names in recorded lines (HashKnownHosts)
	db     *knownhosts.HostKeyDB
	log    *zap.Logger
	// confirm asks the user about an unknown key under HostKeyAsk; nil
	// refuses it.
	confirm func(question string) (string, error)

	mu  sync.Mutex
	err error // the last rejection, kept so that it survives x/crypto's wrapping
}

// policyFromConfig maps StrictHostKeyChecking to a policy; unset is ask,
// ssh's default.
func policyFromConfig(v string) HostKeyPolicy {
	switch strings.ToLower(v) {
	case "accept-new":
		return HostKeyAcceptNew
	case "no", "off", "false":
		return HostKeyOff
	case "", "ask":
		return HostKeyAsk
	default:
		return HostKeyStrict
	}
}

// newHostKeyChecker reads the known_hosts files that exist among files;
// write is the file accept-new appends to (it need not exist).
func newHostKeyChecker(policy HostKeyPolicy, files []string, write string, hash bool, log *zap.Logger) (*hostKeyChecker, error) {
	switch policy {
	case HostKeyStrict, HostKeyAcceptNew, HostKeyOff, HostKeyAsk:
	case "no", "false":
		policy = HostKeyOff
	case "", "true":
		policy = HostKeyStrict
	default:
		return nil, fmt.Errorf("unknown host key policy %q (use %q, %q, %q or %q)", policy, HostKeyStrict, HostKeyAsk, HostKeyAcceptNew, HostKeyOff)
	}
	hk := &hostKeyChecker{policy: policy, write: write, hash: hash, log: log}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			if !os.IsNotExist(err) {
				return nil, fmt.Errorf("known_hosts file %s: %w", f, err)
			}
			continue
		}
		if st.IsDir() {
			return nil, fmt.Errorf("known_hosts file %s is a directory", f)
		}
		hk.files = append(hk.files, f)
	}
	db, err := knownhosts.NewDB(hk.files...)
	if err != nil {
		return nil, fmt.Errorf("reading known_hosts (%s): %w", strings.Join(hk.files, ", "), err)
	}
	hk.db = db
	return hk, nil
}

// algorithms are the host key algorithms to ask the server for: the types
// known_hosts holds for addr (so that a server with several keys offers
// one we can check), or nil (x/crypto's defaults) for an unknown host.
func (hk *hostKeyChecker) algorithms(addr string) []string {
	if hk.policy == HostKeyOff {
		return nil
	}
	return hk.db.HostKeyAlgorithms(addr)
}

func (hk *hostKeyChecker) rejected() error {
	hk.mu.Lock()
	defer hk.mu.Unlock()
	return hk.err
}

func (hk *hostKeyChecker) reject(err error) error {
	hk.mu.Lock()
	hk.err = err
	hk.mu.Unlock()
	return err
}

// callback returns the ssh.HostKeyCallback. display names the host in
// messages (the alias as the user typed it).
func (hk *hostKeyChecker) callback(display string) gossh.HostKeyCallback {
	inner := hk.db.HostKeyCallback()
	return func(hostname string, remote net.Addr, key gossh.PublicKey) error {
		fp := gossh.FingerprintSHA256(key)
		err := inner(hostname, remote, key)
		if err == nil {
			return nil
		}
		// A key marked @revoked is refused whatever the policy, off
		// included: the user said it is compromised.
		var revoked *xknownhosts.RevokedError
		if errors.As(err, &revoked) {
			return hk.reject(fmt.Errorf("%w: the host key %s %s for %s is marked @revoked in %s:%d",
				errkind.ErrHostKey, key.Type(), fp, display, revoked.Revoked.Filename, revoked.Revoked.Line))
		}
		if hk.policy == HostKeyOff {
			hk.log.Warn("host key checking is off: accepting any host key", zap.String("host", display),
				zap.String("key", key.Type()+" "+fp))
			return nil
		}
		var ke *xknownhosts.KeyError
		if !errors.As(err, &ke) {
			return hk.reject(fmt.Errorf("%w: checking the host key of %s: %v", errkind.ErrHostKey, display, err))
		}
		if len(ke.Want) > 0 {
			w := ke.Want[0]
			hk.log.Error("REMOTE HOST IDENTIFICATION HAS CHANGED: someone could be eavesdropping (man-in-the-middle), or the host key was just changed",
				zap.String("host", display), zap.String("offered", key.Type()+" "+fp),
				zap.String("known_hosts", fmt.Sprintf("%s:%d", w.Filename, w.Line)))
			return hk.reject(fmt.Errorf("%w: HOST KEY FOR %s HAS CHANGED (offered %s %s; known_hosts has a different key at %s:%d). "+
				"Someone could be eavesdropping, or the host was reinstalled: if you are sure, remove that line (ssh-keygen -R %s) and connect again",
				errkind.ErrHostKey, display, key.Type(), fp, w.Filename, w.Line, knownhosts.Normalize(hostname)))
		}
		// Unknown host.
		switch {
		case hk.policy == HostKeyAsk && hk.confirm != nil:
			if err := hk.ask(display, key, fp); err != nil {
				return hk.reject(err)
			}
		case hk.policy != HostKeyAcceptNew:
			return hk.reject(fmt.Errorf("%w: host key for %s is not known (%s %s): add it with ssh-keyscan or use accept-new",
				errkind.ErrHostKey, display, key.Type(), fp))
		}
		if err := hk.record(hostname, key); err != nil {
			return hk.reject(fmt.Errorf("%w: recording the new host key of %s: %v", errkind.ErrHostKey, display, err))
		}
		hk.log.Warn("permanently added a new host key to known_hosts", zap.String("host", display),
			zap.String("key", key.Type()+" "+fp), zap.String("known_hosts", hk.write))
		return nil
	}
}

// askTries is how often an unclear answer is asked again (as ssh does).
const askTries = 3

// ask asks the user, as ssh does, whether to trust an unknown host key:
// yes, or the key's fingerprint pasted in, trusts it; no refuses.
func (hk *hostKeyChecker) ask(display string, key gossh.PublicKey, fp string) error {
	q := fmt.Sprintf("The authenticity of host '%s' can't be established.\n%s key fingerprint is %s.\n"+
		"Are you sure you want to continue connecting (yes/no/[fingerprint])? ", display, keyName(key.Type()), fp)
	for try := 0; try < askTries; try++ {
		a, err := hk.confirm(q)
		if err != nil {
			return fmt.Errorf("%w: host key for %s is not known (%s %s), and asking failed: %v", errkind.ErrHostKey, display, key.Type(), fp, err)
		}
		switch a = strings.TrimSpace(a); {
		case strings.EqualFold(a, "yes") || a == fp:
			return nil
		case strings.EqualFold(a, "no"):
			return fmt.Errorf("%w: host key for %s (%s %s) not accepted", errkind.ErrHostKey, display, key.Type(), fp)
		}
		q = "Please type 'yes', 'no' or the fingerprint: "
	}
	return fmt.Errorf("%w: host key for %s (%s %s) not accepted: no clear answer", errkind.ErrHostKey, display, key.Type(), fp)
}

// keyName is ssh's short name for a key type, as its question shows it.
func keyName(t string) string {
	switch {
	case strings.Contains(t, "ed25519"):
		return "ED25519"
	case strings.Contains(t, "ecdsa"):
		return "ECDSA"
	case strings.Contains(t, "rsa"):
		return "RSA"
	}
	return t
}

// record appends a known_hosts line for hostname ("host:port") to hk.write,
// creating the file 0600 and its directory 0700.
func (hk *hostKeyChecker) record(hostname string, key gossh.PublicKey) error {
	if hk.write == "" {
		return errors.New("no known_hosts file to write to")
	}
	if err := os.MkdirAll(filepath.Dir(hk.write), 0o700); err != nil {
		return err
	}
	addr := knownhosts.Normalize(hostname)
	if hk.hash {
		addr = xknownhosts.HashHostname(addr)
	}
	line := knownhosts.Line([]string{addr}, key)
	f, err := os.OpenFile(hk.write, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	// A file that does not end in a newline would merge our line into its
	// last one.
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		buf := make([]byte, 1)
		if r, err := os.Open(hk.write); err == nil {
			if _, err := r.ReadAt(buf, st.Size()-1); err == nil && buf[0] != '\n' {
				line = "\n" + line
			}
			r.Close()
		}
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
