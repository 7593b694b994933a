package cli

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle/target"
)

// Shell completion of TARGET (`spindle completion bash|zsh|fish`): the
// last hop of a comma-separated chain completes to a hop kind ("sudo:",
// "docker:", "local") or to a Host alias of ssh_config (-F FILE or
// ~/.ssh/config, its Include files too). Nothing is completed after a
// kind's colon: that would mean connecting (container names, users).

// completeTarget completes the TARGET argument of run, shell, ping, info.
func (g *globals) completeTarget(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp // the command runs remotely
	}
	return withDirective(targetCandidates(g.conn.configFile, toComplete, ""))
}

// completeCopy completes cp's SRC and DST: a TARGET followed by ':' (the
// remote path is not completed), or else a local file.
func (g *globals) completeCopy(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) >= 2 || strings.HasPrefix(toComplete, "/") || strings.HasPrefix(toComplete, ".") {
		return nil, cobra.ShellCompDirectiveDefault
	}
	if strings.Contains(toComplete, ":/") {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cands := targetCandidates(g.conn.configFile, toComplete, ":")
	if len(cands) == 0 {
		return nil, cobra.ShellCompDirectiveDefault
	}
	return cands, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
}

// withDirective adds no space after the candidates when each of them
// still needs an argument ("sudo:").
func withDirective(cands []string) ([]string, cobra.ShellCompDirective) {
	d := cobra.ShellCompDirectiveNoFileComp
	if len(cands) > 0 {
		open := true
		for _, c := range cands {
			open = open && strings.HasSuffix(c, ":")
		}
		if open {
			d |= cobra.ShellCompDirectiveNoSpace
		}
	}
	return cands, d
}

// targetCandidates completes the last hop of toComplete; a finished hop
// (kinds taking no argument, hosts) gets suffix appended.
func targetCandidates(configFile, toComplete, suffix string) []string {
	prefix, last := "", toComplete
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		prefix, last = toComplete[:i+1], toComplete[i+1:]
	}
	if strings.Contains(last, ":") {
		return nil
	}
	var words []string
	for _, k := range target.Kinds() {
		if k.Bare {
			words = append(words, k.Name+suffix)
		}
		if k.WithArg {
			words = append(words, k.Name+":")
		}
	}
	for _, h := range sshConfigHosts(configFile) {
		words = append(words, h+suffix)
	}
	sort.Strings(words)
	var out []string
	for i, w := range words {
		if strings.HasPrefix(w, last) && (i == 0 || w != words[i-1]) {
			out = append(out, prefix+w)
		}
	}
	return out
}

// sshConfigHosts lists the Host aliases of an ssh_config file (or
// ~/.ssh/config when file is ""; none for "none"), following Include, and
// leaving out patterns. Unreadable files give nothing: this only helps
// typing.
func sshConfigHosts(file string) []string {
	if file == "none" {
		return nil
	}
	sshDir := filepath.Join(homeDir(), ".ssh")
	if file == "" {
		file = filepath.Join(sshDir, "config")
	}
	var hosts []string
	var read func(path string, depth int)
	read = func(path string, depth int) {
		f, err := os.Open(path)
		if err != nil || depth > 8 {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(strings.Replace(sc.Text(), "=", " ", 1))
			if len(fields) < 2 {
				continue
			}
			switch strings.ToLower(fields[0]) {
			case "host":
				for _, h := range fields[1:] {
					if !strings.ContainsAny(h, "*?!") {
						hosts = append(hosts, h)
					}
				}
			case "include":
				for _, pat := range fields[1:] {
					if strings.HasPrefix(pat, "~/") {
						pat = filepath.Join(homeDir(), pat[2:])
					} else if !filepath.IsAbs(pat) {
						pat = filepath.Join(sshDir, pat)
					}
					matches, _ := filepath.Glob(pat)
					for _, m := range matches {
						read(m, depth+1)
					}
				}
			}
		}
	}
	read(file, 0)
	return hosts
}

// homeDir is $HOME, or the password database's answer.
func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	return ""
}
