// Package router is Spindle's message bus.
//
// Every process in a Spindle tree (the controller and each agent) runs one
// Router. Routers are joined by Links: one link per parent/child connection,
// each a yamux session over whatever byte stream reached the child (SSH
// session stdio, a pipe to a sudo child, `docker exec -i` stdio). The parent
// is the yamux client.
//
// Protocol flow on one link (PROTOCOL.md has the byte-level detail):
//
//  1. The parent opens yamux stream 1, the bus. Each direction of the bus is
//     a sequence of frames: a 4-byte big-endian length, then one
//     msgpack-encoded Message. A frame larger than the link's MaxFrameSize is
//     a protocol error that closes the link.
//  2. Every further stream is a circuit: a byte stream toward one context,
//     spliced hop by hop. Its first bytes are one frame holding a Message
//     (the circuit header) addressed like a bus message; after that the
//     stream carries raw bytes. Only a parent may open circuits.
//  3. A router delivers a message whose dst is its own id to the Receiver
//     registered for msg.Handle, and forwards any other message on the link
//     its table names for dst (children), or else toward its parent.
//
// Routing policy, enforced for every message that arrives on a link:
//
//   - msg.Src must be routed through the link it arrived on: an id granted to
//     that child subtree, or, on the parent link, any id outside our subtree.
//   - A message from a child is forwarded only upward, never into another
//     child subtree, so targets cannot address each other.
//   - Each Receiver declares whom it accepts: only the parent link (service
//     calls), only one source context (replies), only descendants (logs),
//     or only a direct child, on its own link (upcalls). The controller has
//     no parent, so nothing below it can make it run anything.
//   - One exception to "calls come from ancestors": an upcall
//     (HandleUpcall), a request of a fixed kind that a child makes of its
//     parent agent (services/modules/upcall: fetching a store entry). It goes to
//     the direct parent only: a router never forwards one upward, the
//     receiver takes it only from the child at the far end of the link
//     it arrived on, and the controller serves none (refused, not
//     bounced). Its receiver may refuse more (Receiver.Admit); its answer
//     waits for room in the link's queue (Router.Answer).
//   - Routes are granted top-down: the controller's grant for a new id
//     installs the route on every router between it and the new context's
//     parent. A child may announce (add_route) only ids granted to its link,
//     and withdraw (del_route) only ids routed through it.
//
// Refused messages are dropped and logged at warn level with the link name.
//
// # Slow receivers
//
// A child that stops draining (its process is stopped, its pipe or SSH
// channel window is full, its container is wedged) must delay nobody but
// the callers of its own subtree. The policy, with the bounds in const.go:
//
//   - Each link has one reading goroutine (Router.readLoop), which never
//     waits on another link, and one writing goroutine (Router.writeLoop),
//     the only one that waits on the link's transport. Sending or
//     forwarding a message appends its frame to the link's outgoing queue
//     and returns; the writer hands everything queued to the bus in one
//     write per turn. Frames keep their order on a link.
//   - A queue holding linkQueueLimit (4 MiB) or more refuses calls
//     (HandleCall) forwarded from another link: such a call is answered
//     at once with an error of kind "stalled" (errkind.ErrStalled: "the
//     link to <child> is not draining: 4.0 MiB queued (…); the call was
//     refused and did not run"), sent back on the link it came from as a
//     FlagLast|FlagError reply (PROTOCOL.md section 9); one without
//     reply_to is dropped. Log records (HandleLog) are dropped, and
//     counted in a warning once the queue has room again.
//   - A call that originates here (the controller's, toward a direct
//     child) waits for room instead, until the context given to
//     SendContext is done or the link dies: the caller is the one that
//     can slow down, while a router in the middle cannot wait without
//     holding up everything its parent link carries.
//   - Never refused: controls (cancel, resize, signal), route messages,
//     replies and bounces that arrive on the parent link or originate here.
//     They are queued past the limit, so the parent link's reader never
//     waits and a cancel always reaches a stalled child once it drains;
//     they are few, and bounded by the calls already let in. They are not
//     moved ahead of queued calls: a cancel overtaking its own call would
//     find nothing to cancel.
//   - Messages that arrive on a child link (replies and announcements
//     going up, bounces going back down) wait for room in a full queue:
//     that holds back the child they came from, whose reader this is, and
//     nothing else, so that a child flooding a slow parent link cannot
//     make this router buffer without bound.
//   - A link to a child that has had something to write (bus frames
//     waiting, or a write to its transport in progress, a circuit's as
//     well) while its transport took not a byte for Options.StallTimeout
//     (default DefaultStallTimeout, 30 s; negative: never; the controller
//     passes its value to every agent that connects a child, and
//     Link.SetStallTimeout sets it per link) is declared dead, in one
//     warning ("disconnected"): its routes are withdrawn as for any lost
//     link (del_route), and every call waiting on its subtree fails at
//     once as disconnected, naming the link ("link to <child> lost: not
//     draining: its transport took nothing for 30s …"). A healthy child reads its transport all the
//     time (yamux's flow control is per stream, so a slow circuit reader
//     does not stop it), and writes to the transport go in pieces of at
//     most progressChunk, so a slow but moving link is never taken for a
//     stalled one. The other way round, a stopped child whose transport
//     still has room (its pipe, its SSH window) for what was sent to it
//     looks like a busy one: calls to it wait as calls to a busy agent do
//     (their context's deadline bounds them) until more traffic fills the
//     transport. The parent link is never timed: the parent judges it.
//   - Circuits are yamux streams of their own, with their own window and
//     splice goroutines: a slow circuit reader holds back that circuit
//     (one window per hop), not the bus. A transport that has stopped
//     stops every stream of its link, circuits included, until the stall
//     bound ends it.
//
// On the controller, a stalled direct child holds up only the calls sent
// to it (until their context ends or the stall bound), not its siblings.
//
// # Dead links
//
// The stall bound finds a child that does not take what is sent to it; a
// child that has nothing to take (an idle link, or calls waiting for
// replies) and stops answering (its process stopped, its host or a
// connection on the way gone without a word) is found by the keepalive:
//
//   - At every Options.KeepaliveInterval (default DefaultKeepaliveInterval,
//     15 s) a link to a child checks whether its transport delivered
//     anything since the last check, and if not, pings the child (a yamux
//     ping, which the child's yamux session answers whatever its router is
//     doing; one ping in flight at most).
//   - When Options.KeepaliveCountMax (default DefaultKeepaliveCountMax,
//     3) pings in a row go unanswered, nothing at all read after them,
//     the link is declared dead as for the stall bound: one warning
//     ("disconnected": "no answer to keepalives: its transport delivered
//     nothing for 1m0s (3 keepalives 15s apart …)"), its routes withdrawn,
//     and every call waiting on its subtree failed as disconnected, naming
//     the link. So a dead child fails its callers 60 to 75 s after its
//     last byte by default: KeepaliveCountMax+1 intervals, plus up to one
//     for the first check to find the silence.
//   - Any byte counts, not only the pong: a link busy with a transfer,
//     whose pong waits behind the data, is alive.
//   - Negative KeepaliveInterval turns it off. The controller passes its
//     values to every agent that connects a child, and Link.SetKeepalive
//     sets them per link; the CLI takes them from -o ServerAliveInterval
//     and ServerAliveCountMax, as ssh does. The parent link has none: the
//     parent judges it.
//
// The caller's own cancellation does not wait for either bound: a
// cancelled call fails at once, and its circuit is read for
// context.CancelGrace more, then abandoned.
package router
