package main

import (
	"errors"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/connectors/ssh"
)

func TestParseTarget(t *testing.T) {
	ok := []struct {
		in   string
		hops []Hop
	}{
		{"local", []Hop{{Kind: "local"}}},
		{" local ", []Hop{{Kind: "local"}}},
		{"web1", []Hop{{Kind: "ssh", Arg: "web1"}}},
		{"Local", []Hop{{Kind: "ssh", Arg: "Local"}}},
		{"ssh:local", []Hop{{Kind: "ssh", Arg: "local"}}},
		{"user@web1:2222", []Hop{{Kind: "ssh", Arg: "user@web1:2222"}}},
		{"web1:2222", []Hop{{Kind: "ssh", Arg: "web1:2222"}}},
		{"[::1]:22", []Hop{{Kind: "ssh", Arg: "[::1]:22"}}},
		{"ssh:user@host:22", []Hop{{Kind: "ssh", Arg: "user@host:22"}}},
		{"ssh:[fe80::1%eth0]:22", []Hop{{Kind: "ssh", Arg: "[fe80::1%eth0]:22"}}},
		{"bastion,web1", []Hop{{Kind: "ssh", Arg: "bastion"}, {Kind: "ssh", Arg: "web1"}}},
		{"docker:app1", []Hop{{Kind: "docker", Arg: "app1"}}}, // on this machine
		{"web1,docker:app@app1,sudo", []Hop{{Kind: "ssh", Arg: "web1"}, {Kind: "docker", Arg: "app@app1"}, {Kind: "sudo"}}},
		{"local,setns:1234,kubectl:ns/pod/c", []Hop{{Kind: "local"}, {Kind: "setns", Arg: "1234"}, {Kind: "kubectl", Arg: "ns/pod/c"}}},
		{"ssh:bastion,ssh:web1,sudo", []Hop{{Kind: "ssh", Arg: "bastion"}, {Kind: "ssh", Arg: "web1"}, {Kind: "sudo"}}},
	}
	for _, tc := range ok {
		got, err := ParseTarget(tc.in)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got.Hops, tc.hops) {
			t.Errorf("ParseTarget(%q) = %+v, want %+v", tc.in, got.Hops, tc.hops)
		}
	}
	if cs, err := mustParse(t, "local").Connectors(nil); err != nil {
		t.Errorf("local connector: %v", err)
	} else if _, ok := cs[0].(local.Options); !ok || len(cs) != 1 {
		t.Errorf("local connectors are %#v", cs)
	}
	// A become hop given first runs on this machine: local comes first.
	if cs, err := mustParse(t, "sudo:postgres").Connectors(nil); err != nil || len(cs) != 2 {
		t.Errorf("sudo:postgres: %#v, %v", cs, err)
	} else if s, ok := cs[1].(sudo.Options); !ok || s.User != "postgres" || cs[0].Name() != "local" {
		t.Errorf("sudo:postgres gives %#v", cs)
	}
	if cs, err := mustParse(t, "ssh:web1,sudo").Connectors(nil); err != nil || len(cs) != 2 {
		t.Errorf("ssh:web1,sudo: %#v, %v", cs, err)
	} else if s, ok := cs[1].(sudo.Options); !ok || s.User != "root" {
		t.Errorf("bare sudo is not root: %#v", cs[1])
	}
	if cs, err := mustParse(t, "local,local").Connectors(nil); err != nil || len(cs) != 2 {
		t.Errorf("local,local: %#v, %v", cs, err)
	} else if _, ok := cs[1].(connectors.Remote); !ok {
		t.Errorf("the second hop %T is not started by an agent", cs[1])
	}

	bad := []struct{ in, want string }{
		{"", "empty target"},
		{"   ", "empty target"},
		{"foo:bar", `unknown kind "foo"`},
		{"local:x", "local takes no argument"},
		{"local,", "hop 2 is empty"},
		{",local", "hop 1 is empty"},
		{"ssh:", "ssh needs an argument"},
		{"web1:0", "bad port"},
		{"web1:65536", "bad port"},
		{"ssh:web1:x", "bad port"},
		{"ssh:web1:", "empty port"},
		{"@web1", "empty user"},
		{"ssh:[::1", "missing ']'"},
		{"ssh:[::1]x", "after ']'"},
		{"ssh:[]:22", "empty address"},
		{"ssh:a:b:c", "neither host[:port] nor an IPv6"},
		{"ssh:-oProxyCommand=x", "cannot start with '-'"},
		{"ssh:user@", "no host"},
		{"ssh:we b1", "white space"},
	}
	for _, tc := range bad {
		_, err := ParseTarget(tc.in)
		if err == nil {
			t.Errorf("ParseTarget(%q) succeeded, want error containing %q", tc.in, tc.want)
			continue
		}
		if !errors.Is(err, ErrBadTarget) {
			t.Errorf("ParseTarget(%q): %v is not ErrBadTarget", tc.in, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTarget(%q) = %q, want it to contain %q", tc.in, err, tc.want)
		}
	}
	if _, err := ParseTarget("foo:bar"); !strings.Contains(err.Error(), "(supported kinds: doas, docker, kubectl, local, lxc, lxd, machinectl, podman, setns, ssh, su, sudo)") {
		t.Errorf("unknown kind error does not list the supported kinds: %v", err)
	}
}

func mustParse(t *testing.T, s string) Target {
	t.Helper()
	tg, err := ParseTarget(s)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestParseSSHAddr(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want sshAddr
	}{
		{"web1", sshAddr{Host: "web1"}},
		{"web1.example.com", sshAddr{Host: "web1.example.com"}},
		{"alice@web1", sshAddr{User: "alice", Host: "web1"}},
		{"web1:2222", sshAddr{Host: "web1", Port: 2222}},
		{"alice@web1:22", sshAddr{User: "alice", Host: "web1", Port: 22}},
		{"a@b@web1", sshAddr{User: "a@b", Host: "web1"}},
		{"10.0.0.1:22", sshAddr{Host: "10.0.0.1", Port: 22}},
		{"[::1]", sshAddr{Host: "::1"}},
		{"[::1]:22", sshAddr{Host: "::1", Port: 22}},
		{"root@[2001:db8::1]:2222", sshAddr{User: "root", Host: "2001:db8::1", Port: 2222}},
		{"::1", sshAddr{Host: "::1"}},
		{"alice@2001:db8::1", sshAddr{User: "alice", Host: "2001:db8::1"}},
	} {
		got, err := parseSSHAddr(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseSSHAddr(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		// String round-trips.
		again, err := parseSSHAddr(got.String())
		if err != nil || again != got {
			t.Errorf("parseSSHAddr(%q.String() = %q) = %+v, %v", tc.in, got.String(), again, err)
		}
	}
}

// TestSplitHop covers the syntax the later kinds will use.
func TestSplitHop(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Hop
	}{
		{"local", Hop{Kind: "local"}},
		{"ssh:user@host:port", Hop{Kind: "ssh", Arg: "user@host:port"}},
		{"sudo:postgres", Hop{Kind: "sudo", Arg: "postgres"}},
		{"docker:app1", Hop{Kind: "docker", Arg: "app1"}},
		{"host", Hop{Kind: "ssh", Arg: "host"}},
		{"web1.example.com", Hop{Kind: "ssh", Arg: "web1.example.com"}},
		{"user@host:22", Hop{Kind: "ssh", Arg: "user@host:22"}},
		{"web1:22", Hop{Kind: "ssh", Arg: "web1:22"}},
		{"[::1]:22", Hop{Kind: "ssh", Arg: "[::1]:22"}},
		{"sudo:", Hop{Kind: "sudo"}},
		{"sudo:22", Hop{Kind: "sudo", Arg: "22"}},
	} {
		if got := splitHop(tc.in); got != tc.want {
			t.Errorf("splitHop(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestTargetChainString(t *testing.T) {
	h := Hop{Kind: "ssh", Arg: "web1"}
	if h.String() != "ssh:web1" || (Hop{Kind: "local"}).String() != "local" {
		t.Errorf("Hop.String: %q", h.String())
	}
}

func TestSSHOptionsFromFlags(t *testing.T) {
	t.Setenv("SPINDLE_TEST_PW", "s3cret")
	yes := true
	o := &connectOptions{
		configFile: "/tmp/cfg",
		identities: []string{"/k1", "/k2"},
		sshOpts: []string{"StrictHostKeyChecking=accept-new", "UserKnownHostsFile=/kh1 /kh2", "identityfile=/k3", "IdentitiesOnly yes", "Port=2200", "User=bob", "ConnectTimeout=7", "ServerAliveInterval=5", "ServerAliveCountMax=2", "IdentityAgent=/run/agent.sock", "IdentityAgent=/second", "CertificateFile=/c1", "certificatefile=/c2", "PreferredAuthentications=publickey,password", "SendEnv=LANG LC_*", "SetEnv=LC_X=a b", "AddKeysToAgent=confirm 1h", "AddKeysToAgent=no", "ConnectionAttempts=4",
			"KexAlgorithms=+diffie-hellman-group1-sha1", "kexalgorithms=ignored", "Ciphers=^aes128-cbc", "MACs=-hmac-sha1*", "HostKeyAlgorithms=ssh-ed25519"},
		passwordEnv: "SPINDLE_TEST_PW",
		interactive: true,
	}
	got, err := o.sshOptions(sshAddr{User: "alice", Host: "web1"})
	if err != nil {
		t.Fatal(err)
	}
	// On a terminal, an unknown host key is asked about (ssh's ask).
	if got.HostKeyPrompt == nil {
		t.Error("no host key prompt on a terminal")
	}
	got.HostKeyPrompt = nil
	want := ssh.Options{Host: "web1", Port: 2200, User: "alice", ConfigFile: "/tmp/cfg",
		IdentityFiles: []string{"/k1", "/k2", "/k3"}, IdentitiesOnly: &yes, IdentityAgent: "/run/agent.sock", CertificateFiles: []string{"/c1", "/c2"}, PreferredAuthentications: []string{"publickey", "password"}, SendEnv: []string{"LANG", "LC_*"}, SetEnv: []string{"LC_X=a b"}, AddKeysToAgent: "confirm 1h", ConnectionAttempts: 4, Password: "s3cret",
		KexAlgorithms: "+diffie-hellman-group1-sha1", Ciphers: "^aes128-cbc", MACs: "-hmac-sha1*", HostKeyAlgorithms: "ssh-ed25519",
		KnownHostsFiles: []string{"/kh1", "/kh2"}, HostKeyPolicy: ssh.HostKeyAcceptNew,
		ConnectTimeout: 7 * time.Second, KeepaliveInterval: 5 * time.Second, KeepaliveCountMax: 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sshOptions:\n got %+v\nwant %+v", got, want)
	}

	// The flag beats -o; a hop's port beats -o Port; a prompt only on a
	// terminal and without a password.
	o = &connectOptions{sshOpts: []string{"StrictHostKeyChecking=no", "Port=1"}, hostKeyPolicy: "yes", interactive: true,
		prompt: func(string) (string, error) { return "pw", nil }}
	got, err = o.sshOptions(sshAddr{Host: "h", Port: 22})
	if err != nil {
		t.Fatal(err)
	}
	if got.HostKeyPolicy != ssh.HostKeyStrict || got.Port != 22 || got.PasswordPrompt == nil || got.User != "" {
		t.Errorf("precedence: %+v", got)
	}
	o.sshOpts = append(o.sshOpts, "BatchMode=yes")
	if got, _ := o.sshOptions(sshAddr{Host: "h"}); got.PasswordPrompt != nil || got.HostKeyPrompt != nil {
		t.Errorf("BatchMode=yes still prompts")
	}
	// ProxyCommand and ProxyJump: as in ssh, the first of the two wins.
	o = &connectOptions{sshOpts: []string{"ProxyCommand=ssh -W %h:%p -q bastion", "ProxyJump=gw", "ProxyCommand=other"}}
	if got, err := o.sshOptions(sshAddr{Host: "h"}); err != nil || got.ProxyCommand != "ssh -W %h:%p -q bastion" || got.ProxyJump != "" {
		t.Errorf("-o ProxyCommand: %q, ProxyJump %q, %v", got.ProxyCommand, got.ProxyJump, err)
	}
	o = &connectOptions{sshOpts: []string{"ProxyJump=gw", "ProxyCommand=nc %h %p"}}
	if got, err := o.sshOptions(sshAddr{Host: "h"}); err != nil || got.ProxyJump != "gw" || got.ProxyCommand != "" {
		t.Errorf("-o ProxyJump: %q, ProxyCommand %q, %v", got.ProxyJump, got.ProxyCommand, err)
	}
	o = &connectOptions{}
	if got, _ := o.sshOptions(sshAddr{Host: "h"}); got.PasswordPrompt != nil || got.HostKeyPolicy != "" {
		t.Errorf("defaults: %+v (no prompt without a terminal, policy left to ssh_config)", got)
	}
	for _, p := range []struct{ in, want string }{{"off", "off"}, {"accept-new", "accept-new"}, {"yes", "yes"}, {"ask", "ask"}} {
		o := &connectOptions{hostKeyPolicy: p.in}
		if got, err := o.sshOptions(sshAddr{Host: "h"}); err != nil || string(got.HostKeyPolicy) != p.want {
			t.Errorf("--host-key-policy %s: %v %v", p.in, got.HostKeyPolicy, err)
		}
	}

	for _, tc := range []struct {
		o    connectOptions
		want string
	}{
		{connectOptions{hostKeyPolicy: "maybe"}, "bad host key policy"},
		{connectOptions{sshOpts: []string{"StrictHostKeyChecking=maybe"}}, "bad host key policy"},
		{connectOptions{sshOpts: []string{"ControlMaster=auto"}}, "ControlMaster: not supported"},
		{connectOptions{sshOpts: []string{"Port=x"}}, "bad port"},
		{connectOptions{sshOpts: []string{"novalue"}}, "want KEY=VALUE"},
		{connectOptions{sshOpts: []string{"IdentitiesOnly=perhaps"}}, "want yes or no"},
		{connectOptions{passwordEnv: "SPINDLE_TEST_NO_SUCH_VAR"}, "is not set"},
	} {
		_, err := tc.o.sshOptions(sshAddr{Host: "h"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.o, err, tc.want)
		}
		tg := mustParse(t, "h")
		if _, err := tg.Connectors(&tc.o); exitCode(err) != exitUsage {
			t.Errorf("%+v: connector error %v has exit status %d, want %d", tc.o, err, exitCode(err), exitUsage)
		}
	}
}
