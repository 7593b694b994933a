// Package latency is a userspace TCP proxy on 127.0.0.1 that adds a fixed
// one-way delay in each direction, for benchmarks and tests at a given
// round-trip time (the test machines' kernels have no netem). It delays, it
// does not throttle: bytes read at t are written at t+delay while later
// bytes are already being read, through a deep queue per direction, so the
// bandwidth is the loopback's. It can also black-hole its connections, a
// network that died silently.
//
// Not toxiproxy: as a library it would bring its whole dependency tree
// (prometheus, zerolog, gorilla/mux) into the shipped CLI for the one
// feature needed here.
package latency

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// queueChunks bounds each direction's queue: 4096 chunks of up to 32 KiB,
// far more than any bandwidth-delay product measured here.
const queueChunks = 4096

// Proxy forwards connections on 127.0.0.1 to an upstream address.
type Proxy struct {
	ln       net.Listener
	upstream string
	delay    time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	holed  bool
	hole   chan struct{}
	wg     sync.WaitGroup

	// up and down count the bytes read from clients (for upstream) and
	// from upstream (for clients), over all connections; turns counts
	// replies (see Turns).
	up, down, turns atomic.Int64
}

// Start listens on 127.0.0.1 and forwards each connection to upstream with
// oneWay added in each direction.
func Start(upstream string, oneWay time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, delay: oneWay, conns: map[net.Conn]bool{}, hole: make(chan struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's port on 127.0.0.1.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Forwarded returns how many bytes the proxy has read from its clients
// (for upstream) and from upstream (for its clients), over all its
// connections: what crossed the slow link, whatever the timing.
func (p *Proxy) Forwarded() (up, down int64) { return p.up.Load(), p.down.Load() }

// Turns returns how many times, over all its connections, bytes came back
// from upstream after bytes went to it: the request/response round trips
// that crossed the link, whatever the delay. A burst each way counts once,
// however many reads it takes; bytes from upstream that follow none from
// the client (a server's greeting) count none.
func (p *Proxy) Turns() int64 { return p.turns.Load() }

// Directions of a connection's last bytes, for Turns.
const (
	dirNone int32 = iota
	dirUp
	dirDown
)

// Blackhole makes every connection, open or future, drop all bytes in both
// directions without closing: only keepalives can tell.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.holed {
		p.holed = true
		close(p.hole)
	}
}

// Close stops accepting, ends every proxied connection and waits for them.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			u, err := net.DialTimeout("tcp", p.upstream, 10*time.Second)
			if err != nil || !p.track(u) {
				if u != nil {
					u.Close()
				}
				return
			}
			defer p.untrack(u)
			setNoDelay(c)
			setNoDelay(u)
			var wg sync.WaitGroup
			var last atomic.Int32 // dirUp or dirDown: who sent last
			wg.Add(2)
			go func() {
				defer wg.Done()
				p.pipe(u, c, &p.up, func() { last.Store(dirUp) })
			}()
			go func() {
				defer wg.Done()
				p.pipe(c, u, &p.down, func() {
					if last.Swap(dirDown) == dirUp {
						p.turns.Add(1)
					}
				})
			}()
			wg.Wait()
		}()
	}
}

type chunk struct {
	due  time.Time
	data []byte
}

// pipe copies src to dst, each chunk delay after it was read, adding what
// it reads to count and calling read after each read of some bytes; one
// writer takes chunks from a FIFO, so order is kept. At EOF it half-closes
// dst; on any error it closes both.
func (p *Proxy) pipe(dst, src net.Conn, count *atomic.Int64, read func()) {
	q := make(chan chunk, queueChunks)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(0)
		defer t.Stop()
		for ch := range q {
			if d := time.Until(ch.due); d > 0 {
				t.Reset(d)
				<-t.C
			}
			select {
			case <-p.hole:
				continue // dropped on the floor
			default:
			}
			if _, err := dst.Write(ch.data); err != nil {
				dst.Close()
				src.Close()
				for range q { // drain so the reader never blocks
				}
				return
			}
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		} else {
			dst.Close()
		}
	}()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			count.Add(int64(n))
			read()
			q <- chunk{due: time.Now().Add(p.delay), data: buf[:n]}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			break
		}
	}
	close(q)
	<-done
}

func setNoDelay(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
}
