package bootstrap

import (
	"fmt"
	"os"
	"runtime"
	"sync"
)

// Self returns the Source an agent uses for the hops it starts itself: its
// own binary, read once from /proc/self/exe and kept in RAM, for its own
// platform. An SSH hop adds the other platforms' agents from the
// controller (WithManifests).
func Self() Source { return selfSource }

var selfSource = &self{}

type self struct {
	once sync.Once
	bin  *Binary
	err  error
}

func (s *self) Agent(goos, goarch string) (*Binary, error) {
	if goos != runtime.GOOS || goarch != runtime.GOARCH {
		return nil, fmt.Errorf("%w for %s/%s on this %s/%s agent: an agent carries only its own binary (SSH and container hops borrow other platforms' agents from the controller; a become hop runs on the same machine and needs none)",
			ErrNoAgent, goos, goarch, runtime.GOOS, runtime.GOARCH)
	}
	s.once.Do(func() {
		data, err := os.ReadFile("/proc/self/exe")
		if err != nil {
			s.err = fmt.Errorf("read own binary: %w", err)
			return
		}
		s.bin = newBinary(goos, goarch, data)
	})
	return s.bin, s.err
}
