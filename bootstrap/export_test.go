package bootstrap

// RemoteCommandDirs is RemoteCommand with the cache directory candidates
// replaced (sh words), so tests need not touch /dev/shm, ~ or /tmp.
func RemoteCommandDirs(args AgentArgs, src Source, dirs string) (string, error) {
	return remoteCommand(args, src, dirs)
}

// Gzipped exposes the gzip form sent on the wire.
func Gzipped(b *Binary) ([]byte, error) { return gzipped(b) }
