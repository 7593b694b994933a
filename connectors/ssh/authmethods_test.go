package ssh

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
)

// ssh_config's BatchMode, PubkeyAuthentication, KbdInteractiveAuthentication,
// PasswordAuthentication and PreferredAuthentications decide, as in ssh,
// whether Spindle may ask, and which methods it tries in which order.
func TestAuthMethodsFromConfig(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	keyPath, _, pub := keyFiles(t, dir, "id_user", "")
	var mu sync.Mutex
	var tried []string // methods the server saw, "none" left out
	srv := newTestServer(t, &gossh.ServerConfig{
		PasswordCallback: func(c gossh.ConnMetadata, pw []byte) (*gossh.Permissions, error) {
			if string(pw) == "pw" {
				return nil, nil
			}
			return nil, errors.New("denied")
		},
		PublicKeyCallback: func(c gossh.ConnMetadata, k gossh.PublicKey) (*gossh.Permissions, error) {
			if string(k.Marshal()) == string(pub.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("no")
		},
		AuthLogCallback: func(c gossh.ConnMetadata, method string, err error) {
			if method != "none" {
				mu.Lock()
				tried = append(tried, method)
				mu.Unlock()
			}
		},
	}, false)
	kh := knownHosts(t, srv)
	cfg := filepath.Join(dir, "config")
	common := "  HostName 127.0.0.1\n  Port " + strconv.Itoa(srv.port) + "\n  User tester\n  UserKnownHostsFile " + kh + "\n"
	writeFile(t, cfg, "Host both\n"+common+"  IdentityFile "+keyPath+"\n"+
		"Host pref\n"+common+"  IdentityFile "+keyPath+"\n  PreferredAuthentications password,publickey\n"+
		"Host nopw\n"+common+"  PasswordAuthentication no\n  KbdInteractiveAuthentication no\n"+
		"Host nokey\n"+common+"  IdentityFile "+keyPath+"\n  PubkeyAuthentication no\n"+
		"Host batch\n"+common+"  BatchMode yes\n"+
		"Host pw\n"+common)
	var asked atomic.Int32
	prompt := func(string) (string, error) { asked.Add(1); return "pw", nil }
	try := func(how string, o Options, wantOK bool, wantFirst string) {
		t.Helper()
		mu.Lock()
		tried = nil
		mu.Unlock()
		o.ConfigFile = cfg
		l, err := connect(context.Background(), o, zap.NewNop(), 0)
		if l != nil {
			l.Close()
		}
		switch {
		case wantOK && err != nil:
			t.Errorf("%s, %s: %v", how, o.Host, err)
		case !wantOK && err == nil:
			t.Errorf("%s, %s: logged in", how, o.Host)
		case !wantOK && !errors.Is(err, errkind.ErrAuth):
			t.Errorf("%s, %s: %v; want an authentication failure", how, o.Host, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if wantFirst != "" && (len(tried) == 0 || tried[0] != wantFirst) {
			t.Errorf("%s, %s: the methods tried were %v; want %s first", how, o.Host, tried, wantFirst)
		}
		if wantFirst == "" && len(tried) > 0 {
			t.Errorf("%s, %s: tried %v; want nothing beyond none", how, o.Host, tried)
		}
	}
	check := func(how string) {
		try(how, Options{Host: "both", Password: "pw"}, true, "publickey")
		try(how, Options{Host: "pref", Password: "pw"}, true, "password")
		try(how, Options{Host: "pref", Password: "pw", PreferredAuthentications: []string{"publickey"}}, true, "publickey")
		try(how, Options{Host: "both", Password: "pw", PreferredAuthentications: []string{"password"}}, true, "password")
		try(how, Options{Host: "pw", Password: "pw"}, true, "password") // the server has no keyboard-interactive
		try(how, Options{Host: "nopw", Password: "pw"}, false, "")
		try(how, Options{Host: "nokey"}, false, "")
		asked.Store(0)
		try(how, Options{Host: "batch", PasswordPrompt: prompt}, false, "")
		try(how, Options{Host: "pw", PasswordPrompt: prompt}, true, "password")
		if n := asked.Load(); n != 1 {
			t.Errorf("%s: the prompt was called %d times; want once (not under BatchMode)", how, n)
		}
	}
	check("ssh -G")
	// A hop started by an agent tries the same methods in the same order.
	hop, _, err := Options{Host: "pref", ConfigFile: cfg, Password: "pw"}.Delegate(context.Background(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if m := hop.(*Hop).Methods; len(m) != 2 || m[0] != "password" || m[1] != "publickey" {
		t.Errorf("the delegated hop's methods: %v", m)
	}
	old := sshBinary
	sshBinary = ""
	defer func() { sshBinary = old }()
	check("parsed")
}

// A login by one or two keys opens with publickey, not "none": a round
// trip less (FirstMethodFirst). More keys, or another method first, wait
// for the server's list as ssh does; a server that takes no key costs the
// key's failed attempt (and then "none" for the list, after a query, which
// does not pass it on), and the password still logs in.
func TestFirstMethodFirst(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	var keys []string
	var accepted gossh.PublicKey
	for i := range 3 {
		p, _, pub := keyFiles(t, dir, fmt.Sprintf("id_%d", i), "")
		keys = append(keys, p)
		accepted = pub // the last
	}
	var mu sync.Mutex
	var seen []string
	logAuth := func(c gossh.ConnMetadata, method string, err error) {
		mu.Lock()
		seen = append(seen, method)
		mu.Unlock()
	}
	pwOnly := func(c gossh.ConnMetadata, pw []byte) (*gossh.Permissions, error) {
		if string(pw) == "pw" {
			return nil, nil
		}
		return nil, errors.New("denied")
	}
	both := newTestServer(t, &gossh.ServerConfig{
		PasswordCallback: pwOnly,
		PublicKeyCallback: func(c gossh.ConnMetadata, k gossh.PublicKey) (*gossh.Permissions, error) {
			if string(k.Marshal()) == string(accepted.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("no")
		},
		AuthLogCallback: logAuth,
	}, false)
	passwordOnly := newTestServer(t, &gossh.ServerConfig{PasswordCallback: pwOnly, AuthLogCallback: logAuth}, false)
	only := true
	try := func(srv *testServer, o Options, want ...string) {
		t.Helper()
		mu.Lock()
		seen = nil
		mu.Unlock()
		o.Host, o.Port, o.User, o.ConfigFile = "127.0.0.1", srv.port, "tester", "none"
		o.KnownHostsFiles, o.IdentitiesOnly = []string{knownHosts(t, srv)}, &only
		l, err := connect(context.Background(), o, zap.NewNop(), 0)
		if err != nil {
			t.Fatalf("%v: %v", o.IdentityFiles, err)
		}
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(seen, want) {
			t.Errorf("keys %v, methods %v: the server saw %v, want %v", o.IdentityFiles, o.PreferredAuthentications, seen, want)
		}
	}
	try(both, Options{IdentityFiles: keys[2:]}, "publickey")
	try(both, Options{IdentityFiles: keys[1:]}, "publickey", "publickey")
	try(both, Options{IdentityFiles: keys}, "none", "publickey", "publickey", "publickey")
	try(both, Options{IdentityFiles: keys[2:], Password: "pw", PreferredAuthentications: []string{"password", "publickey"}}, "none", "password")
	// The first key signs at once, and its refusal brings the list.
	try(passwordOnly, Options{IdentityFiles: keys[2:], Password: "pw"}, "publickey", "password")
	// A key that would ask for its passphrase is queried first; its
	// refusal has no list, so "none" asks for it.
	enc, _, _ := keyFiles(t, dir, "id_enc", "secret")
	try(passwordOnly, Options{IdentityFiles: []string{enc}, PasswordPrompt: func(string) (string, error) { return "pw", nil }},
		"publickey", "none", "password")
}
