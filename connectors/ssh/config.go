package ssh

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kevinburke/ssh_config"
	"go.uber.org/zap"
)

// hostConfig is what ssh_config says about one Host, after ssh's own
// resolution (first value wins, tokens and ~ expanded).
type hostConfig struct {
	Alias                 string
	HostName              string
	User                  string
	Port                  int
	IdentityFiles         []string
	IdentitiesOnly        bool
	SendEnv               []string // patterns of local variables to send; "-PATTERN" drops earlier ones
	SetEnv                []string // NAME=VALUE to set
	BatchMode             bool
	NoMethods             []string // methods turned off: PubkeyAuthentication no, …
	PreferredMethods      []string // PreferredAuthentications, in order; nil: ssh's order
	CertificateFiles      []string
	IdentityAgent         string   // "": SSH_AUTH_SOCK; "none"; "SSH_AUTH_SOCK"; "$VAR"; a socket path
	ForwardAgent          string   // "", "no", "yes", or an agent socket as in IdentityAgent
	AddKeysToAgent        string   // as written or as ssh -G prints it (parseAddKeys)
	LocalForwards         []string // "LISTEN CONNECT", as ssh -G prints LocalForward
	RemoteForwards        []string // "LISTEN CONNECT" (RemoteForward)
	DynamicForwards       []string // "LISTEN" (DynamicForward)
	EscapeChar            string   // as written or as ssh -G prints it ("~", "^]", "none"); "" unset
	ProxyJump             string   // "" or "none": direct
	ProxyCommand          string   // "" or "none": none; run by dialProxyCommand
	HostKeyAlias          string
	StrictHostKeyChecking string // yes, no, off, accept-new, ask
	HashKnownHosts        bool
	UserKnownHostsFiles   []string
	GlobalKnownHostsFiles []string
	ConnectTimeout        time.Duration // 0 = not set
	ServerAliveInterval   time.Duration // 0 = not set
	ServerAliveCountMax   int           // 0 = not set
	ConnectionAttempts    int           // 0 = not set
	// Ciphers, MACs, KexAlgorithms and HostKeyAlgorithms as written
	// ("+LIST", "-LIST", "^LIST" or LIST), or as ssh -G prints them:
	// OpenSSH's defaults with the configuration applied, which
	// openSSHDefaults (keyed by lowercase keyword) tell apart.
	Ciphers, MACs, KexAlgorithms, HostKeyAlgorithms string
	PasswordPrompts                                 int // NumberOfPasswordPrompts; 0 = not set, -1 = none
	openSSHDefaults                                 map[string]string
	Source                                          string // where the values came from, for messages
}

// sshBinary is the OpenSSH client asked with `ssh -G`; tests blank it to
// exercise the ssh_config fallback.
var sshBinary = "ssh"

// resolveConfig resolves host like `ssh` would: by asking `ssh -G` when
// the OpenSSH client is installed, else by reading ssh_config with
// kevinburke/ssh_config (strict: a file that does not parse is an error).
// user and port, when set, are passed to ssh -G so that its %r/%p tokens
// see them.
func resolveConfig(ctx context.Context, host, configFile, user string, port int, log *zap.Logger) (*hostConfig, error) {
	if sshBinary != "" {
		if path, err := exec.LookPath(sshBinary); err == nil {
			return resolveWithSSH(ctx, path, host, configFile, user, port)
		}
		log.Debug("ssh client not found; reading ssh_config directly", zap.String("host", host))
	}
	return resolveWithFile(host, configFile, user, port)
}

// sshGTTL is how long an `ssh -G` answer is reused.
const sshGTTL = 5 * time.Second

// sshGAnswers shares `ssh -G` answers between connections: twenty hops
// through one bastion at once would otherwise start the ssh client twenty
// times for the same question (8 % of all CPU in via_connect_parallel_20).
// An answer is kept for sshGTTL, so an edit of ssh_config is seen by the
// connections after it, and concurrent identical questions share one run.
var sshGAnswers = struct {
	sync.Mutex
	m map[string]*sshGAnswer
}{m: map[string]*sshGAnswer{}}

type sshGAnswer struct {
	done chan struct{}
	at   time.Time
	hc   *hostConfig
	err  error
}

func resolveWithSSH(ctx context.Context, path, host, configFile, user string, port int) (*hostConfig, error) {
	// The key names the config file's version too, so that an edit is
	// seen at once (Included files only after sshGTTL).
	cfg := configFile
	if cfg == "" {
		cfg = filepath.Join(os.Getenv("HOME"), ".ssh", "config")
	}
	version := "-"
	if fi, err := os.Stat(cfg); err == nil {
		version = fi.ModTime().String() + "/" + strconv.FormatInt(fi.Size(), 10)
	}
	key := strings.Join([]string{path, host, cfg, version, user, strconv.Itoa(port)}, "\x00")
	sshGAnswers.Lock()
	a := sshGAnswers.m[key]
	if a != nil && a.err == nil && !a.at.IsZero() && time.Since(a.at) > sshGTTL {
		a = nil
	}
	if a == nil {
		a = &sshGAnswer{done: make(chan struct{})}
		sshGAnswers.m[key] = a
		sshGAnswers.Unlock()
		// Not the caller's ctx: the run is shared, and bounded anyway.
		hc, err := runSSHG(context.WithoutCancel(ctx), path, host, configFile, user, port)
		sshGAnswers.Lock()
		a.hc, a.err, a.at = hc, err, time.Now()
		if a.err != nil {
			delete(sshGAnswers.m, key) // failures are not remembered
		}
		close(a.done)
	}
	sshGAnswers.Unlock()
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if a.err != nil {
		return nil, a.err
	}
	return a.hc.clone(), nil
}

func (hc *hostConfig) clone() *hostConfig {
	c := *hc
	c.IdentityFiles = slices.Clone(hc.IdentityFiles)
	c.UserKnownHostsFiles = slices.Clone(hc.UserKnownHostsFiles)
	c.GlobalKnownHostsFiles = slices.Clone(hc.GlobalKnownHostsFiles)
	return &c
}

func runSSHG(ctx context.Context, path, host, configFile, user string, port int) (*hostConfig, error) {
	argv := []string{"-G"}
	if configFile != "" {
		argv = append(argv, "-F", configFile)
	}
	if user != "" {
		argv = append(argv, "-l", user)
	}
	if port != 0 {
		argv = append(argv, "-p", strconv.Itoa(port))
	}
	argv = append(argv, "--", host)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(stderr.String()), "\n", " \x00 ")), " ")
		msg = strings.ReplaceAll(msg, " \x00 ", "; ")
		if msg == "" {
			msg = err.Error()
		}
		where := "your ssh configuration"
		if configFile != "" {
			where = configFile
		}
		return nil, fmt.Errorf("reading %s with `ssh -G %s` failed: %s", where, host, msg)
	}
	hc, err := parseSSHG(stdout.Bytes())
	if err != nil {
		return nil, err
	}
	hc.Alias = host
	hc.Source = "ssh -G"
	hc.openSSHDefaults = openSSHDefaults(path)
	// OpenSSH before 9.x prints IdentityFile with its %-tokens unexpanded.
	tk := hc.tokens(host)
	for i, f := range hc.IdentityFiles {
		hc.IdentityFiles[i] = tk.expand(f)
	}
	for i, f := range hc.CertificateFiles {
		hc.CertificateFiles[i] = tk.expand(f)
	}
	for i, f := range hc.UserKnownHostsFiles {
		hc.UserKnownHostsFiles[i] = tk.expand(f)
	}
	return hc, nil
}

// openSSHDefaultLists holds, per ssh binary, what `ssh -G -F none` prints
// for the algorithm lists: OpenSSH's own defaults, against which a
// configuration's lists are told apart (algoKeyword.fromOpenSSH). They
// are asked once per binary and kept in the user's cache directory, so
// that a CLI command does not pay for a second ssh process (8 ms on a
// slow VM) every time.
var openSSHDefaultLists sync.Map // ssh binary → func() map[string]string

var algorithmKeywords = []string{"ciphers", "macs", "kexalgorithms", "hostkeyalgorithms"}

// openSSHDefaults returns path's default lists (lowercase keyword → list),
// or nil when it could not tell.
func openSSHDefaults(path string) map[string]string {
	ask, _ := openSSHDefaultLists.LoadOrStore(path, sync.OnceValue(func() map[string]string { return askOpenSSHDefaults(path) }))
	return ask.(func() map[string]string)()
}

// askOpenSSHDefaults reads the defaults from the cache file for this very
// binary (its size, mtime and inode), else asks it and writes the file.
func askOpenSSHDefaults(path string) map[string]string {
	cache := ""
	if fi, err := os.Stat(path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if dir, err := os.UserCacheDir(); err == nil {
				sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%d", path, fi.Size(), fi.ModTime().UnixNano(), st.Ino))
				cache = filepath.Join(dir, "spindle", "openssh-defaults-"+hex.EncodeToString(sum[:8]))
			}
		}
	}
	if cache != "" {
		if b, err := os.ReadFile(cache); err == nil {
			if lists := parseDefaultLists(b); lists != nil {
				return lists
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-G", "-F", "none", "--", "spindle.invalid").Output()
	if err != nil {
		return nil
	}
	lists := parseDefaultLists(out)
	if lists != nil && cache != "" {
		var b strings.Builder
		for _, k := range algorithmKeywords {
			fmt.Fprintf(&b, "%s %s\n", k, lists[k])
		}
		// Best effort: without the file, the next command asks again.
		if os.MkdirAll(filepath.Dir(cache), 0o700) == nil {
			tmp := fmt.Sprintf("%s.%d.tmp", cache, os.Getpid())
			if os.WriteFile(tmp, []byte(b.String()), 0o600) == nil && os.Rename(tmp, cache) != nil {
				os.Remove(tmp)
			}
		}
	}
	return lists
}

// parseDefaultLists picks the four algorithm lists out of ssh -G's output
// (or the cache file, in the same form); nil unless all four are there.
func parseDefaultLists(out []byte) map[string]string {
	lists := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		key, val, _ := strings.Cut(strings.TrimSpace(line), " ")
		if key = strings.ToLower(key); slices.Contains(algorithmKeywords, key) && strings.TrimSpace(val) != "" {
			lists[key] = strings.TrimSpace(val)
		}
	}
	if len(lists) != len(algorithmKeywords) {
		return nil
	}
	return lists
}

// parseSSHG parses the lowercase `key value` lines that `ssh -G` prints.
func parseSSHG(out []byte) (*hostConfig, error) {
	hc := &hostConfig{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		key, val, _ := strings.Cut(line, " ")
		key = strings.ToLower(key)
		val = strings.TrimSpace(val)
		if err := hc.set(key, val, nil); err != nil {
			return nil, fmt.Errorf("ssh -G: %w", err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ssh -G: %w", err)
	}
	return hc, nil
}

// tokens expands ~ and the %-tokens ssh_config allows in file names. A nil
// expander leaves them alone (ssh -G has expanded them already, except a
// leading ~ in some versions).
type tokens map[byte]string

func (t tokens) expand(s string) string {
	s = expandHome(s)
	if t == nil || !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		if s[i] == '%' {
			b.WriteByte('%')
		} else if v, ok := t[s[i]]; ok {
			b.WriteString(v)
		} else {
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	if u, err := user.Current(); err == nil {
		return u.HomeDir
	}
	return ""
}

func expandHome(p string) string {
	if p == "~" {
		return homeDir()
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(homeDir(), p[2:])
	}
	return p
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// unvisEscapeChar turns an EscapeChar as ssh -G prints it (vis(3)-encoded:
// \^] for ^], \\ for a backslash, \ooo in octal) back into ssh_config's
// syntax (^] or the character itself). ssh rejects those encoded forms in
// a config file, so a value written by a user passes unchanged.
func unvisEscapeChar(v string) string {
	switch {
	case len(v) == 3 && v[:2] == `\^`:
		return v[1:]
	case v == `\\`:
		return `\`
	case len(v) == 4 && v[0] == '\\':
		if n, err := strconv.ParseUint(v[1:], 8, 8); err == nil {
			return string([]byte{byte(n)})
		}
	}
	return v
}

// set records one resolved keyword (lowercase). Unknown keywords are
// ignored: they are for ssh, not for us.
func (hc *hostConfig) set(key, val string, tk tokens) error {
	switch key {
	case "hostname":
		hc.HostName = unquote(val)
	case "user":
		hc.User = unquote(val)
	case "port":
		p, err := strconv.Atoi(val)
		if err != nil || p <= 0 || p > 65535 {
			return fmt.Errorf("bad port %q", val)
		}
		hc.Port = p
	case "identityfile":
		if v := unquote(val); v != "" && v != "none" {
			hc.IdentityFiles = append(hc.IdentityFiles, tk.expand(v))
		}
	case "identitiesonly":
		hc.IdentitiesOnly = yes(val)
	case "sendenv":
		hc.SendEnv = append(hc.SendEnv, splitQuoted(val)...)
	case "setenv":
		if tk == nil { // ssh -G: one NAME=VALUE per line, unquoted
			hc.SetEnv = append(hc.SetEnv, val)
		} else {
			hc.SetEnv = append(hc.SetEnv, splitQuoted(val)...)
		}
	case "batchmode":
		hc.BatchMode = yes(val)
	case "pubkeyauthentication", "kbdinteractiveauthentication", "passwordauthentication":
		// pubkeyauthentication also takes unbound and host-bound: both on.
		if v := strings.ToLower(val); v == "no" || v == "false" {
			hc.NoMethods = append(hc.NoMethods, map[string]string{"pubkeyauthentication": "publickey",
				"kbdinteractiveauthentication": "keyboard-interactive", "passwordauthentication": "password"}[key])
		}
	case "preferredauthentications":
		hc.PreferredMethods = strings.Split(val, ",")
	case "certificatefile":
		if v := unquote(val); v != "" && v != "none" {
			hc.CertificateFiles = append(hc.CertificateFiles, tk.expand(v))
		}
	case "forwardagent":
		hc.ForwardAgent = expandSocket(unquote(val), tk)
		if isYesNo(hc.ForwardAgent) && !yes(hc.ForwardAgent) {
			hc.ForwardAgent = "" // no: ssh's default, as ssh -G prints it
		}
	case "localforward":
		hc.LocalForwards = append(hc.LocalForwards, val)
	case "remoteforward":
		hc.RemoteForwards = append(hc.RemoteForwards, val)
	case "dynamicforward":
		hc.DynamicForwards = append(hc.DynamicForwards, val)
	case "escapechar":
		hc.EscapeChar = unvisEscapeChar(unquote(val))
	case "addkeystoagent":
		hc.AddKeysToAgent = val
		if v := strings.ToLower(val); v == "no" || v == "false" {
			hc.AddKeysToAgent = "" // ssh's default, as ssh -G prints it
		}
	case "identityagent":
		hc.IdentityAgent = expandSocket(unquote(val), tk)
	case "proxyjump":
		hc.ProxyJump = val
	case "proxycommand":
		hc.ProxyCommand = val
	case "numberofpasswordprompts":
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return fmt.Errorf("bad NumberOfPasswordPrompts %q", val)
		}
		hc.PasswordPrompts = n
		if n == 0 {
			hc.PasswordPrompts = -1 // none: no password or passphrase is asked
		}
	case "ciphers":
		hc.Ciphers = val
	case "macs":
		hc.MACs = val
	case "kexalgorithms":
		hc.KexAlgorithms = val
	case "hostkeyalgorithms":
		hc.HostKeyAlgorithms = val
	case "hostkeyalias":
		hc.HostKeyAlias = val
	case "stricthostkeychecking":
		hc.StrictHostKeyChecking = strings.ToLower(val)
	case "hashknownhosts":
		hc.HashKnownHosts = yes(val)
	case "userknownhostsfile":
		hc.UserKnownHostsFiles = fileList(val, tk)
	case "globalknownhostsfile":
		hc.GlobalKnownHostsFiles = fileList(val, tk)
	case "connecttimeout":
		d, err := seconds(val)
		if err != nil {
			return fmt.Errorf("bad ConnectTimeout %q", val)
		}
		hc.ConnectTimeout = d
	case "serveraliveinterval":
		d, err := seconds(val)
		if err != nil {
			return fmt.Errorf("bad ServerAliveInterval %q", val)
		}
		hc.ServerAliveInterval = d
	case "connectionattempts":
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 {
			return fmt.Errorf("bad ConnectionAttempts %q", val)
		}
		hc.ConnectionAttempts = n
	case "serveralivecountmax":
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return fmt.Errorf("bad ServerAliveCountMax %q", val)
		}
		hc.ServerAliveCountMax = n
	}
	return nil
}

// splitQuoted splits an ssh_config value into words; double quotes group
// (and are removed), as in ssh.
func splitQuoted(v string) []string {
	var out []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range v {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, w.String())
	}
	return out
}

// sessionEnv is what ssh would pass to the remote session: the variables
// of env (NAME=VALUE, this process's) that sendEnv's patterns select, in
// env's order, then setEnv's. A "-PATTERN" removes the patterns before it
// that it matches, as in ssh.
func sessionEnv(env, sendEnv, setEnv []string) []string {
	var pats []string
	for _, p := range sendEnv {
		if rest, ok := strings.CutPrefix(p, "-"); ok {
			pats = slices.DeleteFunc(pats, func(q string) bool { m, _ := path.Match(rest, q); return m })
			continue
		}
		pats = append(pats, p)
	}
	var out []string
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		for _, p := range pats {
			if m, _ := path.Match(p, name); m {
				out = append(out, kv)
				break
			}
		}
	}
	for _, kv := range setEnv {
		if name, _, ok := strings.Cut(kv, "="); ok && name != "" {
			out = append(out, kv)
		}
	}
	return out
}

// expandSocket expands ~, ${VAR} and tk's tokens in an IdentityAgent or
// ForwardAgent value that names a socket, and leaves their keywords alone
// (yes, no, none, SSH_AUTH_SOCK, and the legacy "$VAR").
func expandSocket(v string, tk tokens) string {
	if isYesNo(v) || v == "none" || v == "SSH_AUTH_SOCK" || legacyEnvRef(v) {
		return v
	}
	return tk.expand(expandEnvBraced(v))
}

// legacyEnvRef reports whether an IdentityAgent value is ssh's older
// "$VAR" form (the socket named by a variable), not a path with ${VAR}.
func legacyEnvRef(v string) bool { return strings.HasPrefix(v, "$") && !strings.HasPrefix(v, "${") }

// expandEnvBraced replaces ${VAR} with the variable's value, as ssh_config
// does in the options that allow environment variables (a bare $VAR is
// left alone, as ssh leaves it).
func expandEnvBraced(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		b.WriteString(os.Getenv(s[i+2 : i+j]))
		s = s[i+j+1:]
	}
	b.WriteString(s)
	return b.String()
}

func isYesNo(v string) bool {
	switch strings.ToLower(v) {
	case "yes", "true", "no", "false", "":
		return true
	}
	return false
}

func yes(v string) bool {
	switch strings.ToLower(v) {
	case "yes", "true":
		return true
	}
	return false
}

func fileList(val string, tk tokens) []string {
	var out []string
	for _, f := range strings.Fields(val) {
		if f = unquote(f); f != "" && f != "none" {
			out = append(out, tk.expand(f))
		}
	}
	return out
}

// seconds parses an ssh_config time: "none"/"" is unset, a plain number is
// seconds, and OpenSSH's suffixed forms ("1m30s") are accepted too.
func seconds(v string) (time.Duration, error) {
	v = strings.ToLower(strings.TrimSpace(v))
	if v == "" || v == "none" || v == "0" {
		return 0, nil
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, nil
	}
	var total time.Duration
	num := 0
	seen := false
	for _, c := range v {
		if c >= '0' && c <= '9' {
			num = num*10 + int(c-'0')
			seen = true
			continue
		}
		if !seen {
			return 0, errors.New("bad time")
		}
		unit := map[rune]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}[c]
		if unit == 0 {
			return 0, errors.New("bad time")
		}
		total += time.Duration(num) * unit
		num, seen = 0, false
	}
	if seen {
		total += time.Duration(num) * time.Second
	}
	return total, nil
}

// defaultIdentityFiles are OpenSSH's defaults when no IdentityFile is set.
var defaultIdentityFiles = []string{"~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk",
	"~/.ssh/id_ed25519", "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss", "~/.ssh/id_dsa"}

// withoutDefaultIdentities drops OpenSSH's default key files from files.
func withoutDefaultIdentities(files []string) []string {
	var out []string
	for _, f := range files {
		isDefault := false
		for _, d := range defaultIdentityFiles {
			if f == d || f == expandHome(d) {
				isDefault = true
				break
			}
		}
		if !isDefault {
			out = append(out, f)
		}
	}
	return out
}

// resolveWithFile reads ssh_config without OpenSSH: configFile (like
// ssh -F; "none" reads nothing) or ~/.ssh/config then /etc/ssh/ssh_config.
// A file that does not parse is an error naming it: a user's config is
// never silently ignored.
func resolveWithFile(host, configFile, userOverride string, portOverride int) (*hostConfig, error) {
	hc := &hostConfig{Alias: host}
	var get func(key string) (string, error)
	var getAll func(key string) ([]string, error)
	switch configFile {
	case "none":
		hc.Source = "defaults (-F none)"
		get = func(key string) (string, error) { return ssh_config.Default(key), nil }
		getAll = func(key string) ([]string, error) {
			if d := ssh_config.Default(key); d != "" {
				return []string{d}, nil
			}
			return nil, nil
		}
	default:
		us := &ssh_config.UserSettings{}
		where := "~/.ssh/config or /etc/ssh/ssh_config"
		if configFile != "" {
			path := expandHome(configFile)
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("ssh config file %s: %w", configFile, err)
			}
			us.ConfigFinder(func() string { return path })
			where = path
		}
		hc.Source = where
		get = func(key string) (string, error) {
			v, err := us.GetStrict(host, key)
			if err != nil {
				return "", fmt.Errorf("cannot parse ssh config %s: %w (fix it, or point ConfigFile at another file)", where, err)
			}
			return v, nil
		}
		getAll = func(key string) ([]string, error) {
			v, err := us.GetAllStrict(host, key)
			if err != nil {
				return nil, fmt.Errorf("cannot parse ssh config %s: %w (fix it, or point ConfigFile at another file)", where, err)
			}
			return v, nil
		}
	}

	single := []string{"HostName", "User", "Port", "IdentitiesOnly", "ProxyJump", "ProxyCommand",
		"HostKeyAlias", "StrictHostKeyChecking", "HashKnownHosts", "ConnectTimeout",
		"ServerAliveInterval", "ServerAliveCountMax", "BatchMode", "PubkeyAuthentication",
		"KbdInteractiveAuthentication", "PasswordAuthentication", "PreferredAuthentications", "AddKeysToAgent", "ConnectionAttempts", "EscapeChar",
		"Ciphers", "MACs", "KexAlgorithms", "HostKeyAlgorithms", "NumberOfPasswordPrompts"}
	vals := map[string]string{}
	for _, k := range single {
		v, err := get(k)
		if err != nil {
			return nil, err
		}
		vals[k] = v
	}
	// HostName may use %h (the alias) and %%.
	hostname := vals["HostName"]
	if hostname == "" {
		hostname = host
	}
	hostname = tokens{'h': host}.expand(hostname)
	if err := hc.set("hostname", hostname, nil); err != nil {
		return nil, err
	}
	localUser := ""
	if u, err := user.Current(); err == nil {
		localUser = u.Username
	}
	remoteUser := vals["User"]
	if userOverride != "" {
		remoteUser = userOverride
	}
	if remoteUser == "" {
		remoteUser = localUser
	}
	hc.User = remoteUser
	for _, k := range single[2:] {
		// The parser answers ssh's default (order) when none is set, which
		// ssh -G leaves out: nil means that order here, and x/crypto's
		// algorithms.
		if vals[k] == "" || vals[k] == ssh_config.Default(k) && slices.Contains([]string{"PreferredAuthentications", "Ciphers", "MACs", "KexAlgorithms", "HostKeyAlgorithms"}, k) {
			continue
		}
		if err := hc.set(strings.ToLower(k), vals[k], nil); err != nil {
			return nil, fmt.Errorf("ssh config %s: %w", hc.Source, err)
		}
	}
	if portOverride != 0 {
		hc.Port = portOverride
	}
	if hc.Port == 0 {
		hc.Port = 22
	}
	tk := hc.tokens(host)

	ids, err := getAll("IdentityFile")
	if err != nil {
		return nil, err
	}
	if len(ids) == 1 && ids[0] == ssh_config.Default("IdentityFile") {
		ids = defaultIdentityFiles
	}
	for _, id := range ids {
		_ = hc.set("identityfile", id, tk)
	}
	certs, err := getAll("CertificateFile")
	if err != nil {
		return nil, err
	}
	for _, c := range certs {
		_ = hc.set("certificatefile", c, tk)
	}
	for _, key := range []string{"SendEnv", "SetEnv", "LocalForward", "RemoteForward", "DynamicForward"} {
		vs, err := getAll(key)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			_ = hc.set(strings.ToLower(key), v, tk)
		}
	}
	for _, key := range []string{"IdentityAgent", "ForwardAgent"} {
		v, err := get(key)
		if err != nil {
			return nil, err
		}
		if v != "" {
			_ = hc.set(strings.ToLower(key), v, tk)
		}
	}
	for key, dst := range map[string]*[]string{"UserKnownHostsFile": &hc.UserKnownHostsFiles, "GlobalKnownHostsFile": &hc.GlobalKnownHostsFiles} {
		v, err := get(key)
		if err != nil {
			return nil, err
		}
		*dst = fileList(v, tk)
	}
	return hc, nil
}

// tokens are the values of ssh_config's %-tokens for file names.
func (hc *hostConfig) tokens(alias string) tokens {
	localUser := ""
	if u, err := user.Current(); err == nil {
		localUser = u.Username
	}
	return tokens{'d': homeDir(), 'u': localUser, 'h': hc.HostName, 'r': hc.User,
		'p': strconv.Itoa(hc.Port), 'n': alias, 'l': localHostname()}
}

func localHostname() string {
	h, _ := os.Hostname()
	if i := strings.IndexByte(h, '.'); i > 0 {
		h = h[:i]
	}
	return h
}
