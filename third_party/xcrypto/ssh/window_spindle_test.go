package ssh

// Spindle's test of the channel window (channel.go, channelWindowSize and
// windowAdjustStep): a reader that keeps up returns the window in steps of
// windowAdjustStep, not one message per 96 KiB as upstream, and the peer
// is never left with less than the window minus one step and one packet,
// so that a long link stays full.

import (
	"encoding/binary"
	"sync"
	"testing"
)

// adjustRecorder is a packetConn that keeps the window adjustments
// written to it.
type adjustRecorder struct {
	mu      sync.Mutex
	adjusts []uint32
}

func (r *adjustRecorder) writePacket(p []byte) error {
	var msg windowAdjustMsg
	if err := Unmarshal(p, &msg); err != nil {
		return err
	}
	r.mu.Lock()
	r.adjusts = append(r.adjusts, msg.AdditionalBytes)
	r.mu.Unlock()
	return nil
}

func (r *adjustRecorder) readPacket() ([]byte, error) { select {} }
func (r *adjustRecorder) Close() error                { return nil }

func TestWindowAdjustedInSteps(t *testing.T) {
	rec := &adjustRecorder{}
	ch := (&mux{conn: rec}).newChannel("session", channelOutbound, nil)
	ch.decided = true // as once the peer confirmed the open

	// The peer sends full packets while its window allows, and the
	// reader takes each one as it comes.
	peerWindow := uint32(channelWindowSize)
	lowest := peerWindow
	const total = 8 * channelWindowSize
	buf := make([]byte, channelMaxPacket)
	seen := 0
	for sent := 0; sent < total; sent += channelMaxPacket {
		if peerWindow < channelMaxPacket {
			t.Fatalf("after %d bytes the peer's window is %d, less than a packet", sent, peerWindow)
		}
		packet := make([]byte, 9+channelMaxPacket)
		packet[0] = msgChannelData
		binary.BigEndian.PutUint32(packet[5:], channelMaxPacket)
		if err := ch.handleData(packet); err != nil {
			t.Fatal(err)
		}
		peerWindow -= channelMaxPacket
		lowest = min(lowest, peerWindow)
		if n, err := ch.Read(buf); err != nil || n != channelMaxPacket {
			t.Fatalf("read %d, %v", n, err)
		}
		rec.mu.Lock()
		for _, a := range rec.adjusts[seen:] {
			peerWindow += a
		}
		seen = len(rec.adjusts)
		rec.mu.Unlock()
	}
	if want := total / windowAdjustStep; len(rec.adjusts) != want {
		t.Errorf("%d window adjustments for %d bytes, want %d", len(rec.adjusts), total, want)
	}
	for _, a := range rec.adjusts {
		if a != windowAdjustStep {
			t.Errorf("an adjustment of %d bytes, want %d", a, windowAdjustStep)
		}
	}
	if floor := uint32(channelWindowSize - windowAdjustStep - channelMaxPacket); lowest < floor {
		t.Errorf("the peer's window fell to %d, below %d", lowest, floor)
	}
}
