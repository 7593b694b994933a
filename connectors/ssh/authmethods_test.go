package ssh

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spindle-rpc/spindle/rpc"
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
		case !wantOK && !errors.Is(err, rpc.ErrAuth):
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
