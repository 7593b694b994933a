package ssh

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
)

// OpenSSH 9.2's defaults, as `ssh -G -F none` prints them.
const (
	osshCiphers = "chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,aes128-gcm@openssh.com,aes256-gcm@openssh.com"
	osshMACs    = "umac-64-etm@openssh.com,umac-128-etm@openssh.com,hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com,hmac-sha1-etm@openssh.com,umac-64@openssh.com,umac-128@openssh.com,hmac-sha2-256,hmac-sha2-512,hmac-sha1"
)

func without(list []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(a string) bool { return slices.Contains(drop, a) })
}

func TestAssemble(t *testing.T) {
	def := cipherKeyword.defaults
	if len(def) == 0 || def[0] != gossh.CipherAES128GCM {
		t.Fatalf("x/crypto's default ciphers: %q, want AES-GCM first", def)
	}
	tests := []struct {
		k        algoKeyword
		spec     string
		want     []string
		dropped  []string
		errMatch string
	}{
		{k: cipherKeyword, spec: "", want: nil},
		{k: cipherKeyword, spec: "+aes128-cbc", want: append(slices.Clone(def), "aes128-cbc")},
		{k: cipherKeyword, spec: "+aes128-gcm@openssh.com", want: def}, // already there: no repeat
		{k: cipherKeyword, spec: "-aes*-gcm@openssh.com", want: without(def, "aes128-gcm@openssh.com", "aes256-gcm@openssh.com")},
		{k: cipherKeyword, spec: "^aes256-ctr", want: append([]string{"aes256-ctr"}, without(def, "aes256-ctr")...)},
		{k: cipherKeyword, spec: "aes256-ctr, chacha20-poly1305@openssh.com", want: []string{"aes256-ctr", "chacha20-poly1305@openssh.com"}},
		{k: cipherKeyword, spec: "aes???-ctr", want: []string{"aes128-ctr", "aes192-ctr", "aes256-ctr"}},
		{k: cipherKeyword, spec: "rijndael-cbc@lysator.liu.se", dropped: []string{"rijndael-cbc@lysator.liu.se"}, errMatch: "Ciphers rijndael-cbc@lysator.liu.se leaves no algorithm"},
		{k: cipherKeyword, spec: "-*", errMatch: "leaves no algorithm"},
		{k: macKeyword, spec: osshMACs, want: []string{"hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com", "hmac-sha2-256", "hmac-sha2-512", "hmac-sha1"},
			dropped: []string{"umac-64-etm@openssh.com", "umac-128-etm@openssh.com", "hmac-sha1-etm@openssh.com", "umac-64@openssh.com", "umac-128@openssh.com"}},
		{k: kexKeyword, spec: "+diffie-hellman-group1-sha1", want: append(slices.Clone(kexKeyword.defaults), "diffie-hellman-group1-sha1")},
		{k: hostKeyKeyword, spec: "ssh-ed25519,sk-ssh-ed25519@openssh.com", want: []string{"ssh-ed25519"}, dropped: []string{"sk-ssh-ed25519@openssh.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.k.name+" "+tt.spec, func(t *testing.T) {
			got, dropped, err := tt.k.assemble(tt.spec)
			if tt.errMatch != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errMatch) {
					t.Fatalf("err = %v, want %q", err, tt.errMatch)
				}
				if !strings.Contains(err.Error(), "aes128-gcm@openssh.com") {
					t.Fatalf("err = %v: should list what is implemented", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) || !slices.Equal(dropped, tt.dropped) {
				t.Fatalf("got %q (dropped %q), want %q (dropped %q)", got, dropped, tt.want, tt.dropped)
			}
		})
	}
}

func TestFromOpenSSH(t *testing.T) {
	def := cipherKeyword.defaults
	tests := []struct {
		name, printed string
		want          []string
	}{
		{"unchanged: x/crypto's defaults", osshCiphers, nil},
		{"+ appends to x/crypto's", osshCiphers + ",aes128-cbc,3des-cbc", append(slices.Clone(def), "aes128-cbc", "3des-cbc")},
		{"^ puts first", "aes128-cbc," + osshCiphers, append([]string{"aes128-cbc"}, def...)},
		{"- removes", strings.Replace(osshCiphers, "chacha20-poly1305@openssh.com,", "", 1), without(def, "chacha20-poly1305@openssh.com")},
		// A system crypto policy's own order is kept.
		{"a list of its own", "aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes256-ctr,aes128-gcm@openssh.com,aes128-ctr",
			[]string{"aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com", "aes256-ctr", "aes128-gcm@openssh.com", "aes128-ctr"}},
		{"added and removed", "aes128-ctr,aes128-cbc", []string{"aes128-ctr", "aes128-cbc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := cipherKeyword.fromOpenSSH(tt.printed, osshCiphers)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	// Without OpenSSH's defaults to compare with, the list is taken as is.
	got, _, err := cipherKeyword.fromOpenSSH(osshCiphers, "")
	if err != nil || got[0] != "chacha20-poly1305@openssh.com" || len(got) != 6 {
		t.Fatalf("no defaults: got %q, %v", got, err)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tt := range []struct {
		p, s string
		want bool
	}{
		{"aes*", "aes128-ctr", true}, {"*-cbc", "3des-cbc", true}, {"*", "", true}, {"aes???-ctr", "aes128-ctr", true},
		{"aes??-ctr", "aes128-ctr", false}, {"aes128-ctr", "aes128-ctr", true}, {"aes128", "aes128-ctr", false},
		{"*sha1*", "diffie-hellman-group14-sha256", false}, {"*sha1*", "hmac-sha1-96", true},
	} {
		if got := globMatch(tt.p, tt.s); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v", tt.p, tt.s, got)
		}
	}
}

func TestResolveCrypto(t *testing.T) {
	hc := &hostConfig{Source: "/home/me/.ssh/config", Ciphers: "aes256-ctr", KexAlgorithms: "+diffie-hellman-group1-sha1"}
	p, _, err := resolveCrypto(algorithmSpecs{Ciphers: "^aes128-cbc"}, hc)
	if err != nil {
		t.Fatal(err)
	}
	if p.Ciphers[0] != "aes128-cbc" || slices.Contains(p.Ciphers, "aes256-ctr") && p.Ciphers[1] == "aes256-ctr" {
		t.Fatalf("the option should replace ssh_config's Ciphers: %q", p.Ciphers)
	}
	if p.KeyExchanges[len(p.KeyExchanges)-1] != "diffie-hellman-group1-sha1" || p.MACs != nil || p.HostKeys != nil {
		t.Fatalf("got %+v", p)
	}
	_, _, err = resolveCrypto(algorithmSpecs{MACs: "umac-64@openssh.com"}, hc)
	if err == nil || !strings.HasPrefix(err.Error(), "-o MACs umac-64@openssh.com leaves no algorithm") {
		t.Fatalf("err = %v", err)
	}
	hc.Ciphers = "nothing-known"
	_, _, err = resolveCrypto(algorithmSpecs{}, hc)
	if err == nil || !strings.Contains(err.Error(), "ssh config (/home/me/.ssh/config): Ciphers nothing-known") {
		t.Fatalf("err = %v", err)
	}
	// ssh -G's lists are compared with OpenSSH's defaults.
	hc = &hostConfig{Source: "ssh -G", Ciphers: osshCiphers, MACs: "hmac-sha2-512", openSSHDefaults: map[string]string{"ciphers": osshCiphers, "macs": osshMACs}}
	p, _, err = resolveCrypto(algorithmSpecs{}, hc)
	if err != nil || p.Ciphers != nil || !slices.Equal(p.MACs, []string{"hmac-sha2-512"}) {
		t.Fatalf("got %+v, %v", p, err)
	}
}

func TestHostKeyOrder(t *testing.T) {
	p := cryptoPrefs{HostKeys: []string{"ssh-ed25519", "rsa-sha2-512", "ssh-rsa"}}
	for _, tt := range []struct{ known, want []string }{
		{nil, p.HostKeys},
		{[]string{"rsa-sha2-256", "rsa-sha2-512", "ssh-rsa"}, []string{"rsa-sha2-512", "ssh-rsa"}},
		{[]string{"ecdsa-sha2-nistp256"}, p.HostKeys},
	} {
		if got := p.hostKeys(tt.known); !slices.Equal(got, tt.want) {
			t.Errorf("known %q: got %q, want %q", tt.known, got, tt.want)
		}
	}
	if got := (cryptoPrefs{}).hostKeys([]string{"ssh-ed25519"}); !slices.Equal(got, []string{"ssh-ed25519"}) {
		t.Errorf("no configuration: got %q", got)
	}
}

func TestNegotiationHint(t *testing.T) {
	err := fmt.Errorf("ssh: handshake failed: %w", &gossh.AlgorithmNegotiationError{What: "key exchange",
		SupportedAlgorithms: []string{"curve25519-sha256"}, RequestedAlgorithms: []string{"sntrup761x25519-sha512", "diffie-hellman-group1-sha1", "kex-strict-s-v00@openssh.com"}})
	hint, ok := negotiationHint(err)
	if !ok || !strings.Contains(hint, "-o KexAlgorithms=+diffie-hellman-group1-sha1") || !strings.Contains(hint, "it offers sntrup761x25519-sha512,diffie-hellman-group1-sha1") {
		t.Fatalf("hint %q", hint)
	}
	hint, _ = negotiationHint(&gossh.AlgorithmNegotiationError{What: "client to server MAC", RequestedAlgorithms: []string{"umac-64@openssh.com"}})
	if !strings.Contains(hint, "implements none of the server's") {
		t.Fatalf("hint %q", hint)
	}
	hint, _ = negotiationHint(&gossh.AlgorithmNegotiationError{What: "server to client cipher", RequestedAlgorithms: []string{"aes128-cbc"}})
	if !strings.Contains(hint, "-o Ciphers=+aes128-cbc") {
		t.Fatalf("hint %q", hint)
	}
	if _, ok := negotiationHint(fmt.Errorf("other")); ok {
		t.Fatal("a hint for an unrelated error")
	}
}

// ssh_config's lists reach hostConfig both ways: read by OpenSSH (ssh -G,
// with its defaults to compare with) and read directly.
func TestAlgorithmsFromConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	writeFile(t, cfg, "Host legacy\n  KexAlgorithms +diffie-hellman-group1-sha1\n  Ciphers ^aes128-cbc\n  MACs -hmac-sha1*\n  HostKeyAlgorithms ssh-ed25519\n")
	check := func(t *testing.T) {
		t.Helper()
		hc, err := resolveConfig(context.Background(), "legacy", cfg, "", 0, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := resolveCrypto(algorithmSpecs{}, hc)
		if err != nil {
			t.Fatal(err)
		}
		want := cryptoPrefs{
			KeyExchanges: append(slices.Clone(kexKeyword.defaults), "diffie-hellman-group1-sha1"),
			Ciphers:      append([]string{"aes128-cbc"}, cipherKeyword.defaults...),
			MACs:         without(macKeyword.defaults, "hmac-sha1", "hmac-sha1-96"),
			HostKeys:     []string{"ssh-ed25519"},
		}
		if !slices.Equal(p.KeyExchanges, want.KeyExchanges) || !slices.Equal(p.Ciphers, want.Ciphers) ||
			!slices.Equal(p.MACs, want.MACs) || !slices.Equal(p.HostKeys, want.HostKeys) {
			t.Fatalf("got  %+v\nwant %+v", p, want)
		}
		hc, err = resolveConfig(context.Background(), "other", cfg, "", 0, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if p, _, err := resolveCrypto(algorithmSpecs{}, hc); err != nil || p.Ciphers != nil || p.MACs != nil || p.KeyExchanges != nil || p.HostKeys != nil {
			t.Fatalf("a host without lists: %+v, %v (want x/crypto's defaults)", p, err)
		}
	}
	t.Run("file", func(t *testing.T) {
		old := sshBinary
		sshBinary = ""
		defer func() { sshBinary = old }()
		check(t)
	})
	t.Run("ssh -G", func(t *testing.T) {
		needSSHClient(t)
		check(t)
	})
}
