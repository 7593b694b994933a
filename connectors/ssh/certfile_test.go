package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
)

// CertificateFile names a certificate kept apart from its key (as
// Teleport's or Vault's tools write them): it is offered with the key
// from the identity file or the ssh-agent, and a server that trusts only
// the CA lets it in.
func TestCertificateFile(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	ca := newSigner(t)
	keyPath, priv, pub := keyFiles(t, dir, "id_user", "")
	cert := &gossh.Certificate{Key: pub, CertType: gossh.UserCert, KeyId: "tester@test",
		ValidPrincipals: []string{"tester"}, ValidBefore: gossh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	certPath := filepath.Join(dir, "certs", "tester.cert")
	writeFile(t, certPath, string(gossh.MarshalAuthorizedKey(cert)))
	checker := &gossh.CertChecker{IsUserAuthority: func(auth gossh.PublicKey) bool {
		return bytes.Equal(auth.Marshal(), ca.PublicKey().Marshal())
	}} // no UserKeyFallback: plain keys are refused
	srv := newTestServer(t, &gossh.ServerConfig{PublicKeyCallback: checker.Authenticate}, false)
	kh := knownHosts(t, srv)
	sock := filepath.Join(dir, "agent.sock")
	serveAgent(t, sock, priv)

	cfg := filepath.Join(dir, "config")
	common := "  HostName 127.0.0.1\n  Port " + strconv.Itoa(srv.port) + "\n  User tester\n  UserKnownHostsFile " + kh + "\n  IdentitiesOnly yes\n"
	writeFile(t, cfg, "Host file\n"+common+"  IdentityFile "+keyPath+"\n  CertificateFile "+certPath+"\n"+
		"Host agent\n"+common+"  IdentityAgent "+sock+"\n  CertificateFile "+certPath+"\n"+
		"Host plain\n"+common+"  IdentityFile "+keyPath+"\n")
	try := func(how string, o Options, wantOK bool) {
		t.Helper()
		o.ConfigFile = cfg
		l, err := connect(context.Background(), o, zap.NewNop(), 0)
		switch {
		case wantOK && err != nil:
			t.Errorf("%s, %s: %v", how, o.Host, err)
		case !wantOK && err == nil:
			t.Errorf("%s, %s: a plain key got in where only certificates may", how, o.Host)
		case !wantOK && !errors.Is(err, errkind.ErrAuth):
			t.Errorf("%s, %s: %v; want an authentication failure", how, o.Host, err)
		}
		if l != nil {
			l.Close()
		}
	}
	check := func(how string) {
		try(how, Options{Host: "file"}, true)
		try(how, Options{Host: "agent"}, true)
		try(how, Options{Host: "plain"}, false)
		try(how, Options{Host: "plain", CertificateFiles: []string{certPath}}, true)
	}
	bothParsers(t, check)
}
