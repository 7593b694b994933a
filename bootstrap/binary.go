package bootstrap

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
)

//go:embed agents
var embedded embed.FS

// Binary is one agent executable. Its hash and size are known up front;
// its bytes may be decompressed only when first needed, because the first
// stage of every connection names the hash of every platform's agent and
// only a cold target needs the bytes (inflating and hashing the embedded
// agents cost a CLI run 80 ms before its first packet). An agent starting
// a hop to a platform other than its own knows that platform's agent by
// its manifest only, and fetches the bytes from the controller when a
// target asks for them (WithManifests).
type Binary struct {
	OS, Arch string
	Hash     string // hex sha256 of the uncompressed binary
	Size     int    // bytes, uncompressed
	// Where the gzip form comes from, read on first use: readGz, the
	// build's embedded file (embed.FS copies it on every read; a func, not
	// a name, so that agents, which use Binary too, do not link the
	// embedded agents), or fetch, which brings it from elsewhere (the
	// controller) and is checked before use.
	readGz func() ([]byte, error)
	fetch  func() ([]byte, error)
	// readZst, when set, reads a zstd form (`make build` embeds one when
	// it finds the zstd program), sent instead of the gzip one to targets
	// that have zstd (Payload).
	readZst func() ([]byte, error)

	gzOnce sync.Once
	gz     []byte // the gzip form, once read
	gzErr  error

	zstOnce sync.Once
	zst     []byte // the zstd form, once read
	zstErr  error

	once sync.Once
	data []byte
	err  error
}

// Bytes returns the uncompressed binary, reading and inflating it on
// first use and checking it against Hash and Size.
func (b *Binary) Bytes() ([]byte, error) {
	b.once.Do(func() {
		if b.data != nil {
			return
		}
		gz, err := b.compressed()
		if err != nil {
			b.err = err
			return
		}
		if b.data == nil { // a fetched binary was inflated when checked
			b.data, b.err = b.inflate(gz)
		}
	})
	return b.data, b.err
}

// Gzip returns the binary's gzip form: the one it came with, or one made
// once and kept for the process's lifetime.
func (b *Binary) Gzip() ([]byte, error) { return gzipped(b) }

// Payload returns what a first stage that offered decompressors (its
// SPINDLE-NEED line's list) is sent, and the format its SPINDLE-SEND line
// names: the zstd form where the target has zstd and the binary has one
// (the 7 MB agent inflates in 10 ms of CPU against gzip's 40, and is 15 %
// smaller), else the gzip form where the target has gzip, else the
// binary itself. xz, which some targets offer, is never chosen: it is
// smaller still but inflates three times slower than gzip.
func (b *Binary) Payload(decompressors []string) (payload []byte, format string, err error) {
	if b.readZst != nil && slices.Contains(decompressors, "zstd") {
		b.zstOnce.Do(func() {
			if b.zst, b.zstErr = b.readZst(); b.zstErr == nil && len(b.zst) == 0 {
				b.zstErr = errors.New("empty")
			}
			if b.zstErr != nil {
				b.zstErr = fmt.Errorf("zstd form of the agent for %s/%s: %w (rebuild with `make build`)", b.OS, b.Arch, b.zstErr)
			}
		})
		return b.zst, "zstd", b.zstErr
	}
	if slices.Contains(decompressors, "gzip") {
		gz, err := gzipped(b)
		return gz, "gzip", err
	}
	data, err := b.Bytes()
	return data, "raw", err
}

// compressed returns the gzip form the binary came with (embedded, or
// fetched and checked), or nil if it has none.
func (b *Binary) compressed() ([]byte, error) {
	b.gzOnce.Do(func() {
		switch {
		case b.readGz != nil:
			if b.gz, b.gzErr = b.readGz(); b.gzErr != nil {
				b.gzErr = fmt.Errorf("embedded agent for %s/%s: %w (rebuild with `make build`)", b.OS, b.Arch, b.gzErr)
			}
		case b.fetch != nil:
			gz, err := b.fetch()
			if err == nil && len(gz) == 0 {
				err = errors.New("the controller sent no bytes")
			}
			if err != nil {
				b.gzErr = fmt.Errorf("fetch the agent for %s/%s from the controller: %w", b.OS, b.Arch, err)
				return
			}
			// Bytes from elsewhere are checked before they go further.
			data, err := b.inflate(gz)
			if err != nil {
				b.gzErr = err
				return
			}
			b.gz, b.data = gz, data
			fetched.Store(b.Hash, b) // later hops need not ask again
		}
	})
	return b.gz, b.gzErr
}

// inflate decompresses gz and checks the result against Hash and Size.
func (b *Binary) inflate(gz []byte) ([]byte, error) {
	where := "embedded agent"
	if b.fetch != nil {
		where = "agent from the controller"
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	var data []byte
	if err == nil {
		data, err = io.ReadAll(io.LimitReader(zr, int64(b.Size)+1))
	}
	if err == nil {
		sum := sha256.Sum256(data)
		if len(data) != b.Size || hex.EncodeToString(sum[:]) != b.Hash {
			err = fmt.Errorf("does not match its manifest (%d bytes, sha256 %s)", b.Size, b.Hash)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s for %s/%s is corrupt: %w (rebuild with `make build`)", where, b.OS, b.Arch, err)
	}
	return data, nil
}

// Source supplies agent binaries by platform.
type Source interface {
	Agent(goos, goarch string) (*Binary, error)
}

// ErrNoAgent is wrapped when no agent exists for a platform.
var ErrNoAgent = errors.New("no agent binary")

func newBinary(goos, goarch string, data []byte) *Binary {
	sum := sha256.Sum256(data)
	return &Binary{OS: goos, Arch: goarch, data: data, Size: len(data), Hash: hex.EncodeToString(sum[:])}
}

// Default returns the agents this controller was built with: the
// compressed binaries `make build` embeds, then, for the controller's own
// platform, $SPINDLE_AGENT or a spindle-agent file beside the running
// executable.
func Default() Source { return defaultSource }

var defaultSource = &builtin{cache: map[string]*Binary{}}

type builtin struct {
	mu    sync.Mutex
	cache map[string]*Binary
}

func (b *builtin) Agent(goos, goarch string) (*Binary, error) {
	key := goos + "/" + goarch
	b.mu.Lock()
	defer b.mu.Unlock()
	if bin := b.cache[key]; bin != nil {
		return bin, nil
	}
	bin, err := b.load(goos, goarch)
	if err != nil {
		return nil, err
	}
	b.cache[key] = bin
	return bin, nil
}

func (b *builtin) load(goos, goarch string) (*Binary, error) {
	own := goos == runtime.GOOS && goarch == runtime.GOARCH
	if p := os.Getenv("SPINDLE_AGENT"); p != "" && own {
		return readAgentFile(p, goos, goarch)
	}
	name := "agents/spindle-agent-" + goos + "-" + goarch
	if _, err := iofs.Stat(embedded, name+".gz"); err == nil {
		if sum, err := embedded.ReadFile(name + ".sum"); err == nil {
			// `make agents` wrote the hash and size beside the gzip:
			// nothing to read until a target needs the bytes.
			var hash string
			var size int
			if _, err := fmt.Sscan(string(sum), &hash, &size); err != nil || !isHex(hash, 64) || size <= 0 {
				return nil, fmt.Errorf("embedded agent for %s/%s: bad manifest %q (rebuild with `make build`)", goos, goarch, sum)
			}
			return &Binary{OS: goos, Arch: goarch, Hash: hash, Size: size, readGz: embeddedFile(name + ".gz"), readZst: embeddedZst(name)}, nil
		}
		gz, err := embedded.ReadFile(name + ".gz")
		if err != nil {
			return nil, fmt.Errorf("embedded agent for %s/%s: %w", goos, goarch, err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return nil, fmt.Errorf("embedded agent for %s/%s is corrupt: %w", goos, goarch, err)
		}
		data, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("embedded agent for %s/%s is corrupt: %w", goos, goarch, err)
		}
		bin := newBinary(goos, goarch, data)
		bin.readGz = embeddedFile(name + ".gz") // gzip -9 by `make build`: sent as is
		bin.readZst = embeddedZst(name)
		return bin, nil
	}
	if own {
		if exe, err := os.Executable(); err == nil {
			p := filepath.Join(filepath.Dir(exe), "spindle-agent")
			if _, err := os.Stat(p); err == nil {
				return readAgentFile(p, goos, goarch)
			}
		}
	}
	return nil, fmt.Errorf("%w for %s/%s in this build: run `make build` to embed the agents, or set SPINDLE_AGENT=/path/to/spindle-agent for the controller's own platform (%s/%s)",
		ErrNoAgent, goos, goarch, runtime.GOOS, runtime.GOARCH)
}

// embeddedFile reads one of the build's embedded files.
func embeddedFile(name string) func() ([]byte, error) {
	return func() ([]byte, error) { return embedded.ReadFile(name) }
}

// embeddedZst reads the zstd form embedded beside the gzip one, if the
// build made one (it needs the zstd program), else returns nil. Like the
// gzip form it is not checked here: an agent unpacked from it hashes
// itself before anything trusts it (CheckUnpacked).
func embeddedZst(name string) func() ([]byte, error) {
	if _, err := iofs.Stat(embedded, name+".zst"); err != nil {
		return nil
	}
	return embeddedFile(name + ".zst")
}

func readAgentFile(path, goos, goarch string) (*Binary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read agent binary: %w", err)
	}
	return newBinary(goos, goarch, data), nil
}

// FromFile serves the agent at path for the given platform: a custom agent
// built with agent.Main and extra services.
func FromFile(path, goos, goarch string) Source {
	return &fileSource{path: path, os: goos, arch: goarch}
}

type fileSource struct {
	path, os, arch string
	once           sync.Once
	bin            *Binary
	err            error
}

func (f *fileSource) Agent(goos, goarch string) (*Binary, error) {
	if goos != f.os || goarch != f.arch {
		return nil, fmt.Errorf("%w for %s/%s: the custom agent %s is built for %s/%s", ErrNoAgent, goos, goarch, f.path, f.os, f.arch)
	}
	f.once.Do(func() { f.bin, f.err = readAgentFile(f.path, goos, goarch) })
	return f.bin, f.err
}

func newHasher() interface {
	io.Writer
	Sum([]byte) []byte
} {
	return sha256.New()
}
