package connectors_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
	"github.com/spindle-rpc/spindle/internal/wire"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// fakeAgent is a Source holding random bytes as goos/goarch's agent.
func fakeAgent(t *testing.T, goos, goarch string) (bootstrap.Source, []byte) {
	t.Helper()
	data := make([]byte, 100<<10)
	rand.Read(data)
	p := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bootstrap.FromFile(p, goos, goarch), data
}

// serve runs an AgentLender for src on one end of a pipe and returns the
// other end and the lender's logs; the lender is stopped when t ends.
func serve(t *testing.T, src bootstrap.Source) (net.Conn, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	ours, theirs := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&connectors.AgentLender{Agents: src, Hop: "local → docker:app", Log: zap.New(core)}).Serve(theirs)
		theirs.Close()
	}()
	t.Cleanup(func() {
		ours.Close()
		<-done
	})
	return ours, logs
}

// An agent borrows another platform's agent once, checked against the
// manifest; its own platform never reaches the lender.
func TestBorrowAgents(t *testing.T) {
	lent, want := fakeAgent(t, "linux", "arm64")
	own, _ := fakeAgent(t, "linux", "amd64")
	conn, logs := serve(t, lent)
	src := connectors.BorrowAgents(own, bootstrap.Manifests(lent), conn)

	b, err := src.Agent("linux", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Fatalf("naming the agent fetched it already: %v", logs.All())
	}
	got, err := b.Bytes()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("borrowed agent: %d bytes, %v; want the lender's %d", len(got), err, len(want))
	}
	if _, err := src.Agent("linux", "amd64"); err != nil {
		t.Fatal(err)
	}
	again, err := src.Agent("linux", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Bytes(); err != nil {
		t.Fatal(err)
	}
	if n := logs.FilterMessage("sending an agent to a hop").Len(); n != 1 {
		t.Fatalf("the lender sent %d agents, want 1", n)
	}
}

// A lender without the platform answers with its error, which the agent
// reports; a lender whose bytes do not match the manifest is not believed.
func TestBorrowAgentsErrors(t *testing.T) {
	own, _ := fakeAgent(t, "linux", "amd64")
	named, _ := fakeAgent(t, "linux", "arm64")
	other, _ := fakeAgent(t, "linux", "arm64")

	conn, _ := serve(t, own) // has no linux/arm64
	_, err := mustAgent(t, connectors.BorrowAgents(own, bootstrap.Manifests(named), conn)).Bytes()
	if err == nil || !strings.Contains(err.Error(), "arm64") {
		t.Fatalf("missing platform: %v", err)
	}

	conn, _ = serve(t, other) // serves other bytes than the manifest names
	_, err = mustAgent(t, connectors.BorrowAgents(own, bootstrap.Manifests(named), conn)).Bytes()
	if err == nil || !strings.Contains(err.Error(), "manifest") {
		t.Fatalf("bytes that do not match the manifest: %v", err)
	}
}

func mustAgent(t *testing.T, src bootstrap.Source) *bootstrap.Binary {
	t.Helper()
	b, err := src.Agent("linux", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The lender does not trust what an agent sends: an oversized frame, a
// malformed request or too many requests end the service (logged), and
// nothing is allocated for a forged length.
func TestAgentLenderRefuses(t *testing.T) {
	src, _ := fakeAgent(t, "linux", "arm64")
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	request := frame([]byte{0x82, 0xa2, 'o', 's', 0xa5, 'l', 'i', 'n', 'u', 'x', 0xa4, 'a', 'r', 'c', 'h', 0xa5, 'a', 'r', 'm', '6', '4'})
	for _, tc := range []struct {
		name, log string
		in        []byte
		replies   int
	}{
		{"forged length", "refused", []byte{0xff, 0xff, 0xff, 0xf0}, 0},
		{"not msgpack", "malformed", frame([]byte{0xc1}), 0},
		{"an array, not a map", "malformed", frame([]byte{0xdd, 0x0f, 0xff, 0xff, 0xff}), 0},
		{"too many", "too many", bytes.Repeat(request, 5), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, logs := serve(t, src)
			go func() { conn.Write(tc.in) }()
			replies := 0
			for {
				var hdr [4]byte
				if _, err := io.ReadFull(conn, hdr[:]); err != nil {
					break
				}
				if _, err := io.CopyN(io.Discard, conn, int64(binary.BigEndian.Uint32(hdr[:]))); err != nil {
					t.Fatal(err)
				}
				replies++
			}
			if replies != tc.replies {
				t.Errorf("%d replies, want %d", replies, tc.replies)
			}
			if logs.FilterMessageSnippet(tc.log).Len() != 1 {
				t.Errorf("no %q warning: %v", tc.log, logs.All())
			}
		})
	}
}

// lenderAllocs bounds what serving one agent allocates, whatever it
// sends: at most five request frames are read (four answered, the fifth
// refused), each of at most 1 KiB, and each answer is an error of a few
// hundred bytes, marshalled and collected by the agent's end; the
// msgpack decoders add a few kilobytes. Nothing depends on how much the
// agent sends.
var lenderAllocs = allocs.Bound{Base: 32 << 10}

// FuzzAgentLender: whatever an agent writes, the lender neither panics
// nor hangs; it answers each well-formed request frame in order, at most
// four, stops at the first frame that is not one, writes nothing but
// whole reply frames (here errors: it has no agent to lend), and
// allocates within lenderAllocs.
func FuzzAgentLender(f *testing.F) {
	request := []byte{0, 0, 0, 21, 0x82, 0xa2, 'o', 's', 0xa5, 'l', 'i', 'n', 'u', 'x', 0xa4, 'a', 'r', 'c', 'h', 0xa5, 'a', 'r', 'm', '6', '4'}
	f.Add([]byte{0, 0, 0, 1, 0xc0})
	f.Add([]byte{0, 0, 0, 5, 0xdd, 0x0f, 0xff, 0xff, 0xff})
	f.Add(request)
	f.Add(bytes.Repeat(request, 6))
	f.Add(append(bytes.Repeat(request, 2), 0, 0, 4, 1))
	src := bootstrap.FromFile(filepath.Join(f.TempDir(), "missing"), "linux", "arm64")
	f.Fuzz(func(t *testing.T, in []byte) {
		// The agent's end: what it sent, then EOF (it is gone: the lender
		// must end), and what the lender answered.
		conn := &agentEnd{r: bytes.NewReader(in)}
		allocs.Within(t, lenderAllocs, len(in), "Serve", func() { (&connectors.AgentLender{Agents: src}).Serve(conn) })
		replies := 0
		for b := conn.w.Bytes(); len(b) > 0; replies++ {
			if len(b) < 4 || len(b)-4 < int(binary.BigEndian.Uint32(b)) {
				t.Fatalf("a cut reply frame: % x", b)
			}
			n := binary.BigEndian.Uint32(b)
			var r struct {
				Err string `msgpack:"err"`
				Gz  []byte `msgpack:"gz"`
			}
			if err := wire.Unmarshal(b[4:4+n], &r); err != nil || r.Err == "" || len(r.Gz) != 0 {
				t.Fatalf("reply %d: %+v, %v; want an error and no agent", replies, r, err)
			}
			b = b[4+n:]
		}
		if want := wellFormedRequests(in); replies != want {
			t.Fatalf("%d replies to % x, want %d", replies, in, want)
		}
	})
}

// agentEnd is the agent's end of a lending circuit, in memory: reads
// return r's bytes, then EOF; writes collect in w.
type agentEnd struct {
	net.Conn // the methods the lender does not use
	r        *bytes.Reader
	w        bytes.Buffer
}

func (a *agentEnd) Read(b []byte) (int, error)  { return a.r.Read(b) }
func (a *agentEnd) Write(b []byte) (int, error) { return a.w.Write(b) }
func (a *agentEnd) Close() error                { return nil }

// wellFormedRequests counts the lending requests at the start of in that
// a lender answers: whole frames of at most 1 KiB, each a msgpack map
// (os, arch), four at most.
func wellFormedRequests(in []byte) int {
	n := 0
	for ; n < 4 && len(in) >= 4; n++ {
		size := binary.BigEndian.Uint32(in)
		if size > 1<<10 || uint64(len(in)-4) < uint64(size) {
			break
		}
		var req struct {
			OS   string `msgpack:"os"`
			Arch string `msgpack:"arch"`
		}
		if wire.Unmarshal(in[4:4+size], &req) != nil {
			break
		}
		in = in[4+size:]
	}
	return n
}
