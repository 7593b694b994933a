package router_test

import (
	"testing"

	"github.com/spindle-rpc/spindle/router"
)

func benchMsg() *router.Message {
	return &router.Message{Dst: 7, Src: 0, Handle: router.HandleCall, ReplyTo: 1030, Flags: router.FlagLast, Data: make([]byte, 128)}
}

func BenchmarkMarshalAppend(b *testing.B) {
	m := benchMsg()
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = m.MarshalAppend(buf[:0])
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	enc := benchMsg().MarshalAppend(nil)
	var m router.Message
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if err := m.Unmarshal(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// roundTripPair joins 0 → 1 where 1 answers HandleCall at once.
func roundTripPair(b *testing.B) *router.Router {
	ctl := newRouter(b, 0, router.Options{})
	r1 := newRouter(b, 1, router.Options{})
	r1.Register(router.HandleCall, router.Receiver{Accept: router.AcceptParent, Deliver: func(m *router.Message) {
		r1.Send(&router.Message{Dst: m.Src, Handle: m.ReplyTo, Flags: router.FlagLast, Data: m.Data})
	}})
	link(b, ctl, ctl, r1, "c1")
	return ctl
}

func BenchmarkRoundTrip(b *testing.B) {
	ctl := roundTripPair(b)
	done := make(chan struct{}, 1)
	h := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 1, Deliver: func(*router.Message) { done <- struct{}{} }})
	data := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		if err := ctl.Send(&router.Message{Dst: 1, Handle: router.HandleCall, ReplyTo: h, Data: data}); err != nil {
			b.Fatal(err)
		}
		<-done
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkRoundTrip64InFlight(b *testing.B) {
	ctl := roundTripPair(b)
	const inflight = 64
	done := make(chan struct{}, inflight)
	h := ctl.NewReceiver(router.Receiver{Accept: router.AcceptSource, Source: 1, Deliver: func(*router.Message) { done <- struct{}{} }})
	data := make([]byte, 64)
	send := func() {
		if err := ctl.Send(&router.Message{Dst: 1, Handle: router.HandleCall, ReplyTo: h, Data: data}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for ; sent < inflight && sent < b.N; sent++ {
		send()
	}
	for i := 0; i < b.N; i++ {
		<-done
		if sent < b.N {
			send()
			sent++
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
