package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skeema/knownhosts"
	"github.com/spindle-rpc/spindle/errkind"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

func newSigner(t *testing.T) gossh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var remoteAddr = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 22}

func checkKey(t *testing.T, hk *hostKeyChecker, hostport string, key gossh.PublicKey) error {
	t.Helper()
	return hk.callback(strings.Split(hostport, ":")[0])(hostport, remoteAddr, key)
}

func TestHostKeyPolicies(t *testing.T) {
	dir := t.TempDir()
	kh := filepath.Join(dir, "known_hosts")
	hashedKey, portKey, otherKey, caKey := newSigner(t), newSigner(t), newSigner(t), newSigner(t)
	content := "# comment\n" +
		knownhosts.Line([]string{xknownhosts.HashHostname("hashed.example.com")}, hashedKey.PublicKey()) + "\n" +
		knownhosts.Line([]string{knownhosts.Normalize("alt.example.com:2222")}, portKey.PublicKey()) + "\n" +
		"@cert-authority *.ca.example.com " + string(gossh.MarshalAuthorizedKey(caKey.PublicKey()))
	writeFile(t, kh, content)

	hk, err := newHostKeyChecker(HostKeyStrict, []string{kh, filepath.Join(dir, "absent")}, kh, false, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	// Hashed entry.
	if err := checkKey(t, hk, "hashed.example.com:22", hashedKey.PublicKey()); err != nil {
		t.Fatalf("hashed entry: %v", err)
	}
	// [host]:port entry: known on its port, unknown on 22.
	if err := checkKey(t, hk, "alt.example.com:2222", portKey.PublicKey()); err != nil {
		t.Fatalf("[host]:port entry: %v", err)
	}
	err = checkKey(t, hk, "alt.example.com:22", portKey.PublicKey())
	if !errors.Is(err, errkind.ErrHostKey) || !strings.Contains(err.Error(), "host key for alt.example.com is not known") ||
		!strings.Contains(err.Error(), "ssh-keyscan or use accept-new") {
		t.Fatalf("unknown: %v", err)
	}
	// Changed: names the file and line of the stored key.
	err = checkKey(t, hk, "alt.example.com:2222", otherKey.PublicKey())
	if !errors.Is(err, errkind.ErrHostKey) || !strings.Contains(err.Error(), "HAS CHANGED") ||
		!strings.Contains(err.Error(), fmt.Sprintf("%s:3", kh)) {
		t.Fatalf("changed: %v", err)
	}
	if hk.rejected() != err {
		t.Fatalf("rejected() = %v", hk.rejected())
	}
	// Algorithms for a known host are its key's type; none for unknown.
	if got := hk.algorithms("alt.example.com:2222"); len(got) != 1 || got[0] != gossh.KeyAlgoED25519 {
		t.Fatalf("algorithms = %v", got)
	}
	if got := hk.algorithms("nowhere.example.com:22"); len(got) != 0 {
		t.Fatalf("algorithms(unknown) = %v", got)
	}

	// @cert-authority: a host certificate signed by the CA is accepted.
	hostKey := newSigner(t)
	cert := &gossh.Certificate{Key: hostKey.PublicKey(), CertType: gossh.HostCert, ValidPrincipals: []string{"web.ca.example.com"},
		ValidBefore: gossh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, caKey); err != nil {
		t.Fatal(err)
	}
	if err := checkKey(t, hk, "web.ca.example.com:22", cert); err != nil {
		t.Fatalf("cert-authority: %v", err)
	}
	if algos := hk.algorithms("web.ca.example.com:22"); len(algos) == 0 || !strings.Contains(algos[0], "cert") {
		t.Fatalf("cert-authority algorithms = %v", algos)
	}
	if err := checkKey(t, hk, "web.ca.example.com:22", hostKey.PublicKey()); !errors.Is(err, errkind.ErrHostKey) {
		t.Fatalf("plain key for a CA-only host: %v", err)
	}

	// Off accepts anything.
	off, err := newHostKeyChecker(HostKeyOff, []string{kh}, kh, false, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := checkKey(t, off, "alt.example.com:2222", otherKey.PublicKey()); err != nil {
		t.Fatalf("off: %v", err)
	}
	if off.algorithms("alt.example.com:2222") != nil {
		t.Fatal("off: algorithms restricted")
	}
	if _, err := newHostKeyChecker("sometimes", nil, "", false, zap.NewNop()); err == nil {
		t.Fatal("bad policy accepted")
	}
}

// A key marked @revoked is refused under every policy, naming the line,
// even for a host known with it; accept-new does not record it.
func TestHostKeyRevoked(t *testing.T) {
	dir := t.TempDir()
	kh := filepath.Join(dir, "known_hosts")
	bad, good := newSigner(t), newSigner(t)
	writeFile(t, kh, knownhosts.Line([]string{"web.example.com"}, bad.PublicKey())+"\n"+
		"@revoked * "+string(gossh.MarshalAuthorizedKey(bad.PublicKey())))
	for _, policy := range []HostKeyPolicy{HostKeyStrict, HostKeyAsk, HostKeyAcceptNew, HostKeyOff} {
		hk, err := newHostKeyChecker(policy, []string{kh}, kh, false, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		hk.confirm = func(string) (string, error) { return "yes", nil }
		for _, host := range []string{"web.example.com:22", "new.example.com:22"} {
			err := checkKey(t, hk, host, bad.PublicKey())
			if !errors.Is(err, errkind.ErrHostKey) || !strings.Contains(err.Error(), "@revoked in "+kh+":2") {
				t.Errorf("%s, %s: %v; want refused as @revoked at %s:2", policy, host, err, kh)
			}
		}
		if policy == HostKeyOff {
			if err := checkKey(t, hk, "new.example.com:22", good.PublicKey()); err != nil {
				t.Errorf("off: another key refused: %v", err)
			}
		}
	}
	if b, _ := os.ReadFile(kh); strings.Contains(string(b), "new.example.com") {
		t.Errorf("a revoked key was recorded:\n%s", b)
	}
}

func TestHostKeyAcceptNew(t *testing.T) {
	for _, hash := range []bool{false, true} {
		t.Run(fmt.Sprint("hash=", hash), func(t *testing.T) {
			dir := t.TempDir()
			kh := filepath.Join(dir, "sub", "known_hosts")
			key, other := newSigner(t), newSigner(t)
			hk, err := newHostKeyChecker(HostKeyAcceptNew, []string{kh}, kh, hash, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			if err := checkKey(t, hk, "new.example.com:2222", key.PublicKey()); err != nil {
				t.Fatalf("accept-new: %v", err)
			}
			st, err := os.Stat(kh)
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("known_hosts: %v %v", st, err)
			}
			if st, err := os.Stat(filepath.Dir(kh)); err != nil || st.Mode().Perm() != 0o700 {
				t.Fatalf("known_hosts dir: %v %v", st, err)
			}
			b, _ := os.ReadFile(kh)
			if hash != strings.HasPrefix(string(b), "|1|") || (!hash && !strings.HasPrefix(string(b), "[new.example.com]:2222 ")) {
				t.Fatalf("recorded %q", b)
			}
			// A fresh checker knows it now, and refuses a different key.
			hk2, err := newHostKeyChecker(HostKeyAcceptNew, []string{kh}, kh, hash, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			if err := checkKey(t, hk2, "new.example.com:2222", key.PublicKey()); err != nil {
				t.Fatalf("recorded key: %v", err)
			}
			err = checkKey(t, hk2, "new.example.com:2222", other.PublicKey())
			if !errors.Is(err, errkind.ErrHostKey) || !strings.Contains(err.Error(), kh+":1") {
				t.Fatalf("changed after accept-new: %v", err)
			}
		})
	}
	// A file without a final newline gets one before our line.
	dir := t.TempDir()
	kh := filepath.Join(dir, "known_hosts")
	old := newSigner(t)
	writeFile(t, kh, strings.TrimSuffix(knownhosts.Line([]string{"old.example.com"}, old.PublicKey()), "\n"))
	hk, err := newHostKeyChecker(HostKeyAcceptNew, []string{kh}, kh, false, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := checkKey(t, hk, "new.example.com:22", newSigner(t).PublicKey()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(kh)
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 2 {
		t.Fatalf("lines: %q", b)
	}
}

func TestPolicyFromConfig(t *testing.T) {
	for in, want := range map[string]HostKeyPolicy{"yes": HostKeyStrict, "ask": HostKeyAsk, "": HostKeyAsk,
		"accept-new": HostKeyAcceptNew, "no": HostKeyOff, "off": HostKeyOff} {
		if got := policyFromConfig(in); got != want {
			t.Errorf("policyFromConfig(%q) = %q, want %q", in, got, want)
		}
	}
}

// Under ask (ssh's default), an unknown key is put to the user as ssh puts
// it: yes or the fingerprint trusts and records it, no refuses, anything
// else is asked again. Without a prompt, ask refuses as strict does.
func TestHostKeyAsk(t *testing.T) {
	kh := filepath.Join(t.TempDir(), "known_hosts")
	key := newSigner(t).PublicKey()
	fp := gossh.FingerprintSHA256(key)
	for _, c := range []struct {
		answers []string
		ok      bool
	}{
		{[]string{"yes"}, true},
		{[]string{fp}, true},
		{[]string{"no"}, false},
		{[]string{"maybe", " YES "}, true},
		{[]string{"a", "b", "c"}, false},
		{nil, false}, // no prompt
	} {
		os.Remove(kh)
		hk, err := newHostKeyChecker(HostKeyAsk, []string{kh}, kh, false, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		var questions []string
		if c.answers != nil {
			hk.confirm = func(q string) (string, error) {
				questions = append(questions, q)
				if len(questions) > len(c.answers) {
					return "", errors.New("asked too often")
				}
				return c.answers[len(questions)-1], nil
			}
		}
		err = checkKey(t, hk, "web1:22", key)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, errkind.ErrHostKey) {
			t.Errorf("answers %q: %v", c.answers, err)
		}
		if c.answers != nil && !strings.Contains(questions[0], "The authenticity of host 'web1' can't be established.\nED25519 key fingerprint is "+fp) {
			t.Errorf("the question: %q", questions[0])
		}
		_, statErr := os.Stat(kh)
		if recorded := statErr == nil; recorded != c.ok {
			t.Errorf("answers %q: recorded in known_hosts: %v", c.answers, recorded)
		}
	}
}

// Over the wire: the question does not count against ConnectTimeout, the
// answer is recorded, and BatchMode never asks.
func TestHostKeyAskOverTheWire(t *testing.T) {
	isolate(t)
	srv := newTestServer(t, passwordServer("pw"), false)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	asked := 0
	o := Options{Host: "127.0.0.1", Port: srv.port, User: "tester", Password: "pw", ConfigFile: "none",
		KnownHostsFiles: []string{kh}, ConnectTimeout: 200 * time.Millisecond,
		HostKeyPrompt: func(q string) (string, error) {
			asked++
			time.Sleep(400 * time.Millisecond) // a slow reader of fingerprints
			return "yes", nil
		}}
	l, err := connect(context.Background(), o, zap.NewNop(), 0)
	if err != nil {
		t.Fatalf("ask, answered yes: %v", err)
	}
	l.Close()
	if b, _ := os.ReadFile(kh); asked != 1 || !strings.Contains(string(b), srv.hostKey.PublicKey().Type()) {
		t.Fatalf("asked %d times; known_hosts %q", asked, b)
	}
	// Known now: not asked again.
	if l, err = connect(context.Background(), o, zap.NewNop(), 0); err != nil || asked != 1 {
		t.Fatalf("second connection: %v, asked %d times", err, asked)
	}
	l.Close()

	os.Remove(kh)
	cfg := filepath.Join(t.TempDir(), "config")
	writeFile(t, cfg, "Host *\n  BatchMode yes\n")
	o.ConfigFile = cfg
	if _, err := connect(context.Background(), o, zap.NewNop(), 0); err == nil || !errors.Is(err, errkind.ErrHostKey) || asked != 1 {
		t.Fatalf("BatchMode: %v, asked %d times; want a refusal without a question", err, asked)
	}
}
