package cli

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/target"
)

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
	got, err := o.sshOptions(target.SSHAddr{User: "alice", Host: "web1"})
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
	got, err = o.sshOptions(target.SSHAddr{Host: "h", Port: 22})
	if err != nil {
		t.Fatal(err)
	}
	if got.HostKeyPolicy != ssh.HostKeyStrict || got.Port != 22 || got.PasswordPrompt == nil || got.User != "" {
		t.Errorf("precedence: %+v", got)
	}
	o.sshOpts = append(o.sshOpts, "BatchMode=yes")
	if got, _ := o.sshOptions(target.SSHAddr{Host: "h"}); got.PasswordPrompt != nil || got.HostKeyPrompt != nil {
		t.Errorf("BatchMode=yes still prompts")
	}
	// ProxyCommand and ProxyJump: as in ssh, the first of the two wins.
	o = &connectOptions{sshOpts: []string{"ProxyCommand=ssh -W %h:%p -q bastion", "ProxyJump=gw", "ProxyCommand=other"}}
	if got, err := o.sshOptions(target.SSHAddr{Host: "h"}); err != nil || got.ProxyCommand != "ssh -W %h:%p -q bastion" || got.ProxyJump != "" {
		t.Errorf("-o ProxyCommand: %q, ProxyJump %q, %v", got.ProxyCommand, got.ProxyJump, err)
	}
	o = &connectOptions{sshOpts: []string{"ProxyJump=gw", "ProxyCommand=nc %h %p"}}
	if got, err := o.sshOptions(target.SSHAddr{Host: "h"}); err != nil || got.ProxyJump != "gw" || got.ProxyCommand != "" {
		t.Errorf("-o ProxyJump: %q, ProxyCommand %q, %v", got.ProxyJump, got.ProxyCommand, err)
	}
	o = &connectOptions{}
	if got, _ := o.sshOptions(target.SSHAddr{Host: "h"}); got.PasswordPrompt != nil || got.HostKeyPolicy != "" {
		t.Errorf("defaults: %+v (no prompt without a terminal, policy left to ssh_config)", got)
	}
	for _, p := range []struct{ in, want string }{{"off", "off"}, {"accept-new", "accept-new"}, {"yes", "yes"}, {"ask", "ask"}} {
		o := &connectOptions{hostKeyPolicy: p.in}
		if got, err := o.sshOptions(target.SSHAddr{Host: "h"}); err != nil || string(got.HostKeyPolicy) != p.want {
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
		_, err := tc.o.sshOptions(target.SSHAddr{Host: "h"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.o, err, tc.want)
		}
		tg, err := target.Parse("h")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tc.o.targetOptions(tg); exitCode(err) != exitUsage {
			t.Errorf("%+v: connector error %v has exit status %d, want %d", tc.o, err, exitCode(err), exitUsage)
		}
	}
}

// The SSH flags are read only for a target with an SSH hop: a bad -o does
// not stop a local command, as ssh's would not stop a local one.
func TestTargetOptionsSSHOnly(t *testing.T) {
	o := &connectOptions{sshOpts: []string{"ControlMaster=auto"}, become: becomeOptions{passwordEnv: "SPINDLE_TEST_BECOME_PW"}}
	t.Setenv("SPINDLE_TEST_BECOME_PW", "pw")
	local, _ := target.Parse("local,sudo")
	to, err := o.targetOptions(local)
	if err != nil {
		t.Fatalf("local,sudo with a bad -o: %v", err)
	}
	if pw, err := to.BecomePassword("sudo", "root"); err != nil || pw != "pw" {
		t.Errorf("become password %q, %v", pw, err)
	}
	remote, _ := target.Parse("local,web1")
	if _, err := o.targetOptions(remote); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "ControlMaster") {
		t.Errorf("an SSH hop with a bad -o: %v", err)
	}
}

// -o ServerAliveInterval and ServerAliveCountMax set the links'
// keepalive as ssh's: seconds (0: none) and a count.
func TestKeepaliveOptions(t *testing.T) {
	for _, tc := range []struct {
		opts     []string
		interval time.Duration
		count    int
		bad      string
	}{
		{nil, 0, 0, ""},
		{[]string{"ServerAliveInterval=5", "ServerAliveCountMax=2"}, 5 * time.Second, 2, ""},
		{[]string{"serveraliveinterval 9", "ServerAliveInterval=7"}, 7 * time.Second, 0, ""},
		{[]string{"ServerAliveInterval=0"}, -1, 0, ""},
		{[]string{"ServerAliveInterval=soon"}, 0, 0, "-o ServerAliveInterval: want seconds"},
		{[]string{"ServerAliveCountMax=0"}, 0, 0, "-o ServerAliveCountMax: want a count"},
	} {
		o := connectOptions{sshOpts: tc.opts}
		interval, count, err := o.keepalive()
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%q: %v, want an error saying %q", tc.opts, err, tc.bad)
			}
			continue
		}
		if err != nil || interval != tc.interval || count != tc.count {
			t.Errorf("%q: %v, %d, %v; want %v, %d", tc.opts, interval, count, err, tc.interval, tc.count)
		}
	}
}
