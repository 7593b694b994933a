// Package store is the agent's store of what the controller ships by
// content: Ansible modules' zips and wrappers, and programs to run. Each
// entry is kept in RAM under its sha256, the least recently used ones
// evicted past a bound, so that a payload sent once can be named by its
// hash in every later call on the same agent (exec's stdin parts and
// Cmd.Exe, package exec; modules.Put) instead of crossing the link again.
// A program is materialised once as a file in the agent's private cache
// directory (Materialize), the files bounded by MaxExeBytes.
//
// A caller keeps track of what it sent, and sends the bytes again when
// the agent says it does not have them (evicted, or a new agent): the
// store is a cache, never the only copy. Package modules is the client
// side.
package store

import (
	"container/list"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/spindle-rpc/spindle/errkind"
)

// DefaultMax bounds the agent's store (Default).
const DefaultMax = 64 << 20

// NotStored is in the text of the error for a hash the store does not
// hold: the error crosses the wire as errkind.ErrNotFound with its text,
// by which a caller tells it from other missing things.
const NotStored = "not in the agent's module store"

// IsNotStored says that err is an agent's answer for a hash its store
// lacks: nothing ran, and the bytes must be sent again.
func IsNotStored(err error) bool {
	return errors.Is(err, errkind.ErrNotFound) && strings.Contains(err.Error(), NotStored)
}

// Store is a bounded content-addressed store; safe for concurrent use.
type Store struct {
	max int64

	mu   sync.Mutex
	size int64
	lru  *list.List // of *entry, most recently used first
	m    map[[sha256.Size]byte]*list.Element
}

type entry struct {
	sum  [sha256.Size]byte
	data []byte
	// shared entries may be served to the agent's children (package
	// upcall): the controller marked them as the same for every context
	// (a module's zip, a program), unlike a wrapper that holds a task's
	// arguments.
	shared bool
}

// NewStore returns an empty store of at most max bytes.
func New(max int64) *Store {
	return &Store{max: max, lru: list.New(), m: map[[sha256.Size]byte]*list.Element{}}
}

// Default is the agent's store.
var Default = New(DefaultMax)

// Put stores data under its sha256, evicting the least recently used
// entries to make room, and returns the hash. data is kept: the caller
// must not change it. Data larger than the whole store is refused with
// errkind.ErrTooLarge.
func (s *Store) Put(data []byte) ([sha256.Size]byte, error) {
	return s.put(data, false)
}

// PutShared is Put for bytes that may be served to the agent's children
// that name them (GetShared): the same for every context that runs them,
// never a task's arguments. Bytes stored before by Put become shared.
func (s *Store) PutShared(data []byte) ([sha256.Size]byte, error) {
	return s.put(data, true)
}

func (s *Store) put(data []byte, shared bool) ([sha256.Size]byte, error) {
	sum := sha256.Sum256(data)
	if int64(len(data)) > s.max {
		return sum, errkind.Errorf(errkind.ErrTooLarge, "module store: %d bytes do not fit in the module store of %d bytes: send them with the call instead", len(data), s.max)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.m[sum]; ok {
		s.lru.MoveToFront(el)
		if shared {
			el.Value.(*entry).shared = true
		}
		return sum, nil
	}
	for s.size+int64(len(data)) > s.max {
		old := s.lru.Back()
		e := old.Value.(*entry)
		s.lru.Remove(old)
		delete(s.m, e.sum)
		s.size -= int64(len(e.data))
	}
	s.m[sum] = s.lru.PushFront(&entry{sum: sum, data: data, shared: shared})
	s.size += int64(len(data))
	return sum, nil
}

// Get returns the data stored under sum, or an errkind.ErrNotFound whose
// text holds NotStored.
func (s *Store) Get(sum []byte) ([]byte, error) {
	return s.get(sum, false)
}

// GetShared is Get for an entry stored shared (PutShared); any other
// is not stored as far as it is concerned.
func (s *Store) GetShared(sum []byte) ([]byte, error) {
	return s.get(sum, true)
}

func (s *Store) get(sum []byte, shared bool) ([]byte, error) {
	var k [sha256.Size]byte
	if len(sum) != len(k) {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "module store: a sha256 has %d bytes, not %d", len(sum), len(k))
	}
	copy(k[:], sum)
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.m[k]
	if !ok || (shared && !el.Value.(*entry).shared) {
		return nil, errkind.Errorf(errkind.ErrNotFound, "module store: sha256 %x is %s (evicted, or a new agent): send it again", sum, NotStored)
	}
	s.lru.MoveToFront(el)
	return el.Value.(*entry).data, nil
}

// Has says whether sum is stored, without making it recently used.
func (s *Store) Has(sum [sha256.Size]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[sum]
	return ok
}

// Max is the store's bound in bytes: the largest entry it takes.
func (s *Store) Max() int64 { return s.max }

// Len is the entries held.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Size is the bytes held.
func (s *Store) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// String describes the store for logs.
func (s *Store) String() string {
	return fmt.Sprintf("module store: %d entries, %d of %d bytes", s.Len(), s.Size(), s.max)
}
