package bench

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// makeArchive writes a .tar.gz of files (path → content) and returns it.
func makeArchive(t *testing.T, files map[string]string) string {
	t.Helper()
	src := t.TempDir()
	for p, content := range files {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	archive := filepath.Join(t.TempDir(), "m.tar.gz")
	if out, err := osexec.Command("tar", "-czf", archive, "-C", src, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	return archive
}

// The mitogen column unpacks its archive into the bench's directory and
// points Ansible at its strategy plugin, with a run's own socket
// directory; without an archive it is left out with a word on why.
func TestMitogenSystem(t *testing.T) {
	archive := makeArchive(t, map[string]string{
		"mitogen/__init__.py":                                "",
		"ansible_mitogen/plugins/strategy/mitogen_linear.py": "",
	})
	benchDir := t.TempDir()
	s := mitogenSystem(ansibleFlags{mitogen: archive}, benchDir)
	if s.err != nil {
		t.Fatal(s.err)
	}
	if s.name != "mitogen" || s.conn != "ssh" {
		t.Errorf("system %s -c %s, want mitogen -c ssh", s.name, s.conn)
	}
	strategy := filepath.Join(benchDir, "mitogen", "ansible_mitogen", "plugins", "strategy")
	env := s.env("/run/dir")
	for _, want := range []string{"ANSIBLE_STRATEGY_PLUGINS=" + strategy, "ANSIBLE_STRATEGY=mitogen_linear", "TMPDIR=/run/dir"} {
		if !slices.Contains(env, want) {
			t.Errorf("env %q has no %q", env, want)
		}
	}
	if _, err := os.Stat(filepath.Join(benchDir, "mitogen", "mitogen", "__init__.py")); err != nil {
		t.Errorf("the mitogen package is not unpacked: %v", err)
	}

	// An archive without the strategy plugin, and none at all.
	bad := makeArchive(t, map[string]string{"mitogen/__init__.py": ""})
	if s := mitogenSystem(ansibleFlags{mitogen: bad}, t.TempDir()); s.err == nil || !strings.Contains(s.err.Error(), "mitogen_linear.py") {
		t.Errorf("archive without the plugin: err %v", s.err)
	}
	missing := filepath.Join(t.TempDir(), "none.tar.gz")
	if s := mitogenSystem(ansibleFlags{mitogen: missing}, t.TempDir()); s.err == nil || !strings.Contains(s.err.Error(), missing) {
		t.Errorf("no archive: err %v", s.err)
	}
	t.Setenv(mitogenEnv, archive)
	if p, err := mitogenPath(ansibleFlags{}); err != nil || p != archive {
		t.Errorf("mitogenPath with $%s = %q, %v", mitogenEnv, p, err)
	}
}

// targetProcs takes the user's processes and their descendants (a root
// interpreter under sudo), not sshd's own nor those already there.
func TestTargetProcs(t *testing.T) {
	procs := map[int]procEntry{
		1:  {ppid: 0, uid: 0, comm: "init"},
		10: {ppid: 1, uid: 0, comm: "sshd"},
		11: {ppid: 10, uid: 1000, comm: "sshd"}, // the session's, as the user
		12: {ppid: 11, uid: 1000, comm: "python3"},
		13: {ppid: 12, uid: 0, comm: "sudo"},
		14: {ppid: 13, uid: 0, comm: "python3"},
		20: {ppid: 1, uid: 1000, comm: "python3"}, // an earlier run's
		30: {ppid: 1, uid: 1001, comm: "python3"},
	}
	var got []int
	for pid := range targetProcs(procs, 1000, map[int]bool{20: true}) {
		got = append(got, pid)
	}
	slices.Sort(got)
	if want := []int{12, 13, 14}; !slices.Equal(got, want) {
		t.Errorf("targetProcs = %v, want %v", got, want)
	}
}

// A sample sees a process started after the watch began, and its RSS;
// Stop ends the sampling.
func TestTargetRSSSample(t *testing.T) {
	procs, err := readProcs()
	if err != nil {
		t.Fatal(err)
	}
	uid := os.Getuid()
	old := targetProcs(procs, uid, nil)
	cmd := osexec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck // it may have exited
		cmd.Wait()         //nolint:errcheck // killed
	})
	procs, err = readProcs()
	if err != nil {
		t.Fatal(err)
	}
	if !targetProcs(procs, uid, old)[cmd.Process.Pid] {
		t.Fatalf("targetProcs has no pid %d started after the snapshot", cmd.Process.Pid)
	}
	w := &rssWatch{}
	w.sample(uid, old)
	if w.peak.rss < rss(cmd.Process.Pid) || w.peak.rss <= 0 || w.peak.pss <= 0 || w.peak.pss > w.peak.rss {
		t.Errorf("peak %+v, want at least sleep's RSS %d, and a PSS no larger", w.peak, rss(cmd.Process.Pid))
	}
	live, err := watchTargetRSS(uid)
	if err != nil {
		t.Fatal(err)
	}
	if peak := live.Stop(); peak.rss < 0 || peak.pss < 0 {
		t.Errorf("Stop = %+v", peak)
	}
}
