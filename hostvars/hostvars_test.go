package hostvars

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors/doas"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/connectors/su"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	"github.com/spindle-rpc/spindle/errkind"
)

func TestSplitShell(t *testing.T) {
	for in, want := range map[string][]string{
		``:                                  nil,
		`  -C  -o ControlMaster=auto `:      {"-C", "-o", "ControlMaster=auto"},
		`-o 'ProxyCommand=ssh -W %h:%p b'`:  {"-o", "ProxyCommand=ssh -W %h:%p b"},
		`-o "User a"`:                       {"-o", "User a"},
		`a\ b "c\"d" 'e\f' "g\h"`:           {"a b", `c"d`, `e\f`, `g\h`},
		`x""y ''`:                           {"xy", ""},
		`-o IdentityFile="/k/a b"`:          {"-o", "IdentityFile=/k/a b"},
		"-J bastion\t-p\n2222":              {"-J", "bastion", "-p", "2222"},
		`"-o" 'StrictHostKeyChecking'=no`:   {"-o", "StrictHostKeyChecking=no"},
		`end\`:                              {"end"},
		`-o ProxyCommand="nc %h %p" -i k x`: {"-o", "ProxyCommand=nc %h %p", "-i", "k", "x"},
	} {
		got, err := splitShell(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("splitShell(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`'open`, `"open`, `a "b\"`} {
		if _, err := splitShell(in); err == nil {
			t.Errorf("splitShell(%q): no error", in)
		}
	}
}

func resolve(t *testing.T, h Host) *Resolved {
	t.Helper()
	r, err := h.Resolve()
	if err != nil {
		t.Fatalf("%+v: %v", h, err)
	}
	return r
}

func TestChain(t *testing.T) {
	for _, c := range []struct {
		h    Host
		want string
	}{
		{Host{Name: "web1"}, "ssh:web1"},
		{Host{Name: "web1", Address: "10.0.0.5", Port: 2222, User: "deploy"}, "ssh:deploy@10.0.0.5:2222"},
		{Host{Name: "v6", Address: "::1", Port: 22}, "ssh:[::1]:22"},
		{Host{Name: "web1", Via: "admin@bastion:2200,sudo"}, "ssh:admin@bastion:2200,sudo,ssh:web1"},
		{Host{Name: "app1", Via: "web1", Target: "docker:app1"}, "ssh:web1,docker:app1"},
		{Host{Name: "pg", Target: "sudo:postgres", User: "ignored"}, "sudo:postgres"},
		// ssh's first value wins: ssh_args before ansible_user and
		// ansible_port, those before ssh_common_args.
		{Host{Name: "h", User: "u1", Port: 2, SSHArgs: "-o User=u0", SSHCommonArgs: "-l u2 -p 3"}, "ssh:u0@h:2"},
		{Host{Name: "h", SSHCommonArgs: "-oPort=7 -l u2", SSHExtraArgs: "-p 8 -o User=u3"}, "ssh:u2@h:7"},
	} {
		if got := resolve(t, c.h).Chain(); got != c.want {
			t.Errorf("%+v: chain %q, want %q", c.h, got, c.want)
		}
	}
}

func TestSSHOptions(t *testing.T) {
	off := false
	h := Host{Name: "web1", Password: "s3cret", PrivateKeyFile: "/keys/id", Timeout: 10, HostKeyChecking: &off,
		SSHArgs:       "-C -o ControlMaster=auto -o ControlPersist=60s -o 'IdentityFile=\"/keys/first\"'",
		SSHCommonArgs: `-o "ProxyCommand ssh -W %h:%p jump" -J ignored -F /etc/alt_config -A -o ServerAliveInterval=5`,
		SSHExtraArgs:  "-o ConnectTimeout=99 -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -i /keys/last -tt"}
	r := resolve(t, h)
	o := r.SSH
	want := ssh.Options{
		Password:          "s3cret",
		IdentityFiles:     []string{"/keys/first", "/keys/id", "/keys/last"},
		ConnectTimeout:    10 * time.Second,
		HostKeyPolicy:     ssh.HostKeyOff, // host_key_checking=false comes before the extra args
		ProxyCommand:      "ssh -W %h:%p jump",
		ConfigFile:        "/etc/alt_config",
		ForwardAgent:      "yes",
		KeepaliveInterval: 5 * time.Second,
		KnownHostsFiles:   []string{"/dev/null"},
	}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("options\n got %+v\nwant %+v", o, want)
	}
	ign := strings.Join(r.Ignored, " | ")
	for _, s := range []string{"-C", "-o ControlMaster=auto", "-o ControlPersist=60s", "-t"} {
		if !strings.Contains(ign, s) {
			t.Errorf("ignored %q: no %q", ign, s)
		}
	}
	if strings.Contains(r.Settings(), "s3cret") {
		t.Error("the password is in Settings")
	}
}

func TestSSHHostKeyCheckingFromArgs(t *testing.T) {
	on := true
	r := resolve(t, Host{Name: "h", HostKeyChecking: &on, SSHArgs: "-o StrictHostKeyChecking=accept-new"})
	if r.SSH.HostKeyPolicy != ssh.HostKeyAcceptNew {
		t.Error(r.SSH.HostKeyPolicy)
	}
	r = resolve(t, Host{Name: "h", HostKeyChecking: &on})
	if r.SSH.HostKeyPolicy != "" {
		t.Errorf("host_key_checking=true: %q, want ssh_config's", r.SSH.HostKeyPolicy)
	}
}

func TestResolveErrors(t *testing.T) {
	for _, c := range []struct {
		h    Host
		want string
	}{
		{Host{}, "no address"},
		{Host{Name: "h", SSHArgs: "-o 'open"}, "ssh_args"},
		{Host{Name: "h", SSHCommonArgs: "-p"}, "-p needs an argument"},
		{Host{Name: "h", SSHExtraArgs: "-o Port=0"}, "bad port"},
		{Host{Name: "h", SSHExtraArgs: "web1"}, "not an ssh option"},
		{Host{Name: "h", SSHArgs: "-o StrictHostKeyChecking=maybe"}, "StrictHostKeyChecking"},
		{Host{Name: "h", Via: "nosuch:x"}, "ansible_spindle_via"},
		{Host{Name: "h", Target: "docker:"}, "ansible_spindle_target"},
		{Host{Name: "h", Address: "a b"}, "ansible_host"},
		{Host{Name: "h", Timeout: -1}, "timeout"},
	} {
		_, err := c.h.Resolve()
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, errkind.ErrBadArgs) {
			t.Errorf("%+v: %v, want an ErrBadArgs naming %q", c.h, err, c.want)
		}
	}
}

func TestSettings(t *testing.T) {
	a := resolve(t, Host{Name: "a", Password: "pw1"})
	b := resolve(t, Host{Name: "b", Password: "pw1"})
	c := resolve(t, Host{Name: "a", Password: "pw2"})
	d := resolve(t, Host{Name: "a", Password: "pw1", Timeout: 3})
	if a.Settings() != b.Settings() {
		t.Error("two hosts with the same settings do not share them")
	}
	if a.Settings() == c.Settings() || a.Settings() == d.Settings() {
		t.Error("different passwords or timeouts give the same settings")
	}
	if a.Chain() == b.Chain() {
		t.Error("two hosts, one chain")
	}
	if Secret("") != "" || Secret("x") == Secret("y") || Secret("x") != Secret("x") || strings.Contains(Secret("hunter2"), "hunter2") {
		t.Error("Secret")
	}
}

func TestBecome(t *testing.T) {
	f := func(b Become) any {
		t.Helper()
		c, err := b.Connector()
		if err != nil {
			t.Fatalf("%+v: %v", b, err)
		}
		return c
	}
	for _, c := range []struct {
		b    Become
		want any
	}{
		{Become{Method: "sudo"}, sudo.Options{User: "root"}},
		// Ansible's default flags are the connector's own.
		{Become{Method: "sudo", User: "pg", Password: "pw", Flags: "-H -S -n"}, sudo.Options{User: "pg", Password: "pw"}},
		{Become{Method: "sudo", Flags: "-HSn -u x -p 'P: ' -E -i -g adm --user=y --prompt z -k", Exe: "/opt/sudo"},
			sudo.Options{User: "root", Exe: "/opt/sudo", PreserveEnv: true, Login: true, Flags: []string{"-g", "adm", "-k"}}},
		{Become{Method: "sudo", Flags: "--preserve-env=A,B --login -Cx"},
			sudo.Options{User: "root", Login: true, Flags: []string{"--preserve-env=A,B", "-C", "x"}}},
		{Become{Method: "su", User: "app", Password: "pw", Flags: "- -m"}, su.Options{User: "app", Password: "pw", Login: true, Flags: []string{"-m"}}},
		{Become{Method: "doas", Flags: "-n -u x -s", Exe: "doas"}, doas.Options{User: "root", Exe: "doas", Flags: []string{"-s"}}},
	} {
		if got := f(c.b); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v:\n got %+v\nwant %+v", c.b, got, c.want)
		}
	}
	for _, b := range []Become{{Method: "pbrun"}, {Method: "sudo", Flags: "-u"}, {Method: "su", Flags: "-c id"},
		{Method: "sudo", Flags: "'x"}, {Method: "doas", Flags: "x"}} {
		if _, err := b.Connector(); err == nil || !errors.Is(err, errkind.ErrBadArgs) {
			t.Errorf("%+v: %v, want ErrBadArgs", b, err)
		}
	}
	k1 := Become{Method: "sudo", Password: "pw"}.Key()
	if k1 != (Become{Method: "sudo", User: "root", Password: "pw"}).Key() {
		t.Error("the default user is not root in the key")
	}
	if k1 == (Become{Method: "sudo", Password: "other"}).Key() || strings.Contains(k1, "pw") {
		t.Errorf("key %s", k1)
	}
}

func TestSteps(t *testing.T) {
	r := resolve(t, Host{Name: "web1", User: "u", Via: "bastion", Password: "pw", PrivateKeyFile: "/k"})
	steps, err := r.Steps()
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 {
		t.Fatalf("%d steps", len(steps))
	}
	b := steps[0].Connector.(ssh.Options)
	w := steps[1].Connector.(ssh.Options)
	if b.Host != "bastion" || b.User != "" || w.Host != "web1" || w.User != "u" {
		t.Errorf("bastion %q@%q, web1 %q@%q: the host's user is the host's alone", b.User, b.Host, w.User, w.Host)
	}
	if b.Password != "pw" || !reflect.DeepEqual(w.IdentityFiles, []string{"/k"}) {
		t.Error("the base options are not every SSH hop's")
	}
}
