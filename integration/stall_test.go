package integration_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/router"
	"github.com/spindle-rpc/spindle/services/fs"
	"github.com/spindle-rpc/spindle/services/sys"
)

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestStoppedChildDelaysNobodyElse: the controller → a local agent → two
// child agents it started. One child is stopped (SIGSTOP) while large files
// are put to it, which fill its pipe: the parent and the other child keep
// answering, and a call to the stopped child fails as disconnected, saying
// its link stalled, once the parent's stall bound (set short here through
// the controller's router options) has passed.
func TestStoppedChildDelaysNobodyElse(t *testing.T) {
	t.Parallel()
	_, parent, err := connectWith(t, nil, local.Options{},
		spindle.Options{Router: router.Options{StallTimeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()
	stopped, err := parent.Connect(ctx, local.Options{ContextName: "stopped"})
	if err != nil {
		t.Fatal(err)
	}
	sibling, err := parent.Connect(ctx, local.Options{ContextName: "sibling"})
	if err != nil {
		t.Fatal(err)
	}
	pid := stopped.Hello().PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The stopped agent is killed when its link is declared dead; if the
	// test fails first, it must not stay stopped.
	defer syscall.Kill(pid, syscall.SIGCONT)

	// Each put's circuit carries a new stream's first window (256 KiB)
	// before it waits for the stopped agent to grant more: eight of them
	// overfill its 1 MiB pipe, and the parent's writes to it block.
	const puts, size = 8, 64 << 20
	dir := t.TempDir()
	put := make(chan error, puts)
	for i := range puts {
		go func() {
			path := filepath.Join(dir, fmt.Sprint("big", i))
			_, err := fs.Put(ctx, stopped, path, io.LimitReader(zeros{}, size), size, fs.PutOptions{})
			put <- err
		}()
	}
	ping := make(chan error, 1)
	go func() { ping <- sys.Ping(ctx, stopped) }()

	// Its parent and its sibling answer while it is stopped.
	for _, cx := range []*spindle.Context{parent, sibling} {
		if err := sys.Ping(ctx, cx); err != nil {
			t.Fatalf("ping %s while its sibling is stopped: %v", cx.Name(), err)
		}
	}

	err = <-ping
	if !errors.Is(err, spindle.ErrDisconnected) || !strings.Contains(err.Error(), "not draining") {
		t.Fatalf("ping of the stopped child: %v, want disconnected: not draining", err)
	}
	t.Log(err)
	for range puts {
		if err := <-put; err == nil {
			t.Fatal("a put to a stopped agent succeeded")
		}
	}
	// The parent and the sibling are still there once it is gone.
	for _, cx := range []*spindle.Context{parent, sibling} {
		if err := sys.Ping(ctx, cx); err != nil {
			t.Fatalf("ping %s after its sibling was dropped: %v", cx.Name(), err)
		}
	}
}
