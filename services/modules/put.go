package modules

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/modules/store"
)

// Method names of the store's client side.
const (
	MethodPut = "modules.Put"
	MethodHas = "modules.Has"
)

// PutArgs are modules.Put's arguments; the bytes follow on the circuit.
type PutArgs struct {
	// SHA256 is what the bytes must hash to.
	SHA256 []byte `msgpack:"h"`
	// Size is how many bytes the circuit carries.
	Size int64 `msgpack:"n"`
}

// HasArgs are modules.Has's arguments.
type HasArgs struct {
	SHA256 []byte `msgpack:"h"`
}

// putChunk is how much a Put writes at once, and how much the agent's
// buffer grows by at least while it reads.
const putChunk = 256 << 10

// Put stores data in c's module store and returns its sha256, by which
// exec.Cmd.Exe, exec.StdinPart and Run name it. The bytes cross the link
// on a circuit, so a program larger than one frame fits; more than the
// agent's store holds (store.DefaultMax) fails with errkind.ErrTooLarge.
// The bytes are shared: contexts below c may be served them by c's
// agent (package upcall), so they must not be one context's secrets.
func Put(ctx context.Context, c rpc.Caller, data []byte) ([sha256.Size]byte, error) {
	sum := sha256.Sum256(data)
	st, err := c.Stream(ctx, MethodPut, &PutArgs{SHA256: sum[:], Size: int64(len(data))})
	if err != nil {
		return sum, err
	}
	// Wait for the reply while sending: an agent that refused the size
	// reads nothing, and a write blocked on its window would wait for
	// ever. The reply unblocks it.
	var werr error
	waited := make(chan struct{})
	go func() {
		werr = st.Wait(nil)
		st.SetWriteDeadline(time.Now())
		close(waited)
	}()
	var serr error
	for rest := data; len(rest) > 0 && serr == nil; {
		n := min(len(rest), putChunk)
		_, serr = st.Write(rest[:n])
		rest = rest[n:]
	}
	st.Close()
	<-waited
	switch {
	case werr != nil:
		return sum, werr // the agent's refusal explains a failed write
	case serr != nil:
		return sum, fmt.Errorf("%s: sending %d bytes: %w", MethodPut, len(data), serr)
	}
	return sum, nil
}

// Has says whether c's module store holds sum.
func Has(ctx context.Context, c rpc.Caller, sum [sha256.Size]byte) (bool, error) {
	var has bool
	if err := c.Call(ctx, MethodHas, &HasArgs{SHA256: sum[:]}, &has); err != nil {
		return false, err
	}
	return has, nil
}

func handlePut(ctx context.Context, call *rpc.Call) (any, error) {
	var a PutArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	circ := call.Circuit
	switch max := store.Default.Max(); {
	case circ == nil:
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s needs a circuit", MethodPut)
	case len(a.SHA256) != sha256.Size:
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: a sha256 has %d bytes, not %d", MethodPut, len(a.SHA256), sha256.Size)
	case a.Size < 0:
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: negative size", MethodPut)
	case a.Size > max:
		return nil, errkind.Errorf(errkind.ErrTooLarge, "%s: %d bytes do not fit in the agent's module store of %d bytes", MethodPut, a.Size, max)
	}
	data, err := readN(circ, a.Size)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", MethodPut, ctx.Err())
		}
		return nil, fmt.Errorf("%s: %w", MethodPut, err)
	}
	if sum := sha256.Sum256(data); string(sum[:]) != string(a.SHA256) {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: the bytes hash to %x, not %x", MethodPut, sum, a.SHA256)
	}
	if _, err := store.Default.PutShared(data); err != nil {
		return nil, fmt.Errorf("%s: %w", MethodPut, err)
	}
	return nil, nil
}

// readN reads exactly n bytes from r into a buffer that grows as they
// arrive, so that a sender that stops early costs what it sent.
func readN(r io.Reader, n int64) ([]byte, error) {
	buf := make([]byte, 0, min(n, putChunk))
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, int64(2*cap(buf))))
			copy(grown, buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil && int64(len(buf)) < n {
			if err == io.EOF {
				err = fmt.Errorf("the bytes ended after %d of %d", len(buf), n)
			}
			return nil, err
		}
	}
	return buf, nil
}

func handleHas(ctx context.Context, call *rpc.Call) (any, error) {
	var a HasArgs
	if err := call.Args(&a); err != nil {
		return nil, err
	}
	var sum [sha256.Size]byte
	if len(a.SHA256) != len(sum) {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "%s: a sha256 has %d bytes, not %d", MethodHas, len(a.SHA256), len(sum))
	}
	copy(sum[:], a.SHA256)
	return store.Default.Has(sum), nil
}
