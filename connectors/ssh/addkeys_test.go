package ssh

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit/sshagenttest"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

func TestParseAddKeys(t *testing.T) {
	for in, want := range map[string]addKeys{
		"no":         {},
		"false":      {},
		"yes":        {on: true},
		"true":       {on: true},
		"ask":        {on: true, ask: true},
		"confirm":    {on: true, confirm: true},
		"1h":         {on: true, lifetime: time.Hour},
		"3600":       {on: true, lifetime: time.Hour},
		"confirm 1h": {on: true, confirm: true, lifetime: time.Hour},
		"confirm 90": {on: true, confirm: true, lifetime: 90 * time.Second},
		"ask 1h30m":  {on: true, ask: true, lifetime: 90 * time.Minute},
		"Yes":        {on: true},
		" confirm  ": {on: true, confirm: true},
	} {
		got, err := parseAddKeys(in)
		if err != nil || got != want {
			t.Errorf("parseAddKeys(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "maybe", "no 1h", "yes 1h 2h", "confirm soon", "0", "1x"} {
		if _, err := parseAddKeys(bad); err == nil {
			t.Errorf("parseAddKeys(%q) accepted", bad)
		}
	}
}

// recordingRing is a keyring that records what it is asked to add; it
// stores the key without the confirm constraint, which x/crypto's keyring
// does not support.
type recordingRing struct {
	agent.Agent
	mu    sync.Mutex
	added []agent.AddedKey
}

func (r *recordingRing) Add(k agent.AddedKey) error {
	r.mu.Lock()
	r.added = append(r.added, k)
	r.mu.Unlock()
	k.ConfirmBeforeUse = false
	return r.Agent.Add(k)
}

// Over the wire: the decrypted key goes to the agent with the config's
// constraints, once, after it signed; the next connection uses the agent's
// copy without asking.
func TestAddKeysToAgentConstraints(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	path, _, pub := keyFiles(t, dir, "id_enc", "sesame")
	ring := &recordingRing{Agent: agent.NewKeyring()}
	sock := filepath.Join(dir, "agent.sock")
	sshagenttest.Serve(t, sock, ring)
	srv := newTestServer(t, &gossh.ServerConfig{
		PublicKeyCallback: func(c gossh.ConnMetadata, k gossh.PublicKey) (*gossh.Permissions, error) {
			if string(k.Marshal()) == string(pub.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("no")
		},
	}, false)
	cfg := filepath.Join(dir, "config")
	writeFile(t, cfg, "Host srv\n  HostName 127.0.0.1\n  Port "+strconv.Itoa(srv.port)+"\n  User tester\n  UserKnownHostsFile "+knownHosts(t, srv)+
		"\n  IdentityFile "+path+"\n  IdentitiesOnly yes\n  IdentityAgent "+sock+"\n  AddKeysToAgent confirm 1h\n")
	asked := 0
	o := Options{Host: "srv", ConfigFile: cfg, PasswordPrompt: func(string) (string, error) { asked++; return "sesame", nil }}
	for i := 0; i < 2; i++ {
		l, err := connect(context.Background(), o, zap.NewNop(), 0)
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		l.Close()
	}
	ring.mu.Lock()
	defer ring.mu.Unlock()
	if asked != 1 || len(ring.added) != 1 {
		t.Fatalf("asked %d times, %d keys added; want the passphrase once and one key", asked, len(ring.added))
	}
	k := ring.added[0]
	if k.Comment != path || !k.ConfirmBeforeUse || k.LifetimeSecs != 3600 {
		t.Fatalf("added %q, confirm %v, lifetime %d s; want the file's path, confirm, 3600 s", k.Comment, k.ConfirmBeforeUse, k.LifetimeSecs)
	}
}
