package ansible

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"sync"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/services/exec"
)

// A pipelined AnsiballZ payload (the stdin of a module run with
// pipelining) is a Python wrapper of a few KiB around a base64 zip of
// 100-200 KiB that is byte-identical for every task and host running the
// same module in one run. The zip crosses the link once per agent (into
// its module store, package services/modules); later runs send the
// wrapper and the zip's hash, and the agent rebuilds the very same stdin.

// The wrapper's marker, and how each ansible-core generation writes the
// zip: 2.14-2.15 ZIPDATA = """…""", 2.16-2.18 ZIPDATA = '…', 2.19 and
// later zip_data='…' (an argument of _ansiballz_main).
var (
	ansiballzMarker = []byte("_ANSIBALLZ_WRAPPER = True")
	zipForms        = []struct{ open, close []byte }{
		{[]byte(`ZIPDATA = """`), []byte(`"""`)},
		{[]byte(`ZIPDATA = '`), []byte(`'`)},
		{[]byte(`zip_data='`), []byte(`'`)},
	}
)

// Bounds of a zip worth storing: smaller ones cost less to send than to
// track, larger ones would not fit in a call (package router's frame).
const (
	minZip = 4 << 10
	maxZip = 2 << 20
)

// splitAnsiballz splits a pipelined AnsiballZ payload around its zip. It
// takes only a payload that starts with "#!", has the wrapper's marker,
// and exactly one zip in one of the known forms, all base64: anything
// else runs exactly as sent.
func splitAnsiballz(stdin []byte) (prefix, zip, suffix []byte, ok bool) {
	if !bytes.HasPrefix(stdin, []byte("#!")) || !bytes.Contains(stdin, ansiballzMarker) {
		return nil, nil, nil, false
	}
	found := 0
	var start, end int
	for _, f := range zipForms {
		n := bytes.Count(stdin, f.open)
		found += n
		if n != 1 {
			continue
		}
		start = bytes.Index(stdin, f.open) + len(f.open)
		e := bytes.Index(stdin[start:], f.close)
		if e < 0 {
			return nil, nil, nil, false
		}
		end = start + e
	}
	if found != 1 || end-start < minZip || end-start > maxZip || !isBase64(stdin[start:end]) {
		return nil, nil, nil, false
	}
	return stdin[:start], stdin[start:end], stdin[end:], true
}

func isBase64(b []byte) bool {
	for _, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

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

// stdinParts are the parts of an AnsiballZ payload's stdin for cx: the
// zip by hash if cx has it, else with its bytes.
func stdinParts(prefix, zip, suffix []byte, sum [sha256.Size]byte, withZip bool) []exec.StdinPart {
	z := exec.StdinPart{SHA256: sum[:]}
	if withZip {
		z.Data = zip
	}
	return []exec.StdinPart{{Data: prefix}, z, {Data: suffix}}
}
