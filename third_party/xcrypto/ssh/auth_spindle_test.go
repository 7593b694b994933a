package ssh

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
)

// scriptedConn answers every packet written to it with the next of its
// replies, and records what was written.
type scriptedConn struct {
	written [][]byte
	replies [][]byte
}

func (c *scriptedConn) writePacket(p []byte) error {
	c.written = append(c.written, append([]byte(nil), p...))
	return nil
}

func (c *scriptedConn) readPacket() ([]byte, error) {
	r := c.replies[0]
	c.replies = c.replies[1:]
	return r, nil
}

func (c *scriptedConn) Close() error { return nil }

type eagerSigner struct{ Signer }

func (eagerSigner) SignWithoutQuery() bool { return true }

// A SignerWithoutQuery's first packet is the signed request, and a login
// takes one exchange; any other signer's is the query, then the signed
// request after the server's PK_OK.
func TestSignWithoutQuery(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	success := []byte{msgUserAuthSuccess}
	pkOK := Marshal(&userAuthPubKeyOkMsg{Algo: signer.PublicKey().Type(), PubKey: signer.PublicKey().Marshal()})
	for _, tc := range []struct {
		name    string
		signer  Signer
		replies [][]byte
		sigs    []bool // HasSig of each request written
	}{
		{"eager", eagerSigner{signer}, [][]byte{success}, []bool{true}},
		{"queried", signer, [][]byte{pkOK, success}, []bool{false, true}},
	} {
		c := &scriptedConn{replies: tc.replies}
		cb := publicKeyCallback(func() ([]Signer, error) { return []Signer{tc.signer}, nil })
		res, _, err := cb.auth([]byte("session"), "user", c, rand.Reader, nil)
		if err != nil || res != authSuccess {
			t.Fatalf("%s: %v, %v", tc.name, res, err)
		}
		if len(c.written) != len(tc.sigs) {
			t.Fatalf("%s: %d requests written, want %d", tc.name, len(c.written), len(tc.sigs))
		}
		for i, p := range c.written {
			var m publickeyAuthMsg
			if err := Unmarshal(p, &m); err != nil {
				t.Fatalf("%s: request %d: %v", tc.name, i, err)
			}
			if m.HasSig != tc.sigs[i] {
				t.Errorf("%s: request %d signed %v, want %v", tc.name, i, m.HasSig, tc.sigs[i])
			}
		}
	}
}
