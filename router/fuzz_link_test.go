package router_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/router"
)

const (
	// fuzzMaxInput bounds an input of FuzzChildFrames. Larger ones could
	// make the parent bounce enough replies to exhaust the bus's send
	// window, which this child never grants more of: a slow receiver, not
	// what this target is about.
	fuzzMaxInput = 32 << 10
	// fuzzMaxFrame and fuzzWindow are the parent's limits in
	// FuzzChildFrames: small, so that inputs reach them.
	fuzzMaxFrame = 64 << 10
	fuzzWindow   = 256 << 10
)

// childFrames cuts in into yamux frames: a 12-byte header, and for a data
// frame a body of the length it announces or what is left of in (the
// header then says so), so that frames never run into each other. It
// returns the frames and the bytes they carry on the bus (stream 1) as
// the parent's yamux would hand them to its router.
func childFrames(in []byte) (frames [][]byte, bus []byte) {
	for len(in) >= 12 {
		f := append([]byte(nil), in[:12]...)
		in = in[12:]
		if f[1] == yData {
			n := min(int(binary.BigEndian.Uint32(f[8:])), len(in))
			binary.BigEndian.PutUint32(f[8:], uint32(n))
			f = append(f, in[:n]...)
			in = in[n:]
			if f[0] == 0 && binary.BigEndian.Uint32(f[4:]) == 1 {
				bus = append(bus, f[12:]...)
			}
		}
		frames = append(frames, f)
	}
	return frames, bus
}

// busAlign returns the bytes that complete the last, partial bus frame in
// bus (zeros), so that the next frame the child sends is read as one; nil
// if the frame is too large to be read (the router then drops the link).
func busAlign(bus []byte) []byte {
	for len(bus) >= 4 {
		n := int(binary.BigEndian.Uint32(bus))
		if n > fuzzMaxFrame {
			return nil
		}
		if len(bus) < 4+n {
			return make([]byte, 4+n-len(bus))
		}
		bus = bus[4+n:]
	}
	if len(bus) == 0 {
		return nil
	}
	hdr := append(append([]byte(nil), bus...), make([]byte, 4-len(bus))...)
	if n := int(binary.BigEndian.Uint32(hdr)); n <= fuzzMaxFrame {
		return make([]byte, 4-len(bus)+n)
	}
	return make([]byte, 4-len(bus))
}

func childFrameSeeds() [][]byte {
	cat := func(fs ...[]byte) []byte {
		var b []byte
		for _, f := range fs {
			b = append(b, f...)
		}
		return b
	}
	repeat := func(n int, f func(i int) []byte) []byte {
		var b []byte
		for i := 0; i < n; i++ {
			b = append(b, f(i)...)
		}
		return b
	}
	logMsg := busFrame(&router.Message{Dst: 0, Src: 2, Handle: router.HandleLog, Data: []byte("hello")})
	return [][]byte{
		nil,
		// A child going about its business: acknowledge the bus, log,
		// make a call that bounces, announce a route it may not.
		cat(yheader(yWindowUpdate, yACK, 1, 0), logMsg,
			busFrame(&router.Message{Dst: 0, Src: 2, Handle: router.HandleCall, ReplyTo: 1024}),
			busFrame(&router.Message{Dst: 0, Src: 2, Handle: router.HandleRoute, Data: []byte{0x82, 0xa2, 'o', 'p', 2, 0xa3, 'i', 'd', 's', 0x91, 7}})),
		repeat(300, func(i int) []byte { return yheader(yPing, ySYN, 0, uint32(i)) }),
		repeat(router.MaxRefusedStreamOpens+1, func(i int) []byte { return yframe(yData, ySYN, uint32(2+2*i), []byte("up")) }),
		cat(yheader(yGoAway, 0, 0, 0), logMsg),
		yheader(yGoAway, 0, 0, 1),
		yheader(yWindowUpdate, yFIN, 1, 0),
		yheader(yWindowUpdate, yRST, 1, 0),
		yheader(yWindowUpdate, ySYN, 1, 0),
		cat(yheader(yWindowUpdate, 0, 1, 0xffffffff), yheader(yWindowUpdate, 0, 1, 0xffffffff), logMsg),
		cat(yframe(yData, 0, 9, []byte("nobody")), yheader(yWindowUpdate, 0, 8, 100), logMsg),
		cat(yheader(yPing, yACK, 0, 12345), logMsg),
		{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		{0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		yframe(yData, 0, 1, []byte{0, 0, 1}),                      // a partial bus frame
		yframe(yData, 0, 1, []byte{0, 0, 0, 10, 0x96, 0, 0, 0}),   // another
		yframe(yData, 0, 1, []byte{0xff, 0xff, 0xff, 0xff, 0, 0}), // a bus frame of 4 GiB
	}
}

// FuzzChildFrames feeds a parent's link the frames of a hostile child
// over a socketpair. Whatever they are, the parent must not panic,
// must keep its goroutines and memory within one link's bounds, and must
// either keep the link consistent (a message the child sends next is
// delivered, in order) or close it and report the route lost.
func FuzzChildFrames(f *testing.F) {
	for _, s := range childFrameSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > fuzzMaxInput {
			return
		}
		frames, bus := childFrames(in)
		base := measure()

		ctl := router.New(0, router.Options{MaxFrameSize: fuzzMaxFrame, StreamWindow: fuzzWindow})
		defer ctl.Close()
		lost := make(chan router.RouteLoss, 1)
		ctl.OnRouteLoss(into(lost))
		got := newCollector()
		ctl.Register(router.HandleLog, router.Receiver{Accept: router.AcceptChildren, Deliver: got.deliver})
		a, b := connPair(t)
		defer b.Close()
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			io.Copy(io.Discard, b) // the child reads everything
		}()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		l, err := ctl.AddChild(ctx, a, 2, "fuzz")
		if err != nil {
			t.Fatal(err)
		}

		marker := []byte("marker")
		frames = append(frames, yframe(yData, 0, 1, busAlign(bus)),
			busFrame(&router.Message{Dst: 0, Src: 2, Handle: router.HandleLog, Data: marker}))
		// In one write, which fails if the parent closes the link first.
		b.Write(bytes.Join(frames, nil))
		// Every frame before the marker has been handled once it arrives;
		// or the link is closed.
		timeout := time.After(wait)
	handled:
		for {
			select {
			case m := <-got.ch:
				if string(m.Data) == string(marker) {
					break handled
				}
			case <-l.Done():
				break handled
			case <-timeout:
				t.Fatal("the link neither delivered the marker nor closed")
			}
		}
		measure().within(t, base, "after the child's frames") // the drain is one of the slack
		if err := l.Err(); err != nil {
			if loss := recv(t, lost, "the route loss of a closed link"); len(loss.IDs) != 1 || loss.IDs[0] != 2 {
				t.Fatalf("closed (%v), route loss %+v", err, loss)
			}
		} else {
			select {
			case loss := <-lost:
				t.Fatalf("route lost, link up: %+v", loss)
			default:
			}
		}

		b.Close()
		recv(t, l.Done(), "the link to close when the child's end does")
		<-drained
	})
}
