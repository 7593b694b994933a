package yamux

// Tests of Spindle's changes for hostile peers (README.spindle.md):
// Config.MaxPendingPongs, Config.RefuseStream and Session.CloseErr. The
// peer is a raw net.Pipe end that writes frames by hand and, where it
// matters, never reads: net.Pipe has no buffer, so our first write blocks
// and everything after it queues in the session.

import (
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// spindleWait bounds every wait for something that must happen; it is
// never a measure of how fast.
const spindleWait = 10 * time.Second

// spindleConf is the configuration Spindle's router uses, with a small
// pong queue.
func spindleConf() *Config {
	conf := DefaultConfig()
	conf.EnableKeepAlive = false
	conf.ConnectionWriteTimeout = 365 * 24 * time.Hour
	conf.StreamOpenTimeout = 0
	conf.LogOutput = io.Discard
	conf.MaxPendingPongs = 8
	return conf
}

// rawClient runs a client session on one end of a net.Pipe and returns the
// other end for the test to speak raw frames on.
func rawClient(t *testing.T, conf *Config) (*Session, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	sess, err := Client(a, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		sess.Close()
	})
	return sess, b
}

func rawFrame(typ uint8, flags uint16, id, length uint32) []byte {
	h := header(make([]byte, headerSize))
	h.encode(typ, flags, id, length)
	return h
}

func write(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatalf("write to the session: %v", err)
	}
}

func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(spindleWait):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// A peer that pings and never reads the replies costs no goroutine per
// ping, and once both reply queues are full it is cut off.
func TestSpindlePingFloodBounded(t *testing.T) {
	conf := spindleConf()
	// A refused stream open is the marker: the receive loop handles frames
	// in order, so once it is refused every ping before it was handled.
	markers := make(chan uint32, 1)
	conf.RefuseStream = func(id uint32) error {
		markers <- id
		return nil
	}
	sess, peer := rawClient(t, conf)
	before := runtime.NumGoroutine()

	// As many pings as the pong queue and the send queue hold between
	// them, whatever the responder has taken yet: no flood.
	n := conf.MaxPendingPongs + cap(sess.sendCh)
	for i := 0; i < n; i++ {
		write(t, peer, rawFrame(typePing, flagSYN, 0, uint32(i)))
	}
	write(t, peer, rawFrame(typeWindowUpdate, flagSYN, 2, 0))
	if id := wait(t, markers, "the marker"); id != 2 {
		t.Fatalf("marker %d", id)
	}
	if sess.IsClosed() {
		t.Fatalf("session closed after %d pings, which the queues hold: %v", n, sess.CloseErr())
	}
	// Upstream ran a goroutine per ping here, each blocked on the send
	// queue. The slack is for goroutines of other tests still exiting.
	const slack = 2
	if after := runtime.NumGoroutine(); after > before+slack {
		t.Fatalf("%d goroutines after %d unanswered pings, %d before", after, n, before)
	}

	// More pings: the session ends with ErrPingFlood. The writes succeed
	// until then (the receive loop reads ahead of what it handles), so
	// this only bounds them.
	ping := rawFrame(typePing, flagSYN, 0, 0)
	for i := 0; ; i++ {
		if _, err := peer.Write(ping); err != nil {
			break
		}
		if i > 100_000 {
			t.Fatal("100,000 pings past the queues, and the session is still up")
		}
	}
	wait(t, sess.CloseChan(), "the session to close")
	if err := sess.CloseErr(); err != ErrPingFlood {
		t.Fatalf("CloseErr %v, want ErrPingFlood", err)
	}
}

// A peer that waits for its replies gets every ping answered: here in
// rounds of as many pings as the pong queue holds, many times over.
func TestSpindlePingsAnswered(t *testing.T) {
	conf := spindleConf()
	sess, peer := rawClient(t, conf)
	hdr := header(make([]byte, headerSize))
	for round := 0; round < 100; round++ {
		for i := 0; i < conf.MaxPendingPongs; i++ {
			write(t, peer, rawFrame(typePing, flagSYN, 0, uint32(i)))
		}
		answered := make(map[uint32]bool)
		for len(answered) < conf.MaxPendingPongs {
			if _, err := io.ReadFull(peer, hdr); err != nil {
				t.Fatalf("round %d: %v (session: %v)", round, err, sess.CloseErr())
			}
			id := hdr.Length()
			if hdr.MsgType() != typePing || hdr.Flags() != flagACK || id >= uint32(conf.MaxPendingPongs) || answered[id] {
				t.Fatalf("round %d: unexpected reply %v", round, hdr)
			}
			answered[id] = true
		}
	}
	if sess.IsClosed() {
		t.Fatalf("session closed: %v", sess.CloseErr())
	}
}

// A stream the peer opens is reset, never accepted, and holds nothing;
// the session's own streams still work.
func TestSpindleRefuseStream(t *testing.T) {
	conf := spindleConf()
	refused := make(chan uint32, 1)
	conf.RefuseStream = func(id uint32) error {
		refused <- id
		return nil
	}
	a, b := net.Pipe()
	client, err := Client(a, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	peerConf := spindleConf()
	peerConf.MaxPendingPongs = 0
	server, err := Server(b, peerConf)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()

	st, err := server.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	// The write races the RST: either outcome is a refusal.
	st.Write([]byte("let me in"))
	if id := wait(t, refused, "the refusal"); id != st.StreamID() {
		t.Fatalf("refused stream %d, opened %d", id, st.StreamID())
	}
	if _, err := st.Read(make([]byte, 1)); err != ErrConnectionReset {
		t.Fatalf("read on the refused stream: %v, want ErrConnectionReset", err)
	}
	if n := client.NumStreams(); n != 0 {
		t.Fatalf("the refusing session holds %d streams", n)
	}

	// Streams the refusing side opens work as usual.
	mine, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	accepted := make(chan *Stream, 1)
	go func() {
		s, err := server.AcceptStream()
		if err != nil {
			t.Error(err)
		}
		accepted <- s
	}()
	if _, err := mine.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	theirs := wait(t, accepted, "the accept")
	if theirs == nil {
		t.FailNow()
	}
	defer theirs.Close()
	buf := make([]byte, 2)
	if _, err := io.ReadFull(theirs, buf); err != nil || string(buf) != "hi" {
		t.Fatalf("read %q, %v", buf, err)
	}
}

// A peer that opens streams and never reads our RSTs cannot stall the
// receive loop: every open is refused, each opening frame's data
// discarded, nothing kept.
func TestSpindleRefuseStreamDeafPeer(t *testing.T) {
	conf := spindleConf()
	const n = 1000
	count := 0
	done := make(chan struct{})
	conf.RefuseStream = func(id uint32) error {
		count++ // the receive loop is the only caller
		if count == n {
			close(done)
		}
		return nil
	}
	sess, peer := rawClient(t, conf)
	before := runtime.NumGoroutine()
	body := []byte("data on a stream nobody accepted")
	for i := 0; i < n; i++ {
		id := uint32(2 + 2*i)
		write(t, peer, append(rawFrame(typeData, flagSYN, id, uint32(len(body))), body...))
		// Later data on the refused stream is discarded too.
		write(t, peer, append(rawFrame(typeData, 0, id, uint32(len(body))), body...))
	}
	wait(t, done, "every open refused")
	if sess.IsClosed() {
		t.Fatalf("session closed: %v", sess.CloseErr())
	}
	if s := sess.NumStreams(); s != 0 {
		t.Fatalf("%d streams kept", s)
	}
	const slack = 2 // goroutines of other tests still exiting
	if after := runtime.NumGoroutine(); after > before+slack {
		t.Fatalf("%d goroutines after %d refused opens, %d before", after, n, before)
	}
}

// An error from RefuseStream ends the session with that error.
func TestSpindleRefuseStreamError(t *testing.T) {
	conf := spindleConf()
	budget := errors.New("too many stream opens")
	opens := 0
	conf.RefuseStream = func(id uint32) error {
		opens++
		if opens > 3 {
			return budget
		}
		return nil
	}
	sess, peer := rawClient(t, conf)
	go io.Copy(io.Discard, peer) // read the RSTs
	for i := 0; i < 4; i++ {
		write(t, peer, rawFrame(typeWindowUpdate, flagSYN, uint32(2+2*i), 0))
	}
	wait(t, sess.CloseChan(), "the session to close")
	if err := sess.CloseErr(); !errors.Is(err, budget) {
		t.Fatalf("CloseErr %v, want %v", err, budget)
	}
}

// Opening a stream under an id the session already uses is a protocol
// error, refused or not.
func TestSpindleRefuseDuplicateStream(t *testing.T) {
	conf := spindleConf()
	conf.RefuseStream = func(uint32) error { return nil }
	sess, peer := rawClient(t, conf)
	go io.Copy(io.Discard, peer)
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	write(t, peer, rawFrame(typeWindowUpdate, flagSYN, st.StreamID(), 0))
	wait(t, sess.CloseChan(), "the session to close")
	if err := sess.CloseErr(); err != ErrDuplicateStream {
		t.Fatalf("CloseErr %v, want ErrDuplicateStream", err)
	}
}

func TestSpindleCloseErr(t *testing.T) {
	sess, peer := rawClient(t, spindleConf())
	if err := sess.CloseErr(); err != nil {
		t.Fatalf("open session: CloseErr %v", err)
	}
	peer.Close()
	wait(t, sess.CloseChan(), "the session to close")
	if err := sess.CloseErr(); err != io.EOF {
		t.Fatalf("after the peer closed: CloseErr %v, want io.EOF", err)
	}

	sess, _ = rawClient(t, spindleConf())
	sess.Close()
	if err := sess.CloseErr(); err != ErrSessionShutdown {
		t.Fatalf("after Close: CloseErr %v, want ErrSessionShutdown", err)
	}
}
