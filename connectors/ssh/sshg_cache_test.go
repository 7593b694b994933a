package ssh

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Twenty hops to one host at once ask `ssh -G` once; an edit of the config
// file is seen by the next question.
func TestSSHGAnswersShared(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	fake := filepath.Join(dir, "ssh")
	// The question for OpenSSH's defaults (-F none, once per binary) is
	// not counted.
	script := "#!/bin/sh\ncase \"$*\" in *\"-F none\"*) exit 0;; esac\necho run >> " + runs + "\nprintf 'hostname web1.example\\nuser deploy\\nport 2222\\nidentityfile ~/.ssh/id_a\\n'\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config")
	if err := os.WriteFile(cfg, []byte("Host web1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		b, _ := os.ReadFile(runs)
		return strings.Count(string(b), "run")
	}
	var wg sync.WaitGroup
	hcs := make([]*hostConfig, 20)
	errs := make([]error, 20)
	for i := range hcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hcs[i], errs[i] = resolveWithSSH(context.Background(), fake, "web1", cfg, "", 0)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || hcs[i].HostName != "web1.example" || hcs[i].Port != 2222 {
			t.Fatalf("answer %d: %+v, %v", i, hcs[i], err)
		}
	}
	if n := count(); n != 1 {
		t.Fatalf("ssh -G ran %d times for 20 identical questions", n)
	}
	// Answers are copies: one caller's change is not another's.
	hcs[0].IdentityFiles[0] = "changed"
	again, err := resolveWithSSH(context.Background(), fake, "web1", cfg, "", 0)
	if err != nil || again.IdentityFiles[0] == "changed" {
		t.Fatalf("shared answer was changed through a copy: %+v, %v", again, err)
	}
	if err := os.WriteFile(cfg, []byte("Host web1\n  Port 2222\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveWithSSH(context.Background(), fake, "web1", cfg, "", 0); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("ssh -G ran %d times; want a second run after the config changed", n)
	}
}

// OpenSSH's default algorithm lists are asked once per ssh binary and
// kept in the user's cache directory; another binary (or the same one
// upgraded) is asked again.
func TestOpenSSHDefaultsCached(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	runs := filepath.Join(dir, "runs")
	fake := filepath.Join(dir, "ssh")
	script := "#!/bin/sh\necho run >> " + runs + "\nprintf 'user x\\nciphers c1,c2\\nmacs m1\\nkexalgorithms k1\\nhostkeyalgorithms h1\\n'\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		b, _ := os.ReadFile(runs)
		return strings.Count(string(b), "run")
	}
	want := map[string]string{"ciphers": "c1,c2", "macs": "m1", "kexalgorithms": "k1", "hostkeyalgorithms": "h1"}
	for i := range 2 {
		if got := askOpenSSHDefaults(fake); !maps.Equal(got, want) {
			t.Fatalf("ask %d: %v", i, got)
		}
	}
	if n := count(); n != 1 {
		t.Fatalf("ssh -G -F none ran %d times, want once", n)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "cache", "spindle", "openssh-defaults-*"))
	if len(files) != 1 {
		t.Fatalf("cache files: %q", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v, %v", fi, err)
	}
	// An upgraded binary is another file.
	if err := os.WriteFile(fake, []byte(script+"# upgraded\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := askOpenSSHDefaults(fake); !maps.Equal(got, want) || count() != 2 {
		t.Fatalf("after an upgrade: %v, %d runs", got, count())
	}
	// A damaged cache file is asked again, not believed.
	files, _ = filepath.Glob(filepath.Join(dir, "cache", "spindle", "openssh-defaults-*"))
	for _, f := range files {
		os.WriteFile(f, []byte("ciphers x\n"), 0o600)
	}
	if got := askOpenSSHDefaults(fake); !maps.Equal(got, want) || count() != 3 {
		t.Fatalf("after damage: %v, %d runs", got, count())
	}
}
