package integration_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
)

// ssh_config's Ciphers, MACs, KexAlgorithms and HostKeyAlgorithms (and the
// Options of the same names) reach the handshake, directly and on a hop an
// agent dials: a server that speaks only old algorithms is refused with
// advice, and reached once they are allowed, as with ssh.
func TestSSHLegacyAlgorithms(t *testing.T) {
	t.Parallel()
	legacy := newTargetWith(t, "/bin/sh", sshtest.Options{Extra: []string{
		"KexAlgorithms diffie-hellman-group1-sha1", "Ciphers aes128-cbc", "MACs hmac-sha1"}})
	negotiated := func(t *testing.T) {
		t.Helper()
		log := legacy.s.Log()
		if !strings.Contains(log, "kex: algorithm: diffie-hellman-group1-sha1") || !strings.Contains(log, "cipher: aes128-cbc") {
			t.Errorf("sshd's log shows no diffie-hellman-group1-sha1 and aes128-cbc key exchange:\n%s", log)
		}
	}

	t.Run("refused with advice", func(t *testing.T) {
		_, _, err := connect(t, nil, legacy.opts())
		if err == nil {
			t.Fatal("connected to a server that speaks only diffie-hellman-group1-sha1 without allowing it")
		}
		t.Log(err)
		if !strings.Contains(err.Error(), "no common key exchange algorithm") || !strings.Contains(err.Error(), "-o KexAlgorithms=+diffie-hellman-group1-sha1") {
			t.Errorf("the error should say what to allow: %v", err)
		}
		if errors.Is(err, spindle.ErrAuth) {
			t.Errorf("classified as an auth failure: %v", err)
		}
		o := legacy.opts()
		o.KexAlgorithms = "+diffie-hellman-group1-sha1"
		_, _, err = connect(t, nil, o)
		if err == nil || !strings.Contains(err.Error(), "-o Ciphers=+aes128-cbc") {
			t.Errorf("with the key exchange allowed, the cipher: err = %v", err)
		}
	})
	t.Run("options", func(t *testing.T) {
		o := legacy.opts()
		o.KexAlgorithms, o.Ciphers = "+diffie-hellman-group1-sha1", "^aes128-cbc"
		_, cx := mustConnect(t, legacy, o)
		run(t, cx, "true")
		negotiated(t)
	})
	t.Run("ssh_config", func(t *testing.T) {
		cfg := legacy.sshConfig(t, "legacy", "  StrictHostKeyChecking yes\n  KexAlgorithms +diffie-hellman-group1-sha1\n  Ciphers +aes128-cbc\n")
		_, cx := mustConnect(t, legacy, ssh.Options{Host: "legacy", ConfigFile: cfg})
		run(t, cx, "true")
	})
	t.Run("hop through an agent", func(t *testing.T) {
		first := newTarget(t, "/bin/sh")
		ctx, cx := throughFirst(t, first)
		_, err := cx.Connect(ctx, legacy.opts())
		if err == nil || !strings.Contains(err.Error(), "-o KexAlgorithms=+diffie-hellman-group1-sha1") {
			t.Fatalf("a hop to the old server without allowing its algorithms: err = %v", err)
		}
		o := legacy.opts()
		o.KexAlgorithms, o.Ciphers = "+diffie-hellman-group1-sha1", "+aes128-cbc"
		hop, err := cx.Connect(ctx, o)
		if err != nil {
			t.Fatalf("ssh hop through %s with the old algorithms allowed: %v", cx.Name(), err)
		}
		run(t, hop, "true")
	})
}

// A list that leaves out what a server needs is obeyed: the handshake
// fails, rather than using a cipher the user excluded.
func TestSSHRestrictedAlgorithms(t *testing.T) {
	t.Parallel()
	tg := newTargetWith(t, "/bin/sh", sshtest.Options{Extra: []string{"Ciphers aes128-gcm@openssh.com,aes256-ctr"}})
	o := tg.opts()
	o.Ciphers = "-aes128-gcm@openssh.com"
	_, cx := mustConnect(t, tg, o)
	run(t, cx, "true")
	if log := tg.s.Log(); !strings.Contains(log, "cipher: aes256-ctr") {
		t.Errorf("sshd's log shows no aes256-ctr, the one cipher left:\n%s", log)
	}
	o.Ciphers = "chacha20-poly1305@openssh.com"
	if _, _, err := connect(t, nil, o); err == nil || !strings.Contains(err.Error(), "no common client to server cipher algorithm") {
		t.Errorf("Ciphers chacha20-poly1305@openssh.com against a server without it: err = %v", err)
	}
	o.Ciphers, o.HostKeyAlgorithms = "", "rsa-sha2-512" // the server's key is ed25519
	if _, _, err := connect(t, nil, o); err == nil || !strings.Contains(err.Error(), "host key algorithm") {
		t.Errorf("HostKeyAlgorithms rsa-sha2-512 against an ed25519 host key: err = %v", err)
	}
}
