package ansible

import (
	"crypto/sha256"
	"strings"
	"sync"

	"github.com/spindle-rpc/spindle"
)

// A pipelined AnsiballZ payload's zip crosses the link once per agent
// (package ansible/ansiballz): the endpoint remembers which agent has
// which zip, so that later runs send the wrapper and the zip's hash
// alone, with no failed call first.

// maxKnown bounds the hashes remembered per agent; past it the list
// starts again (a zip is then sent once more).
const maxKnown = 4096

// storedZips remembers which zips each agent (context) was sent.
type storedZips struct {
	mu sync.Mutex
	m  map[*spindle.Context]map[[sha256.Size]byte]bool
}

func (s *storedZips) has(cx *spindle.Context, sum [sha256.Size]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[cx][sum]
}

func (s *storedZips) set(cx *spindle.Context, sum [sha256.Size]byte, stored bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[*spindle.Context]map[[sha256.Size]byte]bool{}
	}
	known := s.m[cx]
	if known == nil || len(known) >= maxKnown {
		for c := range s.m {
			select {
			case <-c.Done():
				delete(s.m, c) // a connection gone for good
			default:
			}
		}
		known = map[[sha256.Size]byte]bool{}
		s.m[cx] = known
	}
	if stored {
		known[sum] = true
	} else {
		delete(known, sum)
	}
}

// pythonOnly recognises the command Ansible runs a pipelined module
// with, when it does nothing but start the interpreter:
// /bin/sh -c '/usr/bin/python3 && sleep 0' (up to 2.20), or
// /bin/sh -c /usr/bin/python3 (2.21 and later). A command with anything
// else in it (environment variables, a become wrapper) is no such run.
func pythonOnly(cmd string) (interp string, ok bool) {
	rest, ok := strings.CutPrefix(cmd, "/bin/sh -c ")
	if !ok {
		return "", false
	}
	if q, ok := strings.CutPrefix(rest, "'"); ok {
		if rest, ok = strings.CutSuffix(q, "'"); !ok {
			return "", false
		}
		rest = strings.TrimSuffix(rest, " && sleep 0")
	}
	base := rest[strings.LastIndexByte(rest, '/')+1:]
	if !strings.HasPrefix(rest, "/") || !strings.Contains(base, "python") || strings.Contains(rest, "/../") ||
		strings.IndexFunc(rest, func(c rune) bool {
			return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._+-", c))
		}) >= 0 {
		return "", false
	}
	return rest, true
}
