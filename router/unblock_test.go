package router

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// slowClose is a transport whose Close takes as long as a child agent
// takes to exit: until release is closed.
type slowClose struct {
	net.Conn
	release chan struct{}
}

func (s *slowClose) Close() error {
	<-s.release
	return s.Conn.Close()
}

// linkPair links a parent side over a slow-closing transport to a child
// side over a plain one.
func linkPair(t *testing.T) (parent, child *Link, release chan struct{}) {
	t.Helper()
	a, b := net.Pipe()
	release = make(chan struct{})
	type res struct {
		l   *Link
		err error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := newLink(context.Background(), b, "parent", true, &Options{StreamWindow: 256 << 10}, nil)
		ch <- res{l, err}
	}()
	parent, err := newLink(context.Background(), &slowClose{Conn: a, release: release}, "child", false, &Options{StreamWindow: 256 << 10}, New(0, Options{}).refuseOpen)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return parent, r.l, release
}

// When a link dies, readers and writers blocked on its bus and circuits
// return at once, even while the transport is still closing. With yamux
// v0.1.2 alone they spin on the closed session until the transport's Close
// returns.
func TestLinkCloseUnblocksStreamsWhileTransportCloses(t *testing.T) {
	parent, child, release := linkPair(t)
	defer child.close(nil)
	circ, err := parent.openStream(&Message{Dst: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Fill the circuit's window so that a writer blocks: the child never
	// reads it.
	big := make([]byte, 1<<20) // four windows
	errs := make(chan error, 3)
	go func() { _, err := parent.bus.Read(make([]byte, 1)); errs <- err }()
	go func() { _, err := circ.Read(make([]byte, 1)); errs <- err }()
	go func() { _, err := circ.Write(big); errs <- err }()
	runtime.Gosched()

	closed := make(chan struct{})
	go func() { parent.close(errors.New("test")); close(closed) }()
	for i := 0; i < 3; i++ {
		select {
		case err := <-errs:
			if err == nil {
				t.Fatal("a blocked stream call returned no error when its link died")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("stream calls still blocked (spinning) while the transport closes")
		}
	}
	select {
	case <-closed:
		t.Fatal("close returned before its transport did")
	default:
	}
	close(release)
	<-closed
	if _, err := parent.openStream(&Message{Dst: 1}); err == nil {
		t.Fatal("opened a circuit on a dead link")
	}
}

// A stream added after the link died is unblocked at once.
func TestStreamSetUnblocksLateStreams(t *testing.T) {
	parent, child, release := linkPair(t)
	close(release)
	defer child.close(nil)
	var s streamSet
	s.unblockAll()
	st, err := parent.sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	s.add(st)
	if _, err := st.Read(make([]byte, 1)); !errors.Is(err, yamux.ErrTimeout) {
		t.Fatalf("read on a stream added after unblockAll: %v, want a timeout", err)
	}
	parent.close(nil)
}

// The set forgets streams that nobody holds any more, so a long-lived link
// with many short circuits does not grow it without bound.
func TestStreamSetForgetsCollectedStreams(t *testing.T) {
	var s streamSet
	keep := new(yamux.Stream)
	s.add(keep)
	for i := 0; i < 1000; i++ {
		s.add(new(yamux.Stream))
		if i%50 == 0 {
			runtime.GC()
		}
	}
	if len(s.all) > 256 {
		t.Fatalf("%d entries after 1000 streams of which one is alive", len(s.all))
	}
	found := false
	for _, w := range s.all {
		found = found || w.Value() == keep
	}
	if !found {
		t.Fatal("a live stream was forgotten")
	}
	runtime.KeepAlive(keep)
}

// A link whose session has shut down, before the link itself has noticed
// and after, refuses circuits and messages with ErrLinkDown, which callers
// turn into a disconnected error naming the context: not a bare
// "session shutdown".
func TestDeadLinkErrorsAreLinkDown(t *testing.T) {
	parent, child, release := linkPair(t)
	close(release)
	defer child.close(nil)
	parent.sess.Close() // the session is gone; parent.close has not run
	if _, err := parent.openStream(&Message{Dst: 1}); !errors.Is(err, ErrLinkDown) {
		t.Errorf("circuit on a shut-down session: %v, want ErrLinkDown", err)
	}
	parent.close(nil)
	if err := parent.send(context.Background(), &Message{Dst: 1}, nil); !errors.Is(err, ErrLinkDown) || !strings.Contains(err.Error(), "link to child closed") {
		t.Errorf("message on a closed link: %v, want ErrLinkDown saying why", err)
	}
}
