package bootstrap

import (
	"compress/gzip"
	"crypto/rand"
	"encoding/binary"
	"sync"
)

// Salted returns a Source that serves base's agents with 16 random bytes
// appended (an ELF runs the same with bytes after its end): hashes no cache
// has, so a connect through it is cold even when an agent of the same build
// already sits in a cache directory the first stage also looks in. For
// demos and benchmarks of the cold path. What travels is the base's own
// compressed form (the build's gzip -9 or zstd -19) with the salt
// appended as one more gzip member or zstd frame, which gzip -dc and
// zstd -dc both inflate after the first: a salted cold start sends and
// unpacks what a real one does. Where the base has no compressed form (an
// agent read from a file), the salted agent is gzipped on first use.
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
	salt := s.salt
	if b.readGz != nil {
		nb.readGz = func() ([]byte, error) {
			gz, err := b.compressed()
			if err != nil {
				return nil, err
			}
			member, err := gzipMember(salt, gzip.DefaultCompression)
			return append(gz[:len(gz):len(gz)], member...), err
		}
	}
	if b.readZst != nil {
		nb.readZst = func() ([]byte, error) {
			zst, err := b.readZst()
			if err != nil {
				return nil, err
			}
			return append(zst[:len(zst):len(zst)], zstdRawFrame(salt)...), nil
		}
	}
	s.bins[goos+"/"+goarch] = nb
	return nb, nil
}

// zstdRawFrame is a zstd frame holding data (at most 128 KiB, a block's
// limit) uncompressed (RFC 8878, 3.1.1): magic, a header saying a single segment
// of len(data) bytes, and one raw block marked last. No checksum: what
// matters is the agent's own hash, checked after it starts.
func zstdRawFrame(data []byte) []byte {
	n := len(data)
	f := []byte{0x28, 0xb5, 0x2f, 0xfd}
	// Frame header descriptor: Single_Segment (bit 5), and a content
	// size field of 4 bytes (flag 2, bits 6-7).
	f = append(f, 0x20|2<<6)
	f = binary.LittleEndian.AppendUint32(f, uint32(n))
	// Block header, 3 bytes little-endian: Last_Block, Block_Type 0
	// (raw), Block_Size.
	h := uint32(1 | n<<3)
	f = append(f, byte(h), byte(h>>8), byte(h>>16))
	return append(f, data...)
}
