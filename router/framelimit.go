package router

import (
	"fmt"

	"github.com/spindle-rpc/spindle/errkind"
)

// A frame is refused by its sender, never by its receiver: a message or
// circuit header larger than what the link's peer reads (its frame limit,
// which it announces in its hello) fails at once where it would go out,
// with a frameTooLargeError, instead of going out to be dropped by a peer
// that closes the link while its caller waits. A router in the middle of
// the path answers the call it cannot forward with that error (kind
// "too_large"), as it answers a call toward a stalled link.

// frameTooLargeError says that a message or circuit header is larger than
// the frame limit of the link it would go out on. errors.Is matches it
// to ErrFrameTooLarge and errkind.ErrTooLarge.
type frameTooLargeError struct {
	what  string // "request", "reply", "message"
	size  int    // its encoded size (an upper bound)
	link  string // the peer's name
	limit int    // the peer's frame limit
}

func (e *frameTooLargeError) Error() string {
	return fmt.Sprintf("the %s (%s) exceeds the frame limit of %s, %s, and was not sent; pass large data on a stream (stdin, a file copy) instead",
		e.what, sizeText(e.size), e.link, sizeText(e.limit))
}

func (e *frameTooLargeError) Is(target error) bool {
	return target == ErrFrameTooLarge || target == errkind.ErrTooLarge
}

// tooLargeKind is errkind.ErrTooLarge's name on the wire.
const tooLargeKind = "too_large"

// SetPeerMaxFrame sets the largest frame the link's peer reads, as its
// hello announced it (bootstrap.Hello.MaxFrame): messages and circuit
// headers larger than that are refused here, at once. 0, from an agent
// that announces none, means the limits such agents read: DefaultMaxFrameSize
// for bus frames, MaxCircuitHeader for circuit headers. Until it is
// called, a link takes its peer's limit to be its own.
func (l *Link) SetPeerMaxFrame(n int) {
	if n <= 0 {
		l.peerFrame.Store(DefaultMaxFrameSize)
		l.peerHeader.Store(MaxCircuitHeader)
		return
	}
	l.peerFrame.Store(int64(n))
	l.peerHeader.Store(int64(n))
}

// checkFrame refuses m, to go out on l as a bus message (header false) or
// a circuit header, when it is larger than what l's peer reads.
func (l *Link) checkFrame(m *Message, header bool) error {
	limit := l.peerFrame.Load()
	if header {
		limit = l.peerHeader.Load()
	}
	what := "message"
	switch {
	case m.Handle == HandleCall:
		what = "request"
	case m.Handle >= FirstDynamicHandle:
		what = "reply"
	}
	if size := m.EncodedSize(); int64(size) > limit {
		return &frameTooLargeError{what: what, size: size, link: l.name, limit: int(limit)}
	}
	return nil
}
