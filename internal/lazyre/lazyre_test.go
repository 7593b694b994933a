package lazyre

import (
	"sync"
	"testing"
)

func TestLazy(t *testing.T) {
	r := New(`(?i)a password is required and not yet asked for`)
	if r.re != nil {
		t.Fatal("compiled before first use")
	}
	if !r.MatchString("sudo: A password is required and not yet asked for") || r.MatchString("sorry") {
		t.Error("wrong matches")
	}
	if r.String() != `(?i)a password is required and not yet asked for` {
		t.Error(r.String())
	}
}

// Matching from many goroutines at once compiles once (go test -race).
func TestConcurrentFirstUse(t *testing.T) {
	r := New(`x+y`)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !r.MatchString("xxy") {
				t.Error("no match")
			}
		}()
	}
	wg.Wait()
}

func TestBadPatternPanicsOnUse(t *testing.T) {
	r := New(`(`)
	defer func() {
		if recover() == nil {
			t.Error("a bad pattern did not panic")
		}
	}()
	r.MatchString("")
}

func TestCheckAll(t *testing.T) {
	allMu.Lock()
	saved := all
	all = map[string]*Regexp{}
	allMu.Unlock()
	defer func() { allMu.Lock(); all = saved; allMu.Unlock() }()
	if New(`ok+`) != New(`ok+`) {
		t.Error("two Regexps for one pattern")
	}
	if err := CheckAll(); err != nil || Count() != 1 {
		t.Fatal(err, Count())
	}
	New(`[`)
	if err := CheckAll(); err == nil {
		t.Error("CheckAll passed a bad pattern")
	}
}
