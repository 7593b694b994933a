package ssh

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// keyFiles writes an ed25519 private key (encrypted when passphrase is
// set) and its .pub, and returns the path, the raw key and its public key.
func keyFiles(t *testing.T, dir, name, passphrase string) (string, ed25519.PrivateKey, gossh.PublicKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = gossh.MarshalPrivateKey(priv, "")
	} else {
		block, err = gossh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	writeFile(t, path, string(pem.EncodeToMemory(block)))
	pub, err := gossh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path+".pub", string(gossh.MarshalAuthorizedKey(pub)))
	return path, priv, pub
}

func pubs(ss []gossh.Signer) [][]byte {
	var out [][]byte
	for _, s := range ss {
		out = append(out, s.PublicKey().Marshal())
	}
	return out
}

func samePubs(t *testing.T, got []gossh.Signer, want ...gossh.PublicKey) {
	t.Helper()
	g := pubs(got)
	if len(g) != len(want) {
		t.Fatalf("got %d keys, want %d", len(g), len(want))
	}
	for i := range want {
		if !bytes.Equal(g[i], want[i].Marshal()) {
			t.Fatalf("key %d is not the expected one", i)
		}
	}
}

func TestAuthIdentitiesOnly(t *testing.T) {
	dir := t.TempDir()
	plain, _, plainPub := keyFiles(t, dir, "id_plain", "")
	enc, encPriv, encPub := keyFiles(t, dir, "id_enc", "secret")
	_, otherPriv, otherPub := keyFiles(t, dir, "id_other", "")

	ring := agent.NewKeyring().(agent.ExtendedAgent)
	for _, k := range []ed25519.PrivateKey{otherPriv, encPriv} {
		if err := ring.Add(agent.AddedKey{PrivateKey: k}); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "id_missing")

	// IdentitiesOnly: the files' keys only; the encrypted one is signed by
	// the agent (matched by public key), so no prompt is needed.
	as, err := buildAuth(ring, []string{plain}, []string{enc, missing, plain}, nil, true, "", &prompter{}, nil, "u@h", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	samePubs(t, as.signers, plainPub, encPub)
	if len(as.methods) != 1 {
		t.Fatalf("methods = %d, want publickey only", len(as.methods))
	}
	sig, err := as.signers[1].Sign(rand.Reader, []byte("data"))
	if err != nil || encPub.Verify([]byte("data"), sig) != nil {
		t.Fatalf("agent-backed identity cannot sign: %v", err)
	}

	// Without IdentitiesOnly: the files' keys first, then the agent's others.
	as, err = buildAuth(ring, nil, []string{enc, plain}, nil, false, "", &prompter{}, nil, "u@h", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	samePubs(t, as.signers, encPub, plainPub, otherPub)

	// A .pub whose private key is gone still works through the agent.
	as, err = buildAuth(ring, []string{filepath.Join(dir, "id_gone")}, nil, nil, true, "", &prompter{}, nil, "u@h", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if len(as.signers) != 0 {
		t.Fatal("no .pub, no private key: should be skipped")
	}
}

func TestAuthEncryptedKey(t *testing.T) {
	dir := t.TempDir()
	enc, _, encPub := keyFiles(t, dir, "id_enc", "secret")

	// No agent, no prompt: skipped.
	as, err := buildAuth(nil, nil, []string{enc}, nil, false, "", &prompter{}, nil, "u@h", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if len(as.signers) != 0 || len(as.methods) != 0 {
		t.Fatalf("encrypted key without passphrase: %d signers, %d methods", len(as.signers), len(as.methods))
	}

	// With a prompt: offered at once, decrypted on first use; a wrong
	// passphrase is asked again, and never shows in an error.
	var prompts []string
	answers := []string{"wrong-guess", "secret"}
	pr := &prompter{fn: func(p string) (string, error) {
		prompts = append(prompts, p)
		a := answers[0]
		answers = answers[1:]
		return a, nil
	}}
	as, err = buildAuth(nil, nil, []string{enc}, nil, false, "", pr, nil, "u@h", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	samePubs(t, as.signers, encPub)
	if len(prompts) != 0 {
		t.Fatal("prompted before the server accepted the key")
	}
	// Prompting also enables password/keyboard-interactive.
	if len(as.methods) != 3 {
		t.Fatalf("methods = %d, want publickey, keyboard-interactive, password", len(as.methods))
	}
	as2, ok := as.signers[0].(gossh.AlgorithmSigner)
	if !ok {
		t.Fatal("lazy signer is not an AlgorithmSigner")
	}
	sig, err := as2.SignWithAlgorithm(rand.Reader, []byte("data"), gossh.KeyAlgoED25519)
	if err != nil || encPub.Verify([]byte("data"), sig) != nil {
		t.Fatalf("sign: %v", err)
	}
	if len(prompts) != 2 || !strings.Contains(prompts[0], enc) {
		t.Fatalf("prompts = %q", prompts)
	}

	// Wrong answers only: an error that names the file, not the answers.
	// (One try: bcrypt is slow under -race.)
	pr = &prompter{fn: func(string) (string, error) { return "hunter2", nil }, tries: 1}
	as, err = buildAuth(nil, nil, []string{enc}, nil, false, "", pr, nil, "u@h", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	_, err = as.signers[0].Sign(rand.Reader, []byte("data"))
	if err == nil || !strings.Contains(err.Error(), enc) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("wrong passphrase: %v", err)
	}

	// A failing prompt is an error.
	pr = &prompter{fn: func(string) (string, error) { return "", errors.New("no terminal") }}
	as, _ = buildAuth(nil, nil, []string{enc}, nil, false, "", pr, nil, "u@h", zap.NewNop())
	if _, err := as.signers[0].Sign(rand.Reader, []byte("x")); err == nil || !strings.Contains(err.Error(), "no terminal") {
		t.Fatalf("prompt error: %v", err)
	}
}

func TestAuthPasswordMethods(t *testing.T) {
	as, err := buildAuth(nil, nil, nil, nil, false, "", &prompter{}, nil, "u@h", zap.NewNop())
	if err != nil || len(as.methods) != 0 {
		t.Fatalf("nothing to offer: %d methods, %v", len(as.methods), err)
	}
	as, err = buildAuth(nil, nil, nil, nil, false, "pw", &prompter{}, nil, "u@h", zap.NewNop())
	if err != nil || len(as.methods) != 2 {
		t.Fatalf("password: %d methods, %v", len(as.methods), err)
	}
}
