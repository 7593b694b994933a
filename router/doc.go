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
//     calls), only one source context (replies), or only direct children
//     (logs). The controller has no parent, so nothing below it can make it
//     run anything.
//   - Routes are granted top-down: the controller's grant for a new id
//     installs the route on every router between it and the new context's
//     parent. A child may announce (add_route) only ids granted to its link,
//     and withdraw (del_route) only ids routed through it.
//
// Refused messages are dropped and logged at warn level with the link name.
//
// # Slow receivers
//
// What happens today when a link is not draining (the child process is
// stopped, its pipe or SSH channel window is full, or its own router is not
// reading its bus). Nothing is dropped and nothing is queued per child:
//
//   - Each link has one reading goroutine (Router.readLoop). It reads a
//     frame and handles it before it reads the next: it delivers it
//     (Receiver.Deliver must not block: rpc.Server starts a goroutine per
//     call, replies and controls only record), or forwards it by writing
//     it to the next link (Link.send), on that same goroutine. Bounces go
//     back the same way.
//   - Link.send holds the link's write lock and writes the frame to the
//     bus stream (yamux Stream.Write). That write waits for stream window
//     when the far router has 16 MiB of bus frames unread, and then until
//     yamux's send loop has written the frame to the link's byte stream,
//     which one send loop does for every stream of the link in turn. There
//     is no deadline (ConnectionWriteTimeout is a year, keepalives are
//     off): only the link's death ends the wait (streamSet gives every
//     stream a past deadline then).
//   - So on an agent, a child that does not drain blocks the reader of the
//     parent link as soon as a message for that child arrives: the agent
//     then reads nothing more from its parent, and calls and cancels for
//     the agent itself, messages for its other children (the stalled
//     child's siblings), route grants, and cancels addressed to the
//     stalled child all wait behind that write. yamux keeps receiving them
//     into the parent link's bus stream, up to its 16 MiB window; past
//     that, the writes from the parent block too, and so on up to the
//     controller, where the goroutine that called Send (Context.Go, or the
//     one that sends a call's cancel) waits, and other senders to that link
//     queue behind its write lock. Upward, a child link's reader that
//     forwards replies to a parent link that is not draining waits the same
//     way, holding back that child's subtree only.
//   - On the controller, which has no parent link, a stalled child holds
//     up only the goroutines sending to it: its siblings that are direct
//     children of the controller have links and readers of their own.
//   - Circuits are yamux streams of their own, with their own window and
//     their own splice goroutines: a circuit whose reader is slow holds
//     back that circuit (one window per hop), not the bus, unless the
//     link's byte stream itself has stopped, which stops every stream on
//     the link.
//
// A stalled child is therefore cleared only when its link dies (its
// process exits, SSH keepalives give up, the connector closes it), and
// until then it can hold up its siblings and its parent agent. This is
// the current behaviour, not the intended one: the reliability issue
// replaces the blocking forward with one that never makes a link's reader
// wait on another link.
package router
