package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// complete runs cobra's hidden __complete command, as a shell's completion
// script does, and returns the candidates and the directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := Execute(append([]string{"__complete"}, args...), strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("__complete %q: exit %d, stderr %q", args, code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

func TestCompleteTargets(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	os.WriteFile(cfg, []byte("Host web1 web2 *.internal\n  HostName 10.0.0.1\nHost=bastion\nInclude "+dir+"/conf.d/*\n"), 0o600)
	os.Mkdir(filepath.Join(dir, "conf.d"), 0o700)
	os.WriteFile(filepath.Join(dir, "conf.d", "db"), []byte("host dbhost !nothere\n"), 0o600)

	for _, tc := range []struct {
		args      []string
		want      []string
		directive string // ":N", cobra's bit set
	}{
		// Hosts (patterns left out) and kinds; a space follows a host.
		{[]string{"-F", cfg, "run", "w"}, []string{"web1", "web2"}, ":4"},
		// The last hop of a chain, Include followed.
		{[]string{"-F", cfg, "shell", "bastion,d"}, []string{"bastion,dbhost", "bastion,doas", "bastion,doas:", "bastion,docker:"}, ":4"},
		// Kinds that need an argument: no space after the colon.
		{[]string{"-F", cfg, "ping", "setn"}, []string{"setns:"}, ":6"},
		{[]string{"-F", cfg, "info", "web1,sudo:"}, nil, ":4"},
		// After TARGET, run's command is remote: no local files.
		{[]string{"-F", cfg, "run", "web1", "--", "ls"}, nil, ":4"},
		// cp: a TARGET then ':', else local files.
		{[]string{"-F", cfg, "cp", "bas"}, []string{"bastion:"}, ":6"},
		{[]string{"-F", cfg, "cp", "./x"}, nil, ":0"},
		{[]string{"-F", cfg, "cp", "zzz"}, nil, ":0"},
		{[]string{"-F", cfg, "cp", "web1:/etc/"}, nil, ":4"},
		{[]string{"-F", "none", "run", "web"}, nil, ":4"},
	} {
		got, directive := complete(t, tc.args...)
		if !slices.Equal(got, tc.want) || directive != tc.directive {
			t.Errorf("%q: %q %s, want %q %s", tc.args, got, directive, tc.want, tc.directive)
		}
	}
}
