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
