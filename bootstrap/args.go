package bootstrap

import (
	"flag"
	"fmt"
	"io"
	"strconv"
)

// AgentArgs are what an agent is told on its command line.
type AgentArgs struct {
	ID        uint32 // the context id the controller allocated
	Parent    uint32 // the parent's context id
	Name      string // the context's name in chains ("web1", "sudo:root")
	Nonce     string // marks the hello line
	Verbosity int    // 0 warn, 1 info, 2+ debug
	// SHA256, if set, is the hex sha256 the agent's own executable must
	// have (the first stage passes it when it runs a cached agent): on a
	// mismatch the agent reports SPINDLE-STALE and exits (CheckSelf).
	SHA256 string
	// Unpacked says the first stage has just written the executable (the
	// cold path, from gzip, which checked the stream's CRC-32 and length):
	// the agent checks SHA256 after its hello instead of before it
	// (CheckUnpacked), so that the ~5 ms hash overlaps the first calls.
	Unpacked bool
	// ParentMaxFrame, when not 0, is the largest frame the parent reads
	// (its router.Options.MaxFrameSize), when that is not
	// router.DefaultMaxFrameSize: the agent refuses to send a larger one
	// up (-parent-max-frame).
	ParentMaxFrame int
	// Fresh makes the first stage remove the cached agent instead of
	// running it, so that the start uploads a new one: the retry after a
	// cached agent was stale or died before its hello. Not an agent flag.
	Fresh bool
}

// Argv renders the arguments. They contain no secrets: command lines are
// visible to every user of the target.
func (a AgentArgs) Argv() []string {
	argv := []string{
		"-id", strconv.FormatUint(uint64(a.ID), 10),
		"-parent", strconv.FormatUint(uint64(a.Parent), 10),
		"-name", a.Name,
		"-nonce", a.Nonce,
		"-v", strconv.Itoa(a.Verbosity),
	}
	if a.SHA256 != "" {
		argv = append(argv, "-sha256", a.SHA256)
	}
	if a.Unpacked {
		argv = append(argv, "-unpacked")
	}
	if a.ParentMaxFrame > 0 {
		argv = append(argv, "-parent-max-frame", strconv.Itoa(a.ParentMaxFrame))
	}
	return argv
}

// ParseAgentArgs parses what Argv rendered.
func ParseAgentArgs(argv []string) (AgentArgs, error) {
	var a AgentArgs
	fs := flag.NewFlagSet("spindle-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	id := fs.Uint("id", 0, "context id")
	parent := fs.Uint("parent", 0, "parent context id")
	fs.StringVar(&a.Name, "name", "", "context name")
	fs.StringVar(&a.Nonce, "nonce", "", "hello nonce")
	fs.IntVar(&a.Verbosity, "v", 0, "verbosity")
	fs.StringVar(&a.SHA256, "sha256", "", "expected sha256 of the agent's own executable")
	fs.BoolVar(&a.Unpacked, "unpacked", false, "the executable was just unpacked: check -sha256 after the hello")
	fs.IntVar(&a.ParentMaxFrame, "parent-max-frame", 0, "the largest frame the parent reads")
	if err := fs.Parse(argv); err != nil {
		return a, err
	}
	if a.Nonce == "" || *id == 0 || *id > 1<<32-1 || *parent > 1<<32-1 {
		return a, fmt.Errorf("missing or invalid -id/-nonce")
	}
	if a.SHA256 != "" && !isHex(a.SHA256, 64) {
		return a, fmt.Errorf("invalid -sha256 (want 64 hex digits)")
	}
	if a.ParentMaxFrame < 0 {
		return a, fmt.Errorf("invalid -parent-max-frame %d", a.ParentMaxFrame)
	}
	if a.Unpacked && a.SHA256 == "" {
		return a, fmt.Errorf("-unpacked without -sha256")
	}
	a.ID, a.Parent = uint32(*id), uint32(*parent)
	return a, nil
}

// isHex reports whether s is n lower-case hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
