package bootstrap

import "sync"

// Manifest names one platform's agent without its bytes.
type Manifest struct {
	OS   string `msgpack:"os"`
	Arch string `msgpack:"arch"`
	Hash string `msgpack:"hash"` // hex sha256 of the uncompressed binary
	Size int    `msgpack:"size"` // bytes, uncompressed
}

// Manifests lists the agents src supplies, for every platform a first
// stage recognises. For the controller's embedded agents this reads only
// the build's manifests, not the binaries.
func Manifests(src Source) []Manifest {
	var ms []Manifest
	eachPlatform(src, func(goos, goarch string, bin *Binary, _ string, _ []string) {
		ms = append(ms, Manifest{OS: goos, Arch: goarch, Hash: bin.Hash, Size: bin.Size})
	})
	return ms
}

// WithManifests is the Source of an agent starting a hop: base (its own
// binary) for its own platform, and for the others the agents that ms
// name, whose compressed bytes fetch brings from the controller when a
// target first asks for one. The bytes are checked against the manifest
// and kept in RAM for the agent's lifetime, so each platform's agent
// crosses the controller's link at most once per agent however many hops
// need it.
func WithManifests(base Source, ms []Manifest, fetch func(goos, goarch string) ([]byte, error)) Source {
	s := &manifestSource{base: base, ms: map[string]Manifest{}, fetch: fetch}
	for _, m := range ms {
		if isHex(m.Hash, 64) && m.Size > 0 {
			s.ms[m.OS+"/"+m.Arch] = m
		}
	}
	return s
}

// fetched holds the agents fetched from the controller, by hash.
var fetched sync.Map // hash → *Binary

type manifestSource struct {
	base  Source
	ms    map[string]Manifest
	fetch func(goos, goarch string) ([]byte, error)

	mu   sync.Mutex
	bins map[string]*Binary // this source's not yet fetched binaries
}

func (s *manifestSource) Agent(goos, goarch string) (*Binary, error) {
	b, err := s.base.Agent(goos, goarch)
	if err == nil {
		return b, nil
	}
	m, ok := s.ms[goos+"/"+goarch]
	if !ok {
		return nil, err
	}
	if v, ok := fetched.Load(m.Hash); ok {
		return v.(*Binary), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.bins[m.Hash]; b != nil {
		return b, nil
	}
	if s.bins == nil {
		s.bins = map[string]*Binary{}
	}
	b = &Binary{OS: goos, Arch: goarch, Hash: m.Hash, Size: m.Size, fetch: func() ([]byte, error) { return s.fetch(goos, goarch) }}
	s.bins[m.Hash] = b
	return b, nil
}
