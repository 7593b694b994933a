package sys

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/testkit/rpctest"

	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/rpc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func call(t testing.TB, h rpc.Handler, method string, args any) (any, error) {
	t.Helper()
	c, _, err := rpc.NewCall(method, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h(context.Background(), c)
}

func TestRegister(t *testing.T) {
	reg := rpc.NewRegistry()
	Register(reg)
	if got := reg.Methods(); !slices.Equal(got, []string{"sys.Info", "sys.Ping"}) {
		t.Fatalf("methods = %v", got)
	}
}

func TestPing(t *testing.T) {
	res, err := call(t, handlePing, MethodPing, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := res.(*Pong); len(p.Payload) != 0 {
		t.Fatalf("empty ping echoed %q", p.Payload)
	}
	payload := bytes.Repeat([]byte("spindle"), 1000)
	res, err = call(t, handlePing, MethodPing, &PingArgs{Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.(*Pong); !bytes.Equal(p.Payload, payload) {
		t.Fatalf("payload not echoed: %d bytes", len(p.Payload))
	}
	// The result survives the wire.
	data, err := wire.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Pong
	if err := wire.Unmarshal(data, &back); err != nil || !bytes.Equal(back.Payload, payload) {
		t.Fatalf("round trip: %v", err)
	}
}

func TestPingBadArgs(t *testing.T) {
	_, err := call(t, handlePing, MethodPing, "not a struct")
	if !errors.Is(rpc.ToRemote(err), errkind.ErrBadArgs) {
		t.Fatalf("err = %v, want bad_args", err)
	}
}

func TestInfo(t *testing.T) {
	res, err := call(t, handleInfo, MethodInfo, nil)
	if err != nil {
		t.Fatal(err)
	}
	info := res.(*HostInfo)
	if info.OS != runtime.GOOS || info.Arch != runtime.GOARCH {
		t.Errorf("os/arch = %s/%s", info.OS, info.Arch)
	}
	if info.UID != os.Getuid() || info.GID != os.Getgid() || info.PID != os.Getpid() {
		t.Errorf("uid/gid/pid = %d/%d/%d", info.UID, info.GID, info.PID)
	}
	if info.Kernel == "" || info.Hostname == "" || info.User == "" || info.Home == "" || info.AgentVersion == "" {
		t.Errorf("missing facts: %+v", info)
	}
	if runtime.GOOS == "linux" && !strings.Contains(info.Kernel, "#") {
		t.Logf("kernel %q has no build number", info.Kernel)
	}
	for _, p := range info.Pythons {
		if !filepath.IsAbs(p) {
			t.Errorf("python %q is not absolute", p)
		}
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		found := false
		for _, p := range info.Pythons {
			if filepath.Base(p) == "python3" {
				found = true
			}
		}
		if !found {
			t.Errorf("/usr/bin/python3 exists but Pythons = %v", info.Pythons)
		}
	}
	t.Logf("info: %+v", info)

	// The cached part is not shared with callers.
	if len(info.Pythons) > 0 {
		info.Pythons[0] = "clobbered"
		res2, _ := call(t, handleInfo, MethodInfo, nil)
		if res2.(*HostInfo).Pythons[0] == "clobbered" {
			t.Error("Info result aliases the cache")
		}
	}
	data, err := wire.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	var back HostInfo
	if err := wire.Unmarshal(data, &back); err != nil || back.Hostname != info.Hostname || back.UID != info.UID {
		t.Fatalf("round trip: %v %+v", err, back)
	}
}

func TestFindPythons(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	write := func(p string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "python3.11"), 0o755)
	if err := os.Symlink("python3.11", filepath.Join(dir, "python3")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "python2"), 0o644) // not executable
	write(filepath.Join(other, "python"), 0o755)
	if err := os.Mkdir(filepath.Join(other, "python3.9"), 0o755); err != nil { // a directory
		t.Fatal(err)
	}
	got := findPythons(strings.Join([]string{dir, "relative/bin", other}, string(os.PathListSeparator)))
	var mine []string
	for _, p := range got {
		if strings.HasPrefix(p, dir) || strings.HasPrefix(p, other) {
			mine = append(mine, p)
		}
	}
	want := []string{filepath.Join(dir, "python3"), filepath.Join(other, "python")}
	if !slices.Equal(mine, want) {
		t.Fatalf("pythons = %v, want %v (all: %v)", mine, want, got)
	}
}

func TestClientHelpers(t *testing.T) {
	reg := rpc.NewRegistry()
	Register(reg)
	c := &rpctest.Caller{Registry: reg}
	ctx := context.Background()
	if err := Ping(ctx, c); err != nil {
		t.Fatal(err)
	}
	info, err := Info(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if info.OS != runtime.GOOS || info.PID != os.Getpid() {
		t.Fatalf("info = %+v", info)
	}
}

func BenchmarkPing(b *testing.B) {
	b.Run("empty", func(b *testing.B) {
		c, _, err := rpc.NewCall(MethodPing, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := handlePing(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("64B", func(b *testing.B) {
		c, _, err := rpc.NewCall(MethodPing, &PingArgs{Payload: make([]byte, 64)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := handlePing(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
