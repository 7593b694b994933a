package bootstrap

import (
	"crypto/rand"
	"sync"
)

// Salted returns a Source that serves base's agents with 16 random bytes
// appended (an ELF runs the same with bytes after its end): hashes no cache
// has, so a connect through it is cold even when an agent of the same build
// already sits in a cache directory the first stage also looks in. For
// demos and benchmarks of the cold path. The price: the agent is gzipped on
// the first connect instead of the build's embedded gzip being sent.
func Salted(base Source) Source {
	salt := make([]byte, 16)
	rand.Read(salt)
	return &salted{base: base, salt: salt, bins: map[string]*Binary{}}
}

type salted struct {
	base Source
	salt []byte
	mu   sync.Mutex
	bins map[string]*Binary
}

func (s *salted) Agent(goos, goarch string) (*Binary, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.bins[goos+"/"+goarch]; b != nil {
		return b, nil
	}
	b, err := s.base.Agent(goos, goarch)
	if err != nil {
		return nil, err
	}
	base, err := b.Bytes()
	if err != nil {
		return nil, err
	}
	data := append(append(make([]byte, 0, len(base)+len(s.salt)), base...), s.salt...)
	nb := newBinary(b.OS, b.Arch, data)
	s.bins[goos+"/"+goarch] = nb
	return nb, nil
}
