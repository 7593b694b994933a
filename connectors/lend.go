package connectors

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"go.uber.org/zap"
)

// Foreign is a Remote whose target may run on another platform than the
// agent that starts it: a kubectl pod on an arm64 node, a container of
// another architecture run under emulation, a remote Docker or LXD
// daemon. The agent's own binary fits only its own platform, so the
// controller lends such a hop its agents for the other platforms: it
// sends their manifests with the start and serves the bytes on the
// start's circuit (AgentLender), which the agent asks only if the target
// turns out to need one. SSH hops do the same through their Delegated
// helper.
type Foreign interface {
	Remote
	// MayBeForeign reports whether this hop's target may be of another
	// platform than its parent agent.
	MayBeForeign() bool
}

// IsForeign reports whether c is a Foreign hop that may need another
// platform's agent.
func IsForeign(c Connector) bool {
	f, ok := c.(Foreign)
	return ok && f.MayBeForeign()
}

// The lending protocol on the start's circuit: the agent writes a request
// frame, the controller answers with a reply frame; each frame is a
// 4-byte big-endian length and a msgpack value, as on the bus.
type lendRequest struct {
	OS   string `msgpack:"os"`
	Arch string `msgpack:"arch"`
}

type lendReply struct {
	Err string `msgpack:"err,omitempty"`
	Gz  []byte `msgpack:"gz,omitempty"` // the agent, gzipped
}

const (
	// maxLendRequest bounds what the controller reads from an agent: two
	// short names.
	maxLendRequest = 1 << 10
	// maxLendReply bounds what an agent reads back: a compressed agent
	// (6–7 MiB uncompressed for linux/amd64) with a wide margin.
	maxLendReply = 64 << 20
	// maxLends is how many agents one start may ask for; a first stage
	// names one platform, and the one retry after a stale agent may ask
	// again.
	maxLends = 4
)

// AgentLender is the controller's Helper for a Foreign hop: it serves
// the agents of Agents to the hop's parent agent for as long as the hop
// starts. The requests come from an agent, which the controller does not
// trust: each is bounded, and a start gets at most a few answers.
type AgentLender struct {
	Agents bootstrap.Source
	Hop    string // the hop's context name, for logs
	Log    *zap.Logger
}

var _ Helper = (*AgentLender)(nil)

// Serve answers conn's requests until it ends.
func (l *AgentLender) Serve(conn net.Conn) {
	log := l.Log
	if log == nil {
		log = zap.NewNop()
	}
	for i := 0; ; i++ {
		body, err := router.ReadFrame(conn, nil, maxLendRequest)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Warn("agent request from a hop's parent refused", zap.String("hop", l.Hop), zap.Error(err))
			}
			return
		}
		var req lendRequest
		var r lendReply
		switch {
		case i >= maxLends:
			log.Warn("a hop's parent asked for too many agents", zap.String("hop", l.Hop))
			return
		case wire.Unmarshal(body, &req) != nil:
			log.Warn("malformed agent request from a hop's parent", zap.String("hop", l.Hop))
			return
		}
		log.Debug("sending an agent to a hop", zap.String("hop", l.Hop), zap.String("platform", req.OS+"/"+req.Arch))
		bin, err := l.Agents.Agent(req.OS, req.Arch)
		if err == nil {
			r.Gz, err = bin.Gzip()
		}
		if err != nil {
			r = lendReply{Err: err.Error()}
		}
		if err := writeFrame(conn, &r); err != nil {
			return
		}
	}
}

// Close implements Helper.
func (l *AgentLender) Close() error { return nil }

// BorrowAgents is the agent source of a Foreign hop started on an agent:
// base (the agent's own binary) for its own platform, and for the others
// the agents ms names, fetched from the controller's AgentLender on conn
// when a target first asks for one and checked against ms
// (bootstrap.WithManifests).
func BorrowAgents(base bootstrap.Source, ms []bootstrap.Manifest, conn net.Conn) bootstrap.Source {
	var mu sync.Mutex // one request at a time on the circuit
	return bootstrap.WithManifests(base, ms, func(goos, goarch string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		if err := writeFrame(conn, &lendRequest{OS: goos, Arch: goarch}); err != nil {
			return nil, err
		}
		body, err := router.ReadFrame(conn, nil, maxLendReply)
		if err != nil {
			return nil, err
		}
		var r lendReply
		if err := wire.Unmarshal(body, &r); err != nil {
			return nil, err
		}
		if r.Err != "" {
			return nil, errors.New(r.Err)
		}
		return r.Gz, nil
	})
}

func writeFrame(w io.Writer, v any) error {
	b, err := wire.Marshal(v)
	if err != nil {
		return err
	}
	frame := make([]byte, 4, 4+len(b))
	binary.BigEndian.PutUint32(frame, uint32(len(b)))
	_, err = w.Write(append(frame, b...))
	return err
}
