package ansible

import (
	"context"
	"sync"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/internal/lazyre"
	"github.com/spindle-rpc/spindle/services/sys"
)

// echoHomeRE matches the commands Ansible sends to learn a home directory
// (ShellModule.expand_user, run by _low_level_execute_command): `echo ~`
// or `echo ~USER`, with ` && sleep 0` up to 2.20, inside /bin/sh -c '…'
// when it gives an executable. The user names it allows need no quoting.
var echoHomeRE = lazyre.New(`^(?:/bin/sh -c '(?:echo ~([_.A-Za-z0-9][-_.A-Za-z0-9]*)?(?: && sleep 0)?)'|echo ~([_.A-Za-z0-9][-_.A-Za-z0-9]*)?(?: && sleep 0)?)$`)

// echoHomeUser says whether cmd is Ansible's question for a home
// directory, and whose ("" for the login user's).
func echoHomeUser(cmd string) (user string, ok bool) {
	m := echoHomeRE.FindStringSubmatch(cmd)
	if m == nil {
		return "", false
	}
	return m[1] + m[2], true
}

// homes keeps what each connection's agent said about its user, asked
// once per connection: later questions cost no round trip.
type homes struct {
	mu sync.Mutex
	m  map[*spindle.Context]*sys.HostInfo
}

// answer returns the output of `echo ~user` on cx when the agent knows
// it: user is its own (or ""). ok false: run the command.
func (h *homes) answer(ctx context.Context, cx *spindle.Context, user string) (out string, ok bool) {
	h.mu.Lock()
	info := h.m[cx]
	h.mu.Unlock()
	if info == nil {
		var err error
		if info, err = sys.Info(ctx, cx); err != nil || info.Home == "" {
			return "", false
		}
		h.mu.Lock()
		if h.m == nil {
			h.m = map[*spindle.Context]*sys.HostInfo{}
		}
		for c := range h.m {
			select {
			case <-c.Done():
				delete(h.m, c) // a connection gone for good
			default:
			}
		}
		h.m[cx] = info
		h.mu.Unlock()
	}
	if user != "" && user != info.User {
		return "", false
	}
	return info.Home + "\n", true
}
