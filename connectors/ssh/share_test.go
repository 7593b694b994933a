package ssh

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeConn is a pooled connection for sharePool's tests.
type fakeConn struct {
	id     int
	closed chan struct{}
	once   sync.Once
}

func (c *fakeConn) close() { c.once.Do(func() { close(c.closed) }) }

type fakeDialer struct {
	dials   atomic.Int32
	closes  atomic.Int32
	gate    chan struct{} // when not nil, dials wait for it
	entered chan struct{} // when not nil, told of each dial first
	err     error
}

func (d *fakeDialer) pool() *sharePool[string, *fakeConn] {
	return newSharePool[string](func(c *fakeConn) { d.closes.Add(1); c.close() }, func(c *fakeConn) { <-c.closed })
}

func (d *fakeDialer) dial() (*fakeConn, error) {
	n := d.dials.Add(1)
	if d.entered != nil {
		d.entered <- struct{}{}
	}
	if d.gate != nil {
		<-d.gate
	}
	if d.err != nil {
		return nil, d.err
	}
	return &fakeConn{id: int(n), closed: make(chan struct{})}, nil
}

func TestSharePoolDialsOnceForConcurrentUsers(t *testing.T) {
	d := &fakeDialer{gate: make(chan struct{})}
	p := d.pool()
	const n = 20
	got := make([]*shared[*fakeConn], n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := p.acquire(context.Background(), "web", d.dial)
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		}()
	}
	close(d.gate)
	wg.Wait()
	if d.dials.Load() != 1 {
		t.Fatalf("%d dials for %d users starting together, want 1", d.dials.Load(), n)
	}
	for _, s := range got {
		if s != got[0] {
			t.Fatal("users got different connections")
		}
	}
	for i, s := range got {
		p.release("web", s, true)
		if want := int32(0); i < n-1 && d.closes.Load() != want {
			t.Fatalf("closed after %d of %d releases", i+1, n)
		}
	}
	if d.closes.Load() != 1 || p.size("web") != 0 {
		t.Fatalf("after the last release: %d closes, %d pooled; want 1 and 0", d.closes.Load(), p.size("web"))
	}
}

func TestSharePoolKeysApart(t *testing.T) {
	d := &fakeDialer{}
	p := d.pool()
	a, _ := p.acquire(context.Background(), "alice@web", d.dial)
	b, _ := p.acquire(context.Background(), "bob@web", d.dial)
	if a == b || d.dials.Load() != 2 {
		t.Fatalf("two keys share a connection (%d dials)", d.dials.Load())
	}
	p.release("alice@web", a, true)
	p.release("bob@web", b, true)
}

func TestSharePoolDialErrorIsEachUsersOwn(t *testing.T) {
	errAuth := errors.New("permission denied")
	d := &fakeDialer{gate: make(chan struct{}), err: errAuth}
	p := d.pool()
	const n = 3
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.acquire(context.Background(), "web", d.dial)
		}()
	}
	close(d.gate)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, errAuth) {
			t.Fatalf("user %d: %v, want the dial error", i, err)
		}
	}
	if d.dials.Load() != n {
		t.Fatalf("%d dials, want %d: each waiter redials for its own verdict", d.dials.Load(), n)
	}
	if p.size("web") != 0 || d.closes.Load() != 0 {
		t.Fatal("a failed dial left something pooled or closed")
	}
}

func TestSharePoolFullConnection(t *testing.T) {
	d := &fakeDialer{}
	p := d.pool()
	ctx := context.Background()
	a, _ := p.acquire(ctx, "web", d.dial) // the first hop's session
	a2, _ := p.acquire(ctx, "web", d.dial)
	if a2 != a {
		t.Fatal("the second user did not share")
	}
	// The server refused a2's session: a is full, and stays full when a2,
	// which had no session on it, leaves.
	p.markFull(a)
	p.release("web", a2, false)
	b, _ := p.acquire(ctx, "web", d.dial)
	if b == a || d.dials.Load() != 2 {
		t.Fatal("a full connection was handed out again")
	}
	// b's user leaves having had a session: room on b, which closes as
	// its last user left; a user of a leaves: room on a.
	p.release("web", b, true)
	a3, _ := p.acquire(ctx, "web", d.dial)
	if a3 == a {
		t.Fatal("a full connection was handed out again")
	}
	p.release("web", a3, true)
	p.release("web", a, true)
	if d.closes.Load() != 3 || p.size("web") != 0 {
		t.Fatalf("%d closes, %d pooled; want 3 and 0", d.closes.Load(), p.size("web"))
	}
}

// TestSharePoolRoomAfterASessionEnds: of two users of a full connection,
// one leaves; the next user gets the same connection.
func TestSharePoolRoomAfterASessionEnds(t *testing.T) {
	d := &fakeDialer{}
	p := d.pool()
	ctx := context.Background()
	a, _ := p.acquire(ctx, "web", d.dial)
	a2, _ := p.acquire(ctx, "web", d.dial)
	p.markFull(a)
	p.release("web", a2, true)
	if c, _ := p.acquire(ctx, "web", d.dial); c != a || d.dials.Load() != 1 {
		t.Fatal("a connection whose session ended is still full")
	} else {
		p.release("web", c, true)
	}
	p.release("web", a, true)
}

func TestSharePoolDeadConnectionIsReplaced(t *testing.T) {
	d := &fakeDialer{}
	p := d.pool()
	dead := make(chan struct{})
	p.deadHook = sync.OnceFunc(func() { close(dead) })
	ctx := context.Background()
	a, _ := p.acquire(ctx, "web", d.dial)
	a.conn.close() // the server went away
	<-dead         // the pool's watcher saw it
	if p.size("web") != 0 {
		t.Fatal("a dead connection is still pooled")
	}
	b, _ := p.acquire(ctx, "web", d.dial)
	if b == a || d.dials.Load() != 2 {
		t.Fatal("a dead connection was handed out")
	}
	p.release("web", a, true) // its users still release it
	p.release("web", b, true)
}

func TestSharePoolWaiterGivesUpWithItsContext(t *testing.T) {
	d := &fakeDialer{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	p := d.pool()
	first := make(chan *shared[*fakeConn])
	go func() {
		s, _ := p.acquire(context.Background(), "web", d.dial)
		first <- s
	}()
	<-d.entered // the first user is dialling
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.acquire(ctx, "web", d.dial); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter with a cancelled context: %v", err)
	}
	close(d.gate)
	s := <-first
	if p.users(s) != 1 {
		t.Fatalf("%d users after the waiter gave up, want 1", p.users(s))
	}
	p.release("web", s, true)
}

func TestTrustKeySeparatesPolicies(t *testing.T) {
	s := &settings{policy: HostKeyStrict, knownFiles: []string{"/home/u/.ssh/known_hosts"}}
	strict := trustKey(s, Options{})
	if again := trustKey(s, Options{}); again != strict {
		t.Fatal("the same settings give different keys")
	}
	off := *s
	off.policy = HostKeyOff
	if trustKey(&off, Options{}) == strict {
		t.Error("a hop checked strictly could share a connection accepted with checking off")
	}
	if trustKey(s, Options{IdentityFiles: []string{"/k/deploy"}}) == strict {
		t.Error("hops asking for different identities share a key")
	}
	// The password is never part of it, only whether there is one.
	a, b := trustKey(s, Options{Password: "one"}), trustKey(s, Options{Password: "two"})
	if a != b || a == strict {
		t.Errorf("password keys: %q %q (none: %q)", a, b, strict)
	}
}

func TestSharePoolMaxUsersDialsAhead(t *testing.T) {
	d := &fakeDialer{gate: make(chan struct{}), entered: make(chan struct{}, 3)}
	p := d.pool()
	p.maxUsers = 2
	const n = 5
	got := make(chan *shared[*fakeConn], n)
	for range n {
		go func() {
			s, err := p.acquire(context.Background(), "web", d.dial)
			if err != nil {
				t.Error(err)
			}
			got <- s
		}()
	}
	// Three dials start before any ends: five users at two per
	// connection do not wait for the first connection to fill.
	for range 3 {
		<-d.entered
	}
	close(d.gate)
	users := map[*shared[*fakeConn]]int{}
	for range n {
		users[<-got]++
	}
	if len(users) != 3 || d.dials.Load() != 3 {
		t.Fatalf("%d connections, %d dials for 5 users at 2 each; want 3", len(users), d.dials.Load())
	}
	for s, k := range users {
		if k > 2 {
			t.Errorf("a connection has %d users, above the cap of 2", k)
		}
		for range k {
			p.release("web", s, true)
		}
	}
}
