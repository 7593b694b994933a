// Package lazyre holds regular expressions that are compiled on first use
// rather than when the program starts.
//
// The connectors classify a tool's error output with some forty patterns.
// Compiled in package initialisers they cost every agent start and every
// CLI run, most of which never look at a single error message: about 5 %
// of an agent's start on a 2-vCPU VM (perf record of 200 starts), with the
// allocations that come with it.
package lazyre

import (
	"fmt"
	"regexp"
	"sync"
)

// Regexp is a pattern compiled the first time it is matched. A pattern
// that does not compile panics then, as regexp.MustCompile would have at
// start; CheckAll lets a test that links every user find that first.
type Regexp struct {
	src  string
	once sync.Once
	re   *regexp.Regexp
}

var (
	allMu sync.Mutex
	all   = map[string]*Regexp{}
)

// New returns the Regexp for src, compiled on first use. It is the same
// Regexp for the same src, process-wide: the container connectors build
// their rule tables on every connect, and a pattern should still be
// compiled once.
func New(src string) *Regexp {
	allMu.Lock()
	defer allMu.Unlock()
	r, ok := all[src]
	if !ok {
		r = &Regexp{src: src}
		all[src] = r
	}
	return r
}

// CheckAll compiles every pattern made so far (with New) and returns an
// error naming the first that does not compile.
func CheckAll() error {
	allMu.Lock()
	defer allMu.Unlock()
	for _, r := range all {
		if _, err := regexp.Compile(r.src); err != nil {
			return fmt.Errorf("lazyre: pattern %q: %w", r.src, err)
		}
	}
	return nil
}

// Count returns how many distinct patterns New has made.
func Count() int {
	allMu.Lock()
	defer allMu.Unlock()
	return len(all)
}

// MatchString reports whether s contains any match of the pattern.
func (r *Regexp) MatchString(s string) bool { return r.compiled().MatchString(s) }

// String returns the source text of the pattern.
func (r *Regexp) String() string { return r.src }

// FindStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.compiled().FindStringSubmatch(s) }

func (r *Regexp) compiled() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.src) })
	return r.re
}
