package bench

import (
	"bytes"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
)

// The mitogen column: Mitogen's strategy plugin (mitogen_linear) with
// `-c ssh`, which it replaces with its own connection. Mitogen is not
// part of the repository: the bench unpacks its source archive into a
// directory of its own at run time.

// mitogenArchive is the archive's name beside the repository, under
// ../shared/baselines.
const mitogenArchive = "mitogen-0.3.51-src.tar.gz"

// mitogenEnv names the archive when --mitogen is not given.
const mitogenEnv = "SPINDLE_BENCH_MITOGEN"

// mitogenPath is the archive: --mitogen, else $SPINDLE_BENCH_MITOGEN,
// else shared/baselines/mitogen-0.3.51-src.tar.gz in the nearest
// directory above the repository that holds this executable or the
// working directory (../shared beside it, or further up for a worktree).
func mitogenPath(f ansibleFlags) (string, error) {
	explicit := f.mitogen
	if explicit == "" {
		explicit = os.Getenv(mitogenEnv)
	}
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("the mitogen column unpacks %s: %w", explicit, err)
		}
		return explicit, nil
	}
	var tried []string
	for _, r := range repoRoots() {
		// A worktree may sit a level below the main repository, whose
		// ../shared is then further up.
		for d := filepath.Dir(r); ; d = filepath.Dir(d) {
			p := filepath.Join(d, "shared", "baselines", mitogenArchive)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			if !slices.Contains(tried, p) {
				tried = append(tried, p)
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("the mitogen column unpacks %s: not found in %v (give --mitogen PATH or set %s)",
		mitogenArchive, tried, mitogenEnv)
}

// unpackMitogen unpacks the archive into dir and returns the directory
// of its strategy plugins.
func unpackMitogen(archive, dir string) (string, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	cmd := osexec.Command("tar", "-xzf", archive, "-C", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v: %s", cmd, err, bytes.TrimSpace(out))
	}
	strategy := filepath.Join(dir, "ansible_mitogen", "plugins", "strategy")
	if _, err := os.Stat(filepath.Join(strategy, "mitogen_linear.py")); err != nil {
		return "", fmt.Errorf("%s holds no ansible_mitogen/plugins/strategy/mitogen_linear.py", archive)
	}
	return strategy, nil
}

// mitogenSystem is the column, its err set when the archive cannot be
// found or unpacked into the bench's directory.
func mitogenSystem(f ansibleFlags, benchDir string) *ansibleSystem {
	s := &ansibleSystem{name: "mitogen", conn: "ssh"}
	archive, err := mitogenPath(f)
	if err != nil {
		s.err = err
		return s
	}
	strategy, err := unpackMitogen(archive, filepath.Join(benchDir, "mitogen"))
	if err != nil {
		s.err = err
		return s
	}
	s.env = func(runDir string) []string {
		return []string{
			"ANSIBLE_STRATEGY_PLUGINS=" + strategy,
			"ANSIBLE_STRATEGY=mitogen_linear",
			// The multiplexers' UNIX sockets, one run's own.
			"TMPDIR=" + runDir,
		}
	}
	return s
}
