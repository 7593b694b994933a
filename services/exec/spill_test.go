package exec

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
)

// countingCaller counts the circuits its calls open.
type countingCaller struct {
	*localCaller
	streams atomic.Int32
}

func (c *countingCaller) Stream(ctx context.Context, method string, args any) (rpc.Stream, error) {
	c.streams.Add(1)
	return c.localCaller.Stream(ctx, method, args)
}

func TestCollectSmallOutputIsOneCall(t *testing.T) {
	c := &countingCaller{localCaller: newLocalCaller()}
	var out, errb bytes.Buffer
	res, err := Collect(context.Background(), c, Cmd{Shell: "cat; printf err >&2; exit 3", Stdin: []byte("in")}, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "in" || errb.String() != "err" || res.ExitCode != 3 || res.Spilled != 0 {
		t.Fatalf("stdout %q, stderr %q, %+v", out.String(), errb.String(), res)
	}
	if n := c.streams.Load(); n != 0 {
		t.Fatalf("%d circuits opened for output that fits the reply", n)
	}
}

// Output past the reply's limit on both streams arrives whole, in order,
// after one spill.
func TestCollectSpillsLargeOutput(t *testing.T) {
	c := &countingCaller{localCaller: newLocalCaller()}
	const nOut, nErr = 5 << 20, 3 << 20
	sh := "seq 1 " + strconv.Itoa(nOut) + " | head -c " + strconv.Itoa(nOut) + "; " +
		"seq 1 " + strconv.Itoa(nErr) + " | head -c " + strconv.Itoa(nErr) + " >&2; exit 7"
	var out, errb bytes.Buffer
	res, err := Collect(context.Background(), c, Cmd{Shell: sh}, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || res.Spilled != 0 {
		t.Fatalf("result %+v", res)
	}
	for _, s := range []struct {
		name string
		got  []byte
		n    int
	}{{"stdout", out.Bytes(), nOut}, {"stderr", errb.Bytes(), nErr}} {
		var want bytes.Buffer
		for i := 1; want.Len() < s.n; i++ {
			want.WriteString(strconv.Itoa(i) + "\n")
		}
		if !bytes.Equal(s.got, want.Bytes()[:s.n]) {
			t.Errorf("%s: %d bytes, not the %d the command wrote", s.name, len(s.got), s.n)
		}
	}
	if n := c.streams.Load(); n != 1 {
		t.Fatalf("%d circuits opened, want the one exec.Attach", n)
	}
}

// Cmd.Timeout still runs after the spill.
func TestCollectTimeoutAfterSpill(t *testing.T) {
	var out bytes.Buffer
	// The output takes milliseconds; the timeout leaves it seconds, even
	// on a loaded machine.
	res, err := Collect(context.Background(), newLocalCaller(), Cmd{Shell: "head -c 3000000 /dev/zero; exec sleep 600", Timeout: 3 * time.Second}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || out.Len() != 3000000 {
		t.Fatalf("%d bytes, %+v; want all 3000000 and timed out", out.Len(), res)
	}
}

// A spilled command nobody attaches to is killed after the timeout, and
// its id is then unknown.
func TestSpillNotAttachedIsKilled(t *testing.T) {
	old := spillAttachTimeout
	spillAttachTimeout = 50 * time.Millisecond
	defer func() { spillAttachTimeout = old }()
	c := newLocalCaller()
	var res Result
	err := c.Call(context.Background(), MethodRun, &Cmd{Shell: "echo $$; head -c 3000000 /dev/zero; exec sleep 600", Spill: true}, &res)
	if err != nil || res.Spilled == 0 {
		t.Fatalf("%v, %+v: want a spilled command", err, res)
	}
	pid, err := strconv.Atoi(strings.Fields(string(res.Stdout))[0])
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	st, err := c.Stream(context.Background(), MethodAttach, &AttachArgs{ID: res.Spilled})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := st.Wait(nil); !errors.Is(err, errkind.ErrNotFound) {
		t.Fatalf("attach after the kill: %v, want not found", err)
	}
}

// At most MaxSpilled commands wait at once; one more is killed with a
// clear error, and the table frees as they are attached.
func TestSpillTableBounded(t *testing.T) {
	c := newLocalCaller()
	ctx := context.Background()
	cmd := Cmd{Shell: "head -c 2000000 /dev/zero", Spill: true}
	ids := make([]uint64, 0, MaxSpilled)
	defer func() {
		for _, id := range ids {
			if s := take(id); s != nil {
				s.timer.Stop()
				s.c.kill()
			}
		}
	}()
	for range MaxSpilled {
		var res Result
		if err := c.Call(ctx, MethodRun, &cmd, &res); err != nil || res.Spilled == 0 {
			t.Fatalf("%v, spilled %d", err, res.Spilled)
		}
		ids = append(ids, res.Spilled)
	}
	var res Result
	err := c.Call(ctx, MethodRun, &cmd, &res)
	if !errors.Is(err, errkind.ErrTooLarge) || !strings.Contains(err.Error(), "waiting for exec.Attach") {
		t.Fatalf("command %d: %v, %+v; want too large", MaxSpilled+1, err, res)
	}
	st, err := c.Stream(ctx, MethodAttach, &AttachArgs{ID: ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	p := &Process{st: st, done: make(chan struct{})}
	var out bytes.Buffer
	if err := p.CopyOutput(&out, nil); err != nil {
		t.Fatal(err)
	}
	if r, err := p.Wait(); err != nil || r.ExitCode != 0 {
		t.Fatalf("attach: %v, %+v", err, r)
	}
	ids = ids[1:]
	if err := c.Call(ctx, MethodRun, &cmd, &res); err != nil || res.Spilled == 0 {
		t.Fatalf("after an attach freed a place: %v, spilled %d", err, res.Spilled)
	}
	ids = append(ids, res.Spilled)
}

// Cancelling Collect while it reads the spilled output kills the command.
func TestCollectCancelKills(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelOnWrite{cancel: cancel, after: 1}
	_, err := Collect(ctx, newLocalCaller(), Cmd{Shell: "echo $$; head -c 3000000 /dev/zero; exec sleep 600"}, w, nil)
	if !errors.Is(err, context.Canceled) && !errors.Is(err, errkind.ErrCanceled) {
		t.Fatalf("Collect: %v, want canceled", err)
	}
	pid, err := strconv.Atoi(strings.Fields(w.first)[0])
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

// cancelOnWrite cancels after its first writes.
type cancelOnWrite struct {
	cancel func()
	after  int
	n      int
	first  string
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	if c.n == 0 {
		c.first = string(p[:min(len(p), 20)])
	}
	c.n++
	if c.n > c.after {
		c.cancel()
	}
	return len(p), nil
}
