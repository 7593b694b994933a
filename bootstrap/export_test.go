package bootstrap

// RemoteCommandDirs is RemoteCommand with the cache directory candidates
// replaced (sh words), so tests need not touch /dev/shm, ~ or /tmp.
func RemoteCommandDirs(args AgentArgs, src Source, dirs string) (string, error) {
	return remoteCommand(args, src, dirs)
}

// RemoteCommandNoProc is RemoteCommandDirs on a target whose /proc does
// not name the platform (Linux before 6.1, other systems): the stage
// falls back to uname.
func RemoteCommandNoProc(args AgentArgs, src Source, dirs string) (string, error) {
	return remoteCommandProc(args, src, dirs, "/nonexistent/proc/sys/kernel")
}

// Gzipped exposes the gzip form sent on the wire.
func Gzipped(b *Binary) ([]byte, error) { return gzipped(b) }

// Mislabeled returns a Source that serves base's agents, salted as Salted
// does, under the hash of other bytes: a controller whose agent and hash
// got mixed up.
func Mislabeled(base Source) Source { return &mislabeled{Source: Salted(base)} }

type mislabeled struct{ Source }

func (m *mislabeled) Agent(goos, goarch string) (*Binary, error) {
	b, err := m.Source.Agent(goos, goarch)
	if err != nil {
		return nil, err
	}
	data, err := b.Bytes()
	if err != nil {
		return nil, err
	}
	other := newBinary(goos, goarch, append(data[:len(data):len(data)], 'x'))
	return &Binary{OS: goos, Arch: goarch, data: data, Size: len(data), Hash: other.Hash}, nil
}

// WithZstd returns a Source that serves base's agents with a gzip form
// and a zstd form made by compress (from the uncompressed binary), as
// `make build` embeds both when it finds zstd.
func WithZstd(base Source, compress func([]byte) ([]byte, error)) Source {
	return &withZstd{Source: base, compress: compress}
}

type withZstd struct {
	Source
	compress func([]byte) ([]byte, error)
}

func (w *withZstd) Agent(goos, goarch string) (*Binary, error) {
	b, err := w.Source.Agent(goos, goarch)
	if err != nil {
		return nil, err
	}
	data, err := b.Bytes()
	if err != nil {
		return nil, err
	}
	nb := newBinary(goos, goarch, data)
	nb.readGz = func() ([]byte, error) { return gzipped(b) }
	nb.readZst = func() ([]byte, error) { return w.compress(data) }
	return nb, nil
}

// ZstdRawFrame exposes the frame Salted appends to a zstd form.
func ZstdRawFrame(data []byte) []byte { return zstdRawFrame(data) }
