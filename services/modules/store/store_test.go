package store

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
)

func TestStore(t *testing.T) {
	s := New(10)
	a, b, c := []byte("aaaa"), []byte("bbbb"), []byte("cccc")
	sa, err := s.Put(a)
	if err != nil || sa != sha256.Sum256(a) {
		t.Fatal(sa, err)
	}
	sb, _ := s.Put(b)
	if got, err := s.Get(sa[:]); err != nil || !bytes.Equal(got, a) {
		t.Fatal(got, err)
	}
	// a was used last: c evicts b.
	sc, _ := s.Put(c)
	if _, err := s.Get(sb[:]); !errors.Is(err, errkind.ErrNotFound) || !strings.Contains(err.Error(), NotStored) {
		t.Errorf("evicted: %v", err)
	}
	for _, sum := range [][32]byte{sa, sc} {
		if _, err := s.Get(sum[:]); err != nil {
			t.Errorf("kept: %v", err)
		}
	}
	if s.Len() != 2 || s.Size() != 8 {
		t.Errorf("%s", s)
	}
	// Storing again is free.
	s.Put(a)
	if s.Len() != 2 || s.Size() != 8 {
		t.Errorf("again: %s", s)
	}
	if _, err := s.Put(make([]byte, 11)); !errors.Is(err, errkind.ErrTooLarge) {
		t.Errorf("over the bound: %v", err)
	}
	if _, err := s.Get([]byte("short")); !errors.Is(err, errkind.ErrBadArgs) {
		t.Errorf("a bad hash: %v", err)
	}
	// Exactly the bound fits, alone.
	sf, err := s.Put(make([]byte, 10))
	if err != nil || s.Len() != 1 || s.Size() != 10 {
		t.Errorf("full: %v, %s", err, s)
	}
	if _, err := s.Get(sf[:]); err != nil {
		t.Error(err)
	}
}

func TestStoreConcurrent(t *testing.T) {
	s := New(1 << 10)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				d := bytes.Repeat([]byte{byte(i), byte(j)}, 20)
				sum, _ := s.Put(d)
				if got, err := s.Get(sum[:]); err == nil && !bytes.Equal(got, d) {
					t.Error("wrong data")
				}
			}
		}()
	}
	wg.Wait()
	if s.Size() > 1<<10 {
		t.Errorf("%s", s)
	}
}
