package router

import "time"

// ProtocolVersion is the bus protocol version carried in every agent hello.
// Bump it on any incompatible change to framing, Message or well-known
// handles.
const ProtocolVersion = 1

// Context ids.
const (
	// ControllerID is the id of the root router; it allocates all other ids.
	ControllerID uint32 = 0
)

// Well-known handles. Handles below FirstDynamicHandle are reserved for
// protocol services; reply handles are allocated from FirstDynamicHandle up.
const (
	// HandleRoute carries route grants (down) and announcements (up). Routers
	// on the path process these as they forward them.
	HandleRoute uint32 = 1
	// HandleCall receives service calls (rpc.Request payloads).
	HandleCall uint32 = 2
	// HandleControl receives control of a running call: cancel, resize, signal.
	HandleControl uint32 = 3
	// HandleLog receives forwarded log records from descendants.
	HandleLog uint32 = 4
	// HandleUpcall receives the few requests a child may make of its
	// ancestors (fetching a cached module, signing with a controller key).
	HandleUpcall uint32 = 5

	FirstDynamicHandle uint32 = 1024
)

// Message flags.
const (
	// FlagLast marks the final message of a reply stream.
	FlagLast uint16 = 1 << 0
	// FlagError marks a reply whose data is an encoded error.
	FlagError uint16 = 1 << 1
	// FlagDead is set by a router on a synthetic reply telling the sender its
	// message could not be delivered (no route, no receiver, link lost).
	FlagDead uint16 = 1 << 2
)

// Limits.
const (
	// DefaultMaxFrameSize bounds one bus frame, and the header frame at the
	// start of a circuit (a call's arguments: exec.Start's argv and
	// environment, which Linux bounds at 2 MiB by default, fit with room
	// to spare). Larger payloads must travel over a circuit's stream. An
	// agent announces its limit in its hello, and its parent refuses a
	// larger frame at once, at the caller (framelimit.go).
	DefaultMaxFrameSize = 4 << 20
	// MaxCircuitHeader is the circuit header limit of agents that
	// announce no frame limit in their hello (SetPeerMaxFrame).
	MaxCircuitHeader = 1 << 20
	// DefaultStreamWindow is the yamux per-stream window. yamux's default of
	// 256 KiB caps a circuit at 256 KiB per round trip.
	DefaultStreamWindow = 16 << 20
	// circuitHeaderTimeout bounds how long a hop waits for a circuit header.
	circuitHeaderTimeout = 30 * time.Second
)

// Limits on what the peer of a link can make this process hold or do. A
// child is untrusted (a container's root controls the shell that starts
// its agent): what it sends is bounded here or above (frames, windows),
// and a child that goes past a bound that ends its link is disconnected
// and named in one warning (ErrPeerLimit). Per link, a router runs a
// fixed number of goroutines, whatever the peer sends: its read loop, its
// writer (queue.go), an accept loop (the parent link only), a watcher of
// the session's end, and yamux's receive, send and ping-reply loops.
const (
	// maxPendingPongs bounds the replies to the peer's pings that wait
	// for room in yamux's send queue (64 frames; yamux
	// Config.MaxPendingPongs): one goroutine per link sends them, where
	// yamux upstream runs one per ping. Spindle never pings (keepalive is
	// off), and a yamux keepalive has one ping out at a time, so a peer
	// with both queues full of replies pings without reading them: the
	// link is dropped (yamux.ErrPingFlood).
	maxPendingPongs = 64
	// maxRefusedStreamOpens is how many streams a child may open, each
	// refused, before it is disconnected. Only a parent opens circuits, so
	// each is reset at once in yamux's receive loop and holds nothing
	// here (yamux Config.RefuseStream); the budget keeps a buggy child's
	// first refusals in the log instead of cutting it off at the first,
	// and a flood short.
	maxRefusedStreamOpens = 100
	// refusalWarnBurst and refusalWarnInterval bound the "refused message"
	// warnings of one link: the first refusalWarnBurst of every
	// refusalWarnInterval are logged, the rest counted and reported with
	// the next warning logged (field more_refused) or when the link ends,
	// so a child that floods refusable messages costs the log a few lines
	// a second and no refusal goes uncounted.
	refusalWarnBurst    = 20
	refusalWarnInterval = time.Second
)

// Slow receivers: the policy these bounds serve is in doc.go ("Slow
// receivers") and PROTOCOL.md section 6.6.
const (
	// linkQueueLimit is how many bytes of bus frames may wait in one
	// link's outgoing queue before calls toward that link are refused (and
	// log records dropped). A healthy link's queue stays near empty: its
	// writer hands everything queued to yamux at each turn, so frames pile
	// up only while the link's transport or the far router's window is
	// full. 4 MiB holds a full frame (DefaultMaxFrameSize) and about a
	// thousand ordinary calls, which a link that drains at all works
	// through in well under a second; and it is what a stalled child costs
	// its parent in memory, plus one frame (the last call let in) and the
	// messages never refused (replies, controls, route messages), which
	// the calls already let in bound.
	linkQueueLimit = 4 << 20
	// DefaultStallTimeout is how long a child link may have something to
	// write while its transport takes not a byte before it is declared
	// dead (Options.StallTimeout). Generous: a link that is merely slow or
	// busy shows progress at least every progressChunk bytes (about 9 s
	// at 28 kB/s); 30 s without a byte is a stopped process or a wedged
	// connection.
	DefaultStallTimeout = 30 * time.Second
	// DefaultKeepaliveInterval and DefaultKeepaliveCountMax bound how
	// long a link to a child may deliver nothing before it is declared
	// dead (Options.KeepaliveInterval, KeepaliveCountMax): 3 keepalives
	// 15 s apart unanswered, so a dead child is found 60 to 75 s after
	// its last byte (the silent interval that sends the first, the three
	// waits, and up to one interval before the first check). ssh's
	// ServerAliveInterval and ServerAliveCountMax, whose names the CLI's
	// -o takes, count the same way, with the same defaults.
	DefaultKeepaliveInterval = 15 * time.Second
	DefaultKeepaliveCountMax = 3
	// progressChunk bounds one write to a link's transport, so that a
	// slow transport shows progress every progressChunk bytes instead of
	// once per yamux frame (up to a stream window, 16 MiB).
	progressChunk = 256 << 10
	// maxIdleQueueBuf is the largest queue buffer a link keeps for reuse
	// once it has been written: a burst's buffers are not pinned forever.
	maxIdleQueueBuf = 256 << 10
)
