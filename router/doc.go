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
package router
