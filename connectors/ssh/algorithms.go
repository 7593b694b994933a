package ssh

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	gossh "golang.org/x/crypto/ssh"
)

// cryptoPrefs are the transport algorithms to offer, from ssh_config's
// Ciphers, MACs, KexAlgorithms and HostKeyAlgorithms and the Options of
// the same names. A nil list keeps x/crypto's defaults, which Spindle's
// figures are measured with (AES-GCM first: cheaper than OpenSSH's
// chacha20-poly1305 where the CPU has AES instructions).
type cryptoPrefs struct {
	Ciphers      []string
	MACs         []string
	KeyExchanges []string
	HostKeys     []string
}

// algoKeyword describes one ssh_config algorithm list: its keyword, what
// x/crypto offers when the list is unset, and every name it implements
// (secure or not: a user who names ssh-dss or 3des-cbc gets it, as with
// ssh).
type algoKeyword struct {
	name        string // as ssh_config spells it
	defaults    []string
	implemented []string
}

var (
	xDefaults = func() gossh.Config { var c gossh.Config; c.SetDefaults(); return c }()
	supported = gossh.SupportedAlgorithms()
	insecure  = gossh.InsecureAlgorithms()

	cipherKeyword = algoKeyword{"Ciphers", xDefaults.Ciphers, concat(supported.Ciphers, insecure.Ciphers)}
	macKeyword    = algoKeyword{"MACs", xDefaults.MACs, concat(supported.MACs, insecure.MACs)}
	kexKeyword    = algoKeyword{"KexAlgorithms", xDefaults.KeyExchanges,
		concat(supported.KeyExchanges, []string{"curve25519-sha256@libssh.org"}, insecure.KeyExchanges)}
	// x/crypto does not export its host key defaults; these are they, in
	// its order (ClientConfig.HostKeyAlgorithms nil), less any it dropped.
	hostKeyKeyword = algoKeyword{"HostKeyAlgorithms", nil, concat(supported.HostKeys, insecure.HostKeys)}
)

func init() {
	hostKeyKeyword.defaults = slices.DeleteFunc([]string{
		gossh.CertAlgoRSASHA256v01, gossh.CertAlgoRSASHA512v01, gossh.CertAlgoRSAv01, gossh.InsecureCertAlgoDSAv01,
		gossh.CertAlgoECDSA256v01, gossh.CertAlgoECDSA384v01, gossh.CertAlgoECDSA521v01, gossh.CertAlgoED25519v01,
		gossh.KeyAlgoECDSA256, gossh.KeyAlgoECDSA384, gossh.KeyAlgoECDSA521, gossh.KeyAlgoRSASHA256,
		gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSA, gossh.InsecureKeyAlgoDSA, gossh.KeyAlgoED25519,
	}, func(a string) bool { return !slices.Contains(hostKeyKeyword.implemented, a) })
}

// concat joins lists, dropping repeats.
func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, a := range l {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// assemble applies an ssh_config algorithm list to x/crypto's defaults as
// OpenSSH does (ssh_config(5)): "+LIST" appends to the defaults, "-LIST"
// removes from them, "^LIST" puts LIST first, and a plain LIST replaces
// them. Names may be patterns (* and ?). Names x/crypto does not
// implement (umac-64@openssh.com, sntrup761x25519-sha512, ...) are left
// out and returned in dropped: ssh users list them as a matter of course.
// An empty spec returns nil: the defaults.
func (k algoKeyword) assemble(spec string) (list, dropped []string, err error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil, nil
	}
	whole := spec
	op := spec[0]
	if op == '+' || op == '-' || op == '^' {
		spec = spec[1:]
	}
	var named []string // what the list names, expanded
	for _, p := range strings.Split(spec, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if op == '-' {
			named = append(named, p) // matched against the defaults below
			continue
		}
		matched := false
		for _, a := range k.implemented {
			if globMatch(p, a) && !slices.Contains(named, a) {
				named = append(named, a)
				matched = true
			} else if globMatch(p, a) {
				matched = true
			}
		}
		if !matched {
			dropped = append(dropped, p)
		}
	}
	switch op {
	case '+':
		list = concat(k.defaults, named)
	case '-':
		list = slices.DeleteFunc(slices.Clone(k.defaults), func(a string) bool {
			return slices.ContainsFunc(named, func(p string) bool { return globMatch(p, a) })
		})
	case '^':
		list = concat(named, k.defaults)
	default:
		list = named
	}
	if len(list) == 0 {
		return nil, dropped, k.leavesNothing(whole)
	}
	return list, dropped, nil
}

// fromOpenSSH turns a list as `ssh -G` prints it (OpenSSH's defaults with
// the configuration applied) into what to offer, given what `ssh -G` prints
// with no configuration at all (ossh). Unchanged, it is nil: x/crypto's
// defaults. Where the configuration only added names at the end or the
// front of OpenSSH's defaults (what "+" and "^" do), they are added to
// x/crypto's defaults the same way; where it (also) removed some (what
// "-" does), x/crypto's defaults are cut down to the names the list
// keeps. Either way x/crypto's order is kept. Anything else (a list of
// its own, a system crypto policy's order) is taken as it is, less what
// x/crypto does not implement.
func (k algoKeyword) fromOpenSSH(printed, ossh string) (list, dropped []string, err error) {
	if printed == "" || printed == ossh {
		return nil, nil, nil
	}
	g, d := splitList(printed), splitList(ossh)
	in := func(l []string) func(string) bool { return func(a string) bool { return slices.Contains(l, a) } }
	added := slices.DeleteFunc(slices.Clone(g), in(d))
	removed := slices.DeleteFunc(slices.Clone(d), in(g))
	kept := slices.DeleteFunc(slices.Clone(g), in(added))
	if len(d) == 0 || !slices.Equal(kept, slices.DeleteFunc(slices.Clone(d), in(removed))) {
		return k.assemble(printed)
	}
	var head, tail []string
	switch {
	case slices.Equal(g[len(kept):], added):
		tail = added
	case slices.Equal(g[:len(added)], added):
		head = added
	default:
		return k.assemble(printed)
	}
	base := k.defaults
	if len(removed) > 0 {
		base = slices.DeleteFunc(slices.Clone(base), func(a string) bool { return !slices.Contains(g, a) })
	}
	for _, a := range added {
		if !slices.Contains(k.implemented, a) {
			dropped = append(dropped, a)
		}
	}
	keep := func(l []string) []string {
		return slices.DeleteFunc(slices.Clone(l), func(a string) bool { return !slices.Contains(k.implemented, a) })
	}
	list = concat(keep(head), base, keep(tail))
	if len(list) == 0 {
		return nil, dropped, k.leavesNothing(printed)
	}
	return list, dropped, nil
}

func (k algoKeyword) leavesNothing(spec string) error {
	return fmt.Errorf("%s %s leaves no algorithm that Spindle (x/crypto) implements; it implements %s",
		k.name, spec, strings.Join(k.implemented, ","))
}

func splitList(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// globMatch matches name against an ssh_config pattern of * and ?.
func globMatch(pattern, name string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for i := len(name); i >= 0; i-- {
				if globMatch(pattern[1:], name[i:]) {
					return true
				}
			}
			return false
		case '?':
			if name == "" {
				return false
			}
			pattern, name = pattern[1:], name[1:]
		default:
			if name == "" || pattern[0] != name[0] {
				return false
			}
			pattern, name = pattern[1:], name[1:]
		}
	}
	return name == ""
}

// algorithmSpecs are the four lists as one hop's settings give them: the
// Options' (ssh_config syntax), else ssh_config's.
type algorithmSpecs struct {
	Ciphers, MACs, KexAlgorithms, HostKeyAlgorithms string
}

// resolveCrypto works out cryptoPrefs from Options (o, ssh_config syntax,
// first) and the host's ssh_config (hc). Names dropped are logged by the
// caller; an unusable list is an error naming where it came from.
func resolveCrypto(o algorithmSpecs, hc *hostConfig) (cryptoPrefs, []string, error) {
	var p cryptoPrefs
	var dropped []string
	for _, f := range []struct {
		k        algoKeyword
		opt, cfg string
		dst      *[]string
	}{
		{cipherKeyword, o.Ciphers, hc.Ciphers, &p.Ciphers},
		{macKeyword, o.MACs, hc.MACs, &p.MACs},
		{kexKeyword, o.KexAlgorithms, hc.KexAlgorithms, &p.KeyExchanges},
		{hostKeyKeyword, o.HostKeyAlgorithms, hc.HostKeyAlgorithms, &p.HostKeys},
	} {
		var list, d []string
		var err error
		switch {
		case f.opt != "":
			list, d, err = f.k.assemble(f.opt)
			if err != nil {
				err = fmt.Errorf("-o %w", err)
			}
		case hc.Source == "ssh -G":
			list, d, err = f.k.fromOpenSSH(f.cfg, hc.openSSHDefaults[strings.ToLower(f.k.name)])
			if err != nil {
				err = fmt.Errorf("ssh config (ssh -G): %w", err)
			}
		default:
			list, d, err = f.k.assemble(f.cfg)
			if err != nil {
				err = fmt.Errorf("ssh config (%s): %w", hc.Source, err)
			}
		}
		if err != nil {
			return p, nil, err
		}
		*f.dst = list
		for _, n := range d {
			dropped = append(dropped, f.k.name+" "+n)
		}
	}
	return p, dropped, nil
}

// apply sets the lists on an x/crypto client configuration; known are the
// host key algorithms known_hosts holds for the host (hostKeyChecker.algorithms).
func (p cryptoPrefs) apply(cfg *gossh.ClientConfig, known []string) {
	cfg.Ciphers = p.Ciphers
	cfg.MACs = p.MACs
	cfg.KeyExchanges = p.KeyExchanges
	cfg.HostKeyAlgorithms = p.hostKeys(known)
}

// hostKeys orders the host key algorithms as OpenSSH does: those of the
// keys known_hosts holds for the host first, so that a server with several
// keys shows one we can check, within what the configuration allows.
func (p cryptoPrefs) hostKeys(known []string) []string {
	if p.HostKeys == nil {
		return known
	}
	if len(known) == 0 {
		return p.HostKeys
	}
	first := slices.DeleteFunc(slices.Clone(p.HostKeys), func(a string) bool { return !slices.Contains(known, a) })
	if len(first) == 0 {
		// The known keys' types are all excluded: offer what is allowed,
		// and the key the server shows is refused as unknown or changed.
		return p.HostKeys
	}
	return first
}

// negotiationHint explains a failed algorithm negotiation: which
// ssh_config keyword governs it and how to add one of the server's
// algorithms, as one would for ssh.
func negotiationHint(err error) (string, bool) {
	var ne *gossh.AlgorithmNegotiationError
	if !errors.As(err, &ne) {
		return "", false
	}
	k := cipherKeyword
	switch w := strings.ToLower(ne.What); {
	case strings.Contains(w, "key exchange"):
		k = kexKeyword
	case strings.Contains(w, "host key"):
		k = hostKeyKeyword
	case strings.Contains(w, "mac"):
		k = macKeyword
	case strings.Contains(w, "compression"):
		return fmt.Sprintf("no common %s with the server (it offers %s)", ne.What, strings.Join(ne.RequestedAlgorithms, ",")), true
	}

	// Both sides list pseudo-algorithms among their key exchanges
	// (ext-info-c, kex-strict-s-v00@openssh.com): flags, not choices.
	choices := func(l []string) string {
		return strings.Join(slices.DeleteFunc(slices.Clone(l), func(a string) bool {
			return strings.HasPrefix(a, "ext-info-") || strings.HasPrefix(a, "kex-strict-")
		}), ",")
	}
	usable := slices.DeleteFunc(slices.Clone(ne.RequestedAlgorithms), func(a string) bool { return !slices.Contains(k.implemented, a) })
	msg := fmt.Sprintf("no common %s algorithm with the server: we offered %s, it offers %s",
		ne.What, choices(ne.SupportedAlgorithms), choices(ne.RequestedAlgorithms))
	if len(usable) == 0 {
		return msg + "; Spindle (x/crypto) implements none of the server's", true
	}
	return fmt.Sprintf("%s; if you accept the risk of an older algorithm, allow it as for ssh: -o %s=+%s (or %s in ssh_config)",
		msg, k.name, usable[0], k.name), true
}
