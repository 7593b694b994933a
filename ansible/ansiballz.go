package ansible

import (
	"crypto/sha256"
	"strings"
	"sync"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/ansible/ansiballz"
)

// A pipelined AnsiballZ payload's zip crosses the link once per agent
// (package ansible/ansiballz): the endpoint remembers which agent has
// which zip, so that later runs send the wrapper and the zip's hash
// alone, with no failed call first. For a context below the first agent
// of its chain (a become child, a later hop), the zip is stored in that
// first agent instead, and the context's agent fetches it up the chain
// (services/modules/upcall): it crosses the controller's link once
// for all the contexts of a chain. It remembers too the first wrapper
// each agent stored for each zip, and sends later wrappers of that zip
// as their differences from it (ansiballz.Wrapper.Delta).

// maxKnown bounds the zip hashes remembered per agent, and maxWrappers
// the wrappers (a few KiB each); past either the list starts again
// (a zip or a wrapper is then sent once more).
const (
	maxKnown    = 4096
	maxWrappers = 64
)

// storedZips remembers which zips and wrappers each agent (context) was
// sent.
type storedZips struct {
	mu sync.Mutex
	m  map[*spindle.Context]*agentStore
}

// agentStore is what one agent was sent: its zips, and the wrapper it
// holds for each zip.
type agentStore struct {
	zips     map[[sha256.Size]byte]bool
	wrappers map[[sha256.Size]byte]*ansiballz.Wrapper
}

func (s *storedZips) has(cx *spindle.Context, sum [sha256.Size]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.m[cx]
	return a != nil && a.zips[sum]
}

// wrapper is the wrapper cx's agent holds for the zip sum, or nil.
func (s *storedZips) wrapper(cx *spindle.Context, sum [sha256.Size]byte) *ansiballz.Wrapper {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.m[cx]; a != nil {
		return a.wrappers[sum]
	}
	return nil
}

// set records whether cx's agent holds the zip sum, and w as the
// wrapper it holds for it (nil: none).
func (s *storedZips) set(cx *spindle.Context, sum [sha256.Size]byte, stored bool, w *ansiballz.Wrapper) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agentLocked(cx)
	a.hold(sum, stored)
	if w != nil {
		a.wrappers[sum] = w
	} else {
		delete(a.wrappers, sum)
	}
}

// hold records whether cx's agent holds the zip sum, its wrappers left
// as they are: for the first agent of a chain, which stores zips for
// the contexts below it (Endpoint.zipAtRoot).
func (s *storedZips) hold(cx *spindle.Context, sum [sha256.Size]byte, stored bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agentLocked(cx).hold(sum, stored)
}

func (a *agentStore) hold(sum [sha256.Size]byte, stored bool) {
	if stored {
		a.zips[sum] = true
	} else {
		delete(a.zips, sum)
	}
}

// agentLocked is cx's record, made if need be, its maps reset past
// their bounds; s.mu is held.
func (s *storedZips) agentLocked(cx *spindle.Context) *agentStore {
	if s.m == nil {
		s.m = map[*spindle.Context]*agentStore{}
	}
	a := s.m[cx]
	if a == nil {
		for c := range s.m {
			select {
			case <-c.Done():
				delete(s.m, c) // a connection gone for good
			default:
			}
		}
		a = &agentStore{}
		s.m[cx] = a
	}
	if a.zips == nil || len(a.zips) >= maxKnown {
		a.zips = map[[sha256.Size]byte]bool{}
	}
	if a.wrappers == nil || len(a.wrappers) >= maxWrappers {
		a.wrappers = map[[sha256.Size]byte]*ansiballz.Wrapper{}
	}
	return a
}

// pythonOnly recognises the command Ansible runs a pipelined module
// with, when it does nothing but start the interpreter, with the task's
// environment: /bin/sh -c '[K=V ...] /usr/bin/python3 && sleep 0' (up to
// 2.20), or /bin/sh -c /usr/bin/python3 (2.21 and later), each word as
// Python's shlex.quote writes it. A command with anything else in it
// (a become wrapper, an expansion, a redirection) is no such run.
func pythonOnly(cmd string) (interp string, env map[string]string, ok bool) {
	rest, ok := strings.CutPrefix(cmd, "/bin/sh -c ")
	if !ok {
		return "", nil, false
	}
	inner, ok := shellWords(rest)
	if !ok || len(inner) != 1 {
		return "", nil, false
	}
	words, ok := shellWords(inner[0])
	if !ok {
		return "", nil, false
	}
	if n := len(words); n >= 4 && words[n-3] == andOp && words[n-2] == "sleep" && words[n-1] == "0" {
		words = words[:n-3]
	}
	if len(words) == 0 {
		return "", nil, false
	}
	for _, w := range words[:len(words)-1] {
		k, v, ok := strings.Cut(w, "=")
		if !ok || !isName(k) {
			return "", nil, false
		}
		if env == nil {
			env = map[string]string{}
		}
		env[k] = v
	}
	interp = words[len(words)-1]
	base := interp[strings.LastIndexByte(interp, '/')+1:]
	if !strings.HasPrefix(interp, "/") || !strings.Contains(base, "python") || strings.Contains(interp, "/../") ||
		strings.IndexFunc(interp, func(c rune) bool { return !isSafe(c) }) >= 0 {
		return "", nil, false
	}
	return interp, env, true
}

// shellWords splits s into words as a POSIX shell would, for the
// quoting Python's shlex.quote produces ('...' and "'" runs, bare safe
// characters) and the && operator; anything that would expand,
// redirect or glob refuses the whole line.
func shellWords(s string) (words []string, ok bool) {
	var w strings.Builder
	in := false // a word is open
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
			i++
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			w.WriteString(s[i+1 : i+1+j])
			in = true
			i += j + 2
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 || strings.ContainsAny(s[i+1:i+1+j], "$`\\!") {
				return nil, false
			}
			w.WriteString(s[i+1 : i+1+j])
			in = true
			i += j + 2
		case c == '&' && !in && strings.HasPrefix(s[i:], "&& "):
			words = append(words, andOp)
			i += 2
		case isSafe(rune(c)) || c == '=' && in:
			w.WriteByte(c)
			in = true
			i++
		default:
			return nil, false
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, true
}

// andOp is the && operator among shellWords' words: no word can hold a
// NUL.
const andOp = "\x00&&"

// isSafe: the characters shlex.quote leaves bare.
func isSafe(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("@%+=:,./-_", c)
}

func isName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
