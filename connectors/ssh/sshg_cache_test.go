package ssh

import (
	"context"
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
	script := "#!/bin/sh\necho run >> " + runs + "\nprintf 'hostname web1.example\\nuser deploy\\nport 2222\\nidentityfile ~/.ssh/id_a\\n'\n"
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
