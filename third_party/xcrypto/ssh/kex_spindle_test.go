package ssh

// Spindle's test of the key exchanges whose numbers are built on first use
// (kex.go: dhGroup.params, ecdh.newCurve) rather than by the package's
// init: each completes a handshake between this package's client and
// server, which then agree on a session ID and on the algorithm.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"testing"
)

func TestLazyKeyExchanges(t *testing.T) {
	_, hostKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := NewSignerFromKey(hostKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, kex := range []string{
		InsecureKeyExchangeDH1SHA1, InsecureKeyExchangeDH14SHA1, KeyExchangeDH14SHA256,
		KeyExchangeDH16SHA512, KeyExchangeECDHP256, KeyExchangeECDHP384, KeyExchangeECDHP521,
	} {
		t.Run(kex, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			serverConf := &ServerConfig{NoClientAuth: true, Config: Config{KeyExchanges: []string{kex}}}
			serverConf.AddHostKey(signer)
			type result struct {
				conn *ServerConn
				err  error
			}
			served := make(chan result, 1)
			go func() {
				nc, err := ln.Accept()
				if err != nil {
					served <- result{nil, err}
					return
				}
				sconn, chans, reqs, err := NewServerConn(nc, serverConf)
				if err != nil {
					nc.Close()
					served <- result{nil, err}
					return
				}
				go DiscardRequests(reqs)
				go func() {
					for nch := range chans {
						nch.Reject(Prohibited, "")
					}
				}()
				served <- result{sconn, nil}
			}()
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			clientConf := &ClientConfig{User: "u", HostKeyCallback: InsecureIgnoreHostKey(), Config: Config{KeyExchanges: []string{kex}}}
			cconn, _, creqs, err := NewClientConn(nc, "pipe", clientConf)
			if err != nil {
				nc.Close()
				t.Fatalf("client handshake with %s: %v", kex, err)
			}
			go DiscardRequests(creqs)
			defer cconn.Close()
			s := <-served
			if s.err != nil {
				t.Fatalf("server handshake with %s: %v", kex, s.err)
			}
			defer s.conn.Close()
			if got := cconn.(AlgorithmsConnMetadata).Algorithms().KeyExchange; got != kex {
				t.Errorf("negotiated %q, want %q", got, kex)
			}
			if id := cconn.SessionID(); len(id) == 0 || !bytes.Equal(id, s.conn.SessionID()) {
				t.Errorf("session IDs differ: client %x, server %x", id, s.conn.SessionID())
			}
		})
	}
}

func TestDHGroupParamsParsedOnce(t *testing.T) {
	sha1 := kexAlgoMap[InsecureKeyExchangeDH14SHA1].(*dhGroup)
	sha256 := kexAlgoMap[KeyExchangeDH14SHA256].(*dhGroup)
	if sha1.params() != sha256.params() || sha256.params() != sha256.params() {
		t.Error("the two group 14 exchanges do not share one parse of the prime")
	}
	for kex, bits := range map[string]int{
		InsecureKeyExchangeDH1SHA1: 1024, KeyExchangeDH14SHA256: 2048, KeyExchangeDH16SHA512: 4096,
	} {
		p := kexAlgoMap[kex].(*dhGroup).params()
		if p.p.BitLen() != bits || p.g.Int64() != 2 || p.pMinus1.BitLen() != bits {
			t.Errorf("%s: p has %d bits (want %d), g = %v", kex, p.p.BitLen(), bits, p.g)
		}
	}
}
