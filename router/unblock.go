package router

import (
	"sync"
	"time"
	"weak"

	"github.com/hashicorp/yamux"
)

// streamSet remembers a link's open yamux streams so that the link's death
// can unblock every goroutine reading or writing one of them.
//
// yamux v0.1.2 does not do it itself: a Stream.Read or Stream.write blocked
// when its session shuts down loops on the closed shutdown channel (`case
// <-s.session.shutdownCh:` has no body and jumps back to START) until the
// session force-closes its streams, which it does only after closing the
// underlying conn. For a link to a child agent that close waits for the
// child to exit (up to the connector's exit grace, seconds), so every
// blocked reader spun at 100 % CPU meanwhile: 20 hops closing at once on an
// intermediary (GOMAXPROCS=1) starved the goroutines that would have
// finished closing them. A past deadline makes those calls return instead.
// (Upstream: hashicorp/yamux pull request 176, not released.)
//
// Streams are held weakly: one that both ends closed and nobody holds any
// more is collected, and its entry pruned, so a long-lived link with many
// short circuits does not grow the set.
type streamSet struct {
	mu    sync.Mutex
	all   []weak.Pointer[yamux.Stream]
	limit int  // prune when all reaches this length
	dead  bool // unblockAll ran: later streams are unblocked at once
}

func (s *streamSet) add(st *yamux.Stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		unblockStream(st)
		return
	}
	if len(s.all) >= s.limit {
		live := s.all[:0]
		for _, w := range s.all {
			if w.Value() != nil {
				live = append(live, w)
			}
		}
		clear(s.all[len(live):])
		s.all = live
		s.limit = max(64, 2*len(live))
	}
	s.all = append(s.all, weak.Make(st))
}

// unblockAll makes every blocked and future Read and Write on the set's
// streams fail with yamux.ErrTimeout.
func (s *streamSet) unblockAll() {
	s.mu.Lock()
	all := s.all
	s.all, s.dead = nil, true
	s.mu.Unlock()
	for _, w := range all {
		if st := w.Value(); st != nil {
			unblockStream(st)
		}
	}
}

func unblockStream(st *yamux.Stream) {
	now := time.Now()
	st.SetReadDeadline(now)
	st.SetWriteDeadline(now)
}
