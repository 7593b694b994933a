package ssh

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/internal/testkit"
	"go.uber.org/zap"
)

func TestParseSSHG(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want hostConfig
		err  string
	}{
		{
			name: "typical",
			in: `host web1
user deploy
hostname 10.0.0.5
port 2222
identitiesonly yes
identityfile /home/me/.ssh/id_ed25519
identityfile /home/me/.ssh/web1_10.0.0.5
proxyjump bastion
stricthostkeychecking accept-new
hashknownhosts no
userknownhostsfile /home/me/.ssh/known_hosts /home/me/.ssh/known_hosts2
globalknownhostsfile /etc/ssh/ssh_known_hosts
connecttimeout 7
serveraliveinterval 20
serveralivecountmax 5
ciphers chacha20-poly1305@openssh.com,aes128-ctr
`,
			want: hostConfig{HostName: "10.0.0.5", User: "deploy", Port: 2222, IdentitiesOnly: true,
				IdentityFiles: []string{"/home/me/.ssh/id_ed25519", "/home/me/.ssh/web1_10.0.0.5"}, ProxyJump: "bastion",
				StrictHostKeyChecking: "accept-new",
				UserKnownHostsFiles:   []string{"/home/me/.ssh/known_hosts", "/home/me/.ssh/known_hosts2"},
				GlobalKnownHostsFiles: []string{"/etc/ssh/ssh_known_hosts"},
				ConnectTimeout:        7 * time.Second, ServerAliveInterval: 20 * time.Second, ServerAliveCountMax: 5,
				Ciphers: "chacha20-poly1305@openssh.com,aes128-ctr"},
		},
		{
			name: "defaults",
			in:   "hostname web1\nuser root\nport 22\nidentitiesonly no\nstricthostkeychecking ask\nconnecttimeout none\nserveraliveinterval 0\nserveralivecountmax 3\nhashknownhosts yes\n",
			want: hostConfig{HostName: "web1", User: "root", Port: 22, StrictHostKeyChecking: "ask",
				ServerAliveCountMax: 3, HashKnownHosts: true},
		},
		{
			name: "none values and quotes",
			in:   "hostname h\nport 22\nidentityfile none\nuserknownhostsfile none\nproxyjump none\nproxycommand nc %h %p\nuser \"a b\"\n",
			want: hostConfig{HostName: "h", User: "a b", Port: 22, ProxyJump: "none", ProxyCommand: "nc %h %p"},
		},
		{
			name: "suffixed time",
			in:   "connecttimeout 1m30s\n",
			want: hostConfig{ConnectTimeout: 90 * time.Second},
		},
		{name: "bad port", in: "port abc\n", err: "bad port"},
		{name: "bad timeout", in: "connecttimeout soon\n", err: "ConnectTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSSHG([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestResolveWithSSHG(t *testing.T) {
	needSSHClient(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	writeFile(t, cfg, "Host web1\n  HostName 10.1.2.3\n  User deploy\n  Port 2200\n  IdentityFile "+dir+"/id_%h_%r\n  IdentitiesOnly yes\n  ServerAliveInterval 9\n")
	hc, err := resolveConfig(context.Background(), "web1", cfg, "", 0, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if hc.HostName != "10.1.2.3" || hc.User != "deploy" || hc.Port != 2200 || !hc.IdentitiesOnly ||
		hc.ServerAliveInterval != 9*time.Second || len(hc.IdentityFiles) != 1 || hc.IdentityFiles[0] != dir+"/id_10.1.2.3_deploy" {
		t.Fatalf("got %+v", hc)
	}
	// Options.User/Port reach ssh -G, so its tokens see them.
	hc, err = resolveConfig(context.Background(), "web1", cfg, "other", 2300, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if hc.User != "other" || hc.Port != 2300 || hc.IdentityFiles[0] != dir+"/id_10.1.2.3_other" {
		t.Fatalf("got %+v", hc)
	}

	writeFile(t, cfg, "Host web1\n  NoSuchOption yes\n")
	_, err = resolveConfig(context.Background(), "web1", cfg, "", 0, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), cfg) || !strings.Contains(err.Error(), "nosuchoption") {
		t.Fatalf("bad config: err = %v, want the file and the reason", err)
	}
}

func TestResolveWithFile(t *testing.T) {
	old := sshBinary
	sshBinary = ""
	defer func() { sshBinary = old }()
	dir := t.TempDir()
	inc := filepath.Join(dir, "conf.d", "web.conf")
	writeFile(t, inc, "Host web*\n  User deploy\n  Port 2201\n  IdentityFile %d/keys/%h-%r\n  ProxyJump bastion\n")
	cfg := filepath.Join(dir, "config")
	writeFile(t, cfg, "Include "+filepath.Join(dir, "conf.d", "*.conf")+`
Host web1
  HostName %h.example.com
  IdentitiesOnly yes
  StrictHostKeyChecking accept-new
  UserKnownHostsFile `+dir+`/kh1 `+dir+`/kh2
  ConnectTimeout 5
  ServerAliveInterval 10
  ServerAliveCountMax 4
`)
	hc, err := resolveConfig(context.Background(), "web1", cfg, "", 0, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	home := homeDir()
	want := &hostConfig{Alias: "web1", HostName: "web1.example.com", User: "deploy", Port: 2201,
		IdentityFiles: []string{home + "/keys/web1.example.com-deploy"}, IdentitiesOnly: true, ProxyJump: "bastion",
		StrictHostKeyChecking: "accept-new", UserKnownHostsFiles: []string{dir + "/kh1", dir + "/kh2"},
		GlobalKnownHostsFiles: []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"},
		ConnectTimeout:        5 * time.Second, ServerAliveInterval: 10 * time.Second, ServerAliveCountMax: 4, ConnectionAttempts: 1, EscapeChar: "~", PasswordPrompts: 3, Source: cfg}
	if !reflect.DeepEqual(hc, want) {
		t.Fatalf("got  %+v\nwant %+v", hc, want)
	}

	// Overrides and defaults.
	hc, err = resolveConfig(context.Background(), "db1", cfg, "admin", 2022, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if hc.HostName != "db1" || hc.User != "admin" || hc.Port != 2022 || len(hc.IdentityFiles) != len(defaultIdentityFiles) {
		t.Fatalf("got %+v", hc)
	}

	for _, bad := range []struct{ name, main, included string }{
		{"unsupported match", "Match exec true\n  Port 3\n", ""},
		{"bad value", "Host web1\n  Port = = 3\n", ""},
		{"bad included file", "Include " + filepath.Join(dir, "bad.d", "*.conf") + "\n", "Match exec true\n  Port 3\n"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			if bad.included != "" {
				writeFile(t, filepath.Join(dir, "bad.d", "x.conf"), bad.included)
			}
			f := filepath.Join(dir, "bad")
			writeFile(t, f, bad.main)
			_, err := resolveConfig(context.Background(), "web1", f, "", 0, zap.NewNop())
			if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), "cannot parse") {
				t.Fatalf("err = %v, want a loud error naming %s", err, f)
			}
			t.Log(err)
		})
	}

	_, err = resolveConfig(context.Background(), "web1", filepath.Join(dir, "missing"), "", 0, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing -F file: err = %v", err)
	}
	hc, err = resolveConfig(context.Background(), "web1", "none", "", 0, zap.NewNop())
	if err != nil || hc.HostName != "web1" || hc.Port != 22 {
		t.Fatalf("-F none: %+v %v", hc, err)
	}
}

func TestSeconds(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "none": 0, "0": 0, "5": 5 * time.Second,
		"2m": 2 * time.Minute, "1h2m3s": time.Hour + 2*time.Minute + 3*time.Second, "10m5": 10*time.Minute + 5*time.Second} {
		got, err := seconds(in)
		if err != nil || got != want {
			t.Errorf("seconds(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "5x", "-3"} {
		if _, err := seconds(in); err == nil {
			t.Errorf("seconds(%q): no error", in)
		}
	}
}

func TestSplitTarget(t *testing.T) {
	for in, want := range map[string][3]any{
		"web1": {"", "web1", 0}, "me@web1": {"me", "web1", 0}, "me@web1:2222": {"me", "web1", 2222},
		"[::1]:22": {"", "::1", 22}, "::1": {"", "::1", 0}, "[fe80::1]": {"", "fe80::1", 0},
	} {
		u, h, p, err := splitTarget(in)
		if err != nil || u != want[0] || h != want[1] || p != want[2] {
			t.Errorf("splitTarget(%q) = %q %q %d %v", in, u, h, p, err)
		}
	}
	for _, in := range []string{"web1:x", "me@", "web1:99999"} {
		if _, _, _, err := splitTarget(in); err == nil {
			t.Errorf("splitTarget(%q): no error", in)
		}
	}
}

func TestExplicitIdentityDropsDefaults(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	in := []string{home + "/.ssh/id_rsa", "/keys/deploy", "~/.ssh/id_ed25519", home + "/.ssh/custom"}
	got := withoutDefaultIdentities(in)
	want := []string{"/keys/deploy", home + "/.ssh/custom"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("withoutDefaultIdentities(%v) = %v, want %v", in, got, want)
	}
}

func TestSessionEnv(t *testing.T) {
	env := []string{"LANG=de_DE.UTF-8", "LC_TIME=C", "LC_ALL=", "HOME=/root", "=odd", "LCX=1"}
	got := sessionEnv(env, []string{"LANG", "LC_*", "NOPE"}, []string{"LC_SET=a b", "bad"})
	want := []string{"LANG=de_DE.UTF-8", "LC_TIME=C", "LC_ALL=", "LC_SET=a b"}
	if !slices.Equal(got, want) {
		t.Errorf("sessionEnv = %q, want %q", got, want)
	}
	// "-PATTERN" removes the earlier patterns it matches as strings, as in
	// ssh: -LC_* removes LC_*, -LC_ALL would not.
	if got := sessionEnv(env, []string{"LANG", "LC_*", "-LC_*"}, nil); !slices.Equal(got, want[:1]) {
		t.Errorf("sessionEnv with -LC_* = %q, want %q", got, want[:1])
	}
	for in, want := range map[string][]string{
		`LANG LC_*`:           {"LANG", "LC_*"},
		`FOO=bar "BAZ=q u x"`: {"FOO=bar", "BAZ=q u x"},
		`  a   "b c"d  `:      {"a", "b cd"},
		``:                    nil,
	} {
		if got := splitQuoted(in); !slices.Equal(got, want) {
			t.Errorf("splitQuoted(%q) = %q, want %q", in, got, want)
		}
	}
}

// LocalForward, RemoteForward and DynamicForward come out in -L/-R/-D
// syntax, through ssh -G and through the fallback parser alike.
func TestConfigForwards(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config")
	writeFile(t, cfg, "Host db\n  LocalForward 5432 localhost:5432\n  LocalForward 127.0.0.1:8080 [::1]:80\n"+
		"  RemoteForward 3128 localhost:3128\n  DynamicForward 1080\n  LocalForward /tmp/a.sock /run/b.sock\n")
	want := Forwards{
		Local:   []string{"5432:localhost:5432", "127.0.0.1:8080:[::1]:80", "/tmp/a.sock:/run/b.sock"},
		Remote:  []string{"3128:localhost:3128"},
		Dynamic: []string{"1080"},
	}
	// ssh -G brackets hosts: [localhost]:5432, [127.0.0.1]:8080.
	unbracket := strings.NewReplacer("[localhost]", "localhost", "[127.0.0.1]", "127.0.0.1")
	check := func(how string) {
		t.Helper()
		hc, err := resolveConfig(context.Background(), "db", cfg, "", 0, zap.NewNop())
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		got := configForwards(hc)
		for _, l := range [][]string{got.Local, got.Remote} {
			for i := range l {
				l[i] = unbracket.Replace(l[i])
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", how, got, want)
		}
	}
	bothParsers(t, check)
}

// EscapeChar reads the same through ssh -G and the fallback parser: as
// written, and ssh's ~ where the config sets none.
func TestConfigEscapeChar(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config")
	writeFile(t, cfg, "Host ctl\n  EscapeChar ^]\nHost quiet\n  EscapeChar none\nHost bs\n  EscapeChar \\\nHost pct\n  EscapeChar %\n")
	check := func(how string) {
		t.Helper()
		for host, want := range map[string]string{"ctl": "^]", "quiet": "none", "other": "~", "bs": `\`, "pct": "%"} {
			hc, err := resolveConfig(context.Background(), host, cfg, "", 0, zap.NewNop())
			if err != nil {
				t.Fatalf("%s: %v", how, err)
			}
			if hc.EscapeChar != want {
				t.Errorf("%s: %s's EscapeChar %q, want %q", how, host, hc.EscapeChar, want)
			}
		}
	}
	bothParsers(t, check)
}

// bothParsers runs check with ssh_config read through the fallback parser
// and through ssh -G, naming each.
func bothParsers(t *testing.T, check func(how string)) {
	t.Helper()
	old := sshBinary
	defer func() { sshBinary = old }()
	sshBinary = ""
	check("fallback parser")
	sshBinary = old
	needSSHClient(t)
	check("ssh -G")
}

// needSSHClient ends t through testkit unless OpenSSH's client is on PATH:
// the tests that compare with `ssh -G` need it (openssh-client, which
// scripts/test-deps.sh installs).
func needSSHClient(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("ssh")
	testkit.Need(t, err == nil, "no OpenSSH client (ssh) on PATH: apt-get install openssh-client (scripts/test-deps.sh)")
}
