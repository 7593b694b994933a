package integration_test

import (
	"bytes"
	stdctx "context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	"github.com/spindle-rpc/spindle/internal/testkit/sshtest"
	"github.com/spindle-rpc/spindle/services/fs"
)

// ---- helpers ----

// pattern is a deterministic pseudo-random stream of n bytes: the same
// (seed, n) always gives the same bytes, so a file of any size can be
// generated, and checked, without holding it in memory.
func pattern(seed uint64, n int64) io.Reader {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	binary.LittleEndian.PutUint64(s[8:], uint64(n))
	return io.LimitReader(rand.NewChaCha8(s), n)
}

// patternBytes is pattern in memory, for small files.
func patternBytes(t *testing.T, seed uint64, n int64) []byte {
	t.Helper()
	b, err := io.ReadAll(pattern(seed, n))
	if err != nil || int64(len(b)) != n {
		t.Fatalf("pattern: %d bytes, %v", len(b), err)
	}
	return b
}

// patternSHA256 is the hex sha256 of pattern(seed, n), computed on its own
// (not by the code under test).
func patternSHA256(t *testing.T, seed uint64, n int64) string {
	t.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, pattern(seed, n)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fileSHA256 hashes a local file by streaming it (the SSH targets are this
// machine: the test reads what the agent wrote straight from the disk).
func fileSHA256(t *testing.T, p string) (string, int64) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil)), n
}

// matchWriter compares what is written to it with an expected stream,
// byte for byte, in constant memory.
type matchWriter struct {
	want     io.Reader
	buf      []byte
	n        int64
	mismatch int64 // offset of the first differing byte, -1 if none
}

func newMatchWriter(want io.Reader) *matchWriter {
	return &matchWriter{want: want, mismatch: -1}
}

func (m *matchWriter) Write(p []byte) (int, error) {
	if cap(m.buf) < len(p) {
		m.buf = make([]byte, len(p))
	}
	exp := m.buf[:len(p)]
	got, _ := io.ReadFull(m.want, exp)
	if m.mismatch < 0 {
		for i := range p {
			if i >= got || p[i] != exp[i] {
				m.mismatch = m.n + int64(i)
				break
			}
		}
	}
	m.n += int64(len(p))
	return len(p), nil
}

// tempFiles lists the atomic-write temporary files in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+fs.TempInfix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func statT(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// waitFor polls cond every 10 ms for up to d; it reports whether cond held.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// putPattern Puts pattern(seed, n) at path on c, hashing locally what Put
// read from the source, and checks the result: the returned sha256 is
// that local hash, the reported size is n.
func putPattern(t *testing.T, ctx stdctx.Context, c *spindle.Context, path string, seed uint64, n int64, opts fs.PutOptions) *fs.PutResult {
	t.Helper()
	h := sha256.New()
	src := io.TeeReader(pattern(seed, n), h)
	res, err := fs.Put(ctx, c, path, src, n, opts)
	if err != nil {
		t.Fatalf("Put %d bytes to %s on %s: %v", n, path, c.Name(), err)
	}
	checkPutResult(t, res, h, path, n)
	return res
}

func checkPutResult(t *testing.T, res *fs.PutResult, h hash.Hash, path string, n int64) {
	t.Helper()
	if want := hex.EncodeToString(h.Sum(nil)); res.SHA256 != want {
		t.Fatalf("Put %s: agent reports sha256 %s, the source hashes to %s", path, res.SHA256, want)
	}
	if res.Info.Size != n {
		t.Fatalf("Put %s: agent reports %d bytes, want %d", path, res.Info.Size, n)
	}
}

// checkRemote checks the file at path, put from pattern(seed, n) through
// c: fs.Checksum on the agent, the bytes on disk read here, and fs.Get
// streamed back and compared byte for byte with the pattern.
func checkRemote(t *testing.T, ctx stdctx.Context, c *spindle.Context, path string, seed uint64, n int64) {
	t.Helper()
	want := patternSHA256(t, seed, n)
	ck, err := fs.Checksum(ctx, c, path)
	if err != nil {
		t.Fatalf("Checksum %s: %v", path, err)
	}
	if ck.SHA256 != want || ck.Size != n {
		t.Fatalf("Checksum %s: %s, %d bytes; want %s, %d bytes", path, ck.SHA256, ck.Size, want, n)
	}
	if got, size := fileSHA256(t, path); got != want || size != n {
		t.Fatalf("%s on disk: sha256 %s, %d bytes; want %s, %d bytes", path, got, size, want, n)
	}
	m := newMatchWriter(pattern(seed, n))
	gres, err := fs.Get(ctx, c, path, m)
	if err != nil {
		t.Fatalf("Get %s: %v", path, err)
	}
	if m.n != n || m.mismatch >= 0 {
		t.Fatalf("Get %s: received %d bytes (want %d), first difference at offset %d", path, m.n, n, m.mismatch)
	}
	if gres.SHA256 != want || gres.Info.Size != n {
		t.Fatalf("Get %s: reply says sha256 %s, %d bytes; want %s, %d", path, gres.SHA256, gres.Info.Size, want, n)
	}
}

// ---- tests ----

// TestFilesPutGetSizesSSH: files of every size class (empty, one byte,
// both sides of the inline limit, and 300 MiB streamed) go over SSH and
// come back intact; every checksum agrees with one computed here.
func TestFilesPutGetSizesSSH(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	_, cx := mustConnect(t, tg, tg.opts())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(tg.u.Home, "files")
	sizes := []int64{0, 1, fs.InlineLimit - 1, fs.InlineLimit, fs.InlineLimit + 1, 300 << 20}
	for i, n := range sizes {
		p := filepath.Join(dir, fmt.Sprintf("f%d.bin", n))
		seed := uint64(100 + i)
		mtime := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC).UnixNano()
		start := time.Now()
		res := putPattern(t, ctx, cx, p, seed, n, fs.PutOptions{
			WriteOptions: fs.WriteOptions{Mode: 0o640, MkdirAll: true}, MTime: mtime})
		put := time.Since(start)
		if res.Info.FileMode().Perm() != 0o640 || res.Info.ModTime != mtime || res.Info.UID != tg.u.UID {
			t.Errorf("Put %d bytes: info %+v; want mode 0640, mtime %d, uid %d", n, res.Info, mtime, tg.u.UID)
		}
		st := statT(t, p)
		if int(st.Uid) != tg.u.UID || st.Mode&0o7777 != 0o640 || st.Size != n {
			t.Errorf("%s on disk: uid %d mode %#o size %d; want uid %d mode 0640 size %d", p, st.Uid, st.Mode&0o7777, st.Size, tg.u.UID, n)
		}
		start = time.Now()
		checkRemote(t, ctx, cx, p, seed, n)
		t.Logf("%d bytes: Put %v, Checksum+local hash+Get %v", n, put.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	// GetFile lands a streamed file here, atomically, with its mode.
	local := filepath.Join(t.TempDir(), "back.bin")
	n := int64(fs.InlineLimit + 1)
	src := filepath.Join(dir, fmt.Sprintf("f%d.bin", n))
	if _, err := fs.GetFile(ctx, cx, src, local, true); err != nil {
		t.Fatalf("GetFile: %v", err)
	}
	if got, _ := os.ReadFile(local); !bytes.Equal(got, patternBytes(t, 104, n)) {
		t.Errorf("GetFile: %d bytes differ from what was put", len(got))
	}
	if fi, err := os.Stat(local); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("GetFile with preserve: %v, %v; want mode 0640", fi, err)
	}
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Errorf("temporary files left on the target: %v", left)
	}
	if left := tempFiles(t, filepath.Dir(local)); len(left) > 0 {
		t.Errorf("temporary files left here: %v", left)
	}
	// Replacing the big file with a small one keeps nothing of the old.
	big := filepath.Join(dir, fmt.Sprintf("f%d.bin", int64(300<<20)))
	putPattern(t, ctx, cx, big, 7, 1, fs.PutOptions{})
	checkRemote(t, ctx, cx, big, 7, 1)
	if st := statT(t, big); st.Mode&0o7777 != 0o640 {
		t.Errorf("a replaced file lost its mode: %#o", st.Mode&0o7777)
	}
}

// TestFilesThroughSSHHop: a streamed and an inline file go through a
// two-hop chain (controller → ssh first → ssh second, the second
// connection made by the first agent) and land as the second user.
func TestFilesThroughSSHHop(t *testing.T) {
	t.Parallel()
	first := newTarget(t, "/bin/sh")
	second := newTarget(t, "/bin/bash")
	ctx, cx := throughFirst(t, first)
	hop, err := cx.Connect(ctx, second.opts())
	if err != nil {
		t.Fatalf("ssh hop: %v", err)
	}
	if hop.Hello().UID != second.u.UID {
		t.Fatalf("the hop runs as uid %d, want %d", hop.Hello().UID, second.u.UID)
	}
	for i, n := range []int64{5, 24<<20 + 3} {
		p := filepath.Join(second.u.Home, fmt.Sprintf("via-hop-%d.bin", n))
		seed := uint64(200 + i)
		res := putPattern(t, ctx, hop, p, seed, n, fs.PutOptions{})
		st := statT(t, p)
		if int(st.Uid) != second.u.UID || int(st.Gid) != second.u.GID || res.Info.UID != second.u.UID {
			t.Errorf("%s: owned by %d:%d (reply says uid %d), want %d:%d", p, st.Uid, st.Gid, res.Info.UID, second.u.UID, second.u.GID)
		}
		checkRemote(t, ctx, hop, p, seed, n)
	}
	if left := tempFiles(t, second.u.Home); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// A refusal behind the hop reaches the controller with its kind, even
	// for a file larger than the circuit windows of both links.
	ro := sshtest.TempDir(t, "spindle-files-ro-")
	p := filepath.Join(ro, "refused.bin")
	const n = 64 << 20
	_, err = fs.Put(ctx, hop, p, pattern(1, n), n, fs.PutOptions{})
	if !errors.Is(err, spindle.ErrPermission) || !strings.Contains(err.Error(), p) {
		t.Errorf("Put into root's directory behind the hop: %v; want ErrPermission naming %s", err, p)
	}
	// The chain still works afterwards.
	putPattern(t, ctx, hop, filepath.Join(second.u.Home, "after.bin"), 210, 3<<20, fs.PutOptions{})
}

// TestFilesThroughSudoHop: through a sudo hop to another user, a file
// lands in that user's private home, owned by that user; the SSH user
// alone is refused there.
func TestFilesThroughSudoHop(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	other := sshtest.CreateUser(t, "/bin/bash")
	if err := os.Chmod(other.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	sudoers(t, tg.u.Name+" ALL=("+other.Name+") NOPASSWD: ALL")
	_, cx := mustConnect(t, tg, tg.opts())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()
	p := filepath.Join(other.Home, "from-sudo.bin")
	const n = 8<<20 + 11
	// Without the hop: the SSH user cannot enter the other's home.
	_, err := fs.Put(ctx, cx, p, pattern(1, n), n, fs.PutOptions{})
	if !errors.Is(err, spindle.ErrPermission) {
		t.Fatalf("Put into another user's 0700 home as %s: %v; want ErrPermission", tg.u.Name, err)
	}
	as, err := cx.Connect(ctx, sudo.Options{User: other.Name})
	if err != nil {
		t.Fatalf("sudo hop: %v", err)
	}
	res := putPattern(t, ctx, as, p, 300, n, fs.PutOptions{})
	st := statT(t, p)
	if int(st.Uid) != other.UID || int(st.Gid) != other.GID || res.Info.UID != other.UID {
		t.Errorf("%s: owned by %d:%d (reply says uid %d), want %d:%d", p, st.Uid, st.Gid, res.Info.UID, other.UID, other.GID)
	}
	checkRemote(t, ctx, as, p, 300, n)
	if left := tempFiles(t, other.Home); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestFilesPutPermissionDenied: writing into a root-owned 0755 directory
// as an unprivileged SSH user fails with ErrPermission naming the path,
// inline and streamed, and leaves nothing behind. The 64 MiB case is
// larger than a circuit's window: the agent refuses it without reading
// it, and Put must not block for ever on a window nobody drains.
func TestFilesPutPermissionDenied(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	_, cx := mustConnect(t, tg, tg.opts())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	dir := sshtest.TempDir(t, "spindle-files-ro-") // root's, 0755
	for _, n := range []int64{10, 4 << 20, 64 << 20} {
		p := filepath.Join(dir, fmt.Sprintf("f%d", n))
		_, err := fs.Put(ctx, cx, p, pattern(1, n), n, fs.PutOptions{})
		if !errors.Is(err, spindle.ErrPermission) {
			t.Errorf("Put %d bytes into %s: %v; want ErrPermission", n, dir, err)
		}
		if err != nil && !strings.Contains(err.Error(), p) {
			t.Errorf("Put %d bytes: the error does not name %s: %v", n, p, err)
		}
		t.Logf("Put %d bytes: %v", n, err)
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a refused Put (%v)", p, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("files left in %s: %v", dir, ents)
	}
	// The agent is still fine afterwards.
	if _, err := fs.Checksum(ctx, cx, "/etc/hostname"); err != nil {
		t.Errorf("agent after refused Puts: %v", err)
	}
}

// TestFilesPutDiskFull: a 4 MiB Put over an existing file on a 1 MiB
// tmpfs fails clearly (no space), and leaves the old file intact and no
// temporary file (its space is free again); so do a Put just over the
// free space and one larger than a circuit's window (which must not
// block once the agent has given up).
func TestFilesPutDiskFull(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	dir := sshtest.TempDir(t, "spindle-files-full-")
	sshtest.MountTmpfs(t, dir, fmt.Sprintf("size=1m,mode=0755,uid=%d,gid=%d", tg.u.UID, tg.u.GID))
	_, cx := mustConnect(t, tg, tg.opts())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	p := filepath.Join(dir, "data.bin")
	const oldN = 100 << 10
	putPattern(t, ctx, cx, p, 400, oldN, fs.PutOptions{})
	oldIno := inodeOf(t, p)

	for _, n := range []int64{4 << 20, 1<<20 + 5, 64 << 20} {
		_, err := fs.Put(ctx, cx, p, pattern(401, n), n, fs.PutOptions{})
		if err == nil {
			t.Fatalf("Put of %d bytes onto a 1 MiB tmpfs succeeded", n)
		}
		t.Logf("Put %d bytes onto a full disk: %v", n, err)
		if !strings.Contains(lower(err), "no space") {
			t.Errorf("Put of %d bytes onto a full disk: %v; want an error saying no space", n, err)
		}
		if !strings.Contains(err.Error(), p) {
			t.Errorf("the error does not name %s: %v", p, err)
		}
		if left := tempFiles(t, dir); len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
		if got, size := fileSHA256(t, p); got != patternSHA256(t, 400, oldN) || size != oldN || inodeOf(t, p) != oldIno {
			t.Errorf("the old file changed: %d bytes, sha256 %s", size, got)
		}
	}
	// The failed writes' space is free again: a file that fits only if no
	// temporary file holds blocks goes in.
	const fits = 700 << 10
	p2 := filepath.Join(dir, "second.bin")
	putPattern(t, ctx, cx, p2, 402, fits, fs.PutOptions{})
	checkRemote(t, ctx, cx, p2, 402, fits)
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// gateReader yields its source, but blocks once it has yielded after
// bytes until gate is closed; reached is closed when it blocks.
type gateReader struct {
	src     io.Reader
	after   int64
	n       int64
	gate    <-chan struct{}
	reached chan struct{}
	once    sync.Once
}

func (g *gateReader) Read(p []byte) (int, error) {
	if g.n >= g.after {
		g.once.Do(func() { close(g.reached) })
		<-g.gate
	} else if rest := g.after - g.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	k, err := g.src.Read(p)
	g.n += int64(k)
	return k, err
}

// TestFilesAgentKilledMidPut: an agent SIGKILLed in the middle of a Put
// leaves the old file as it was and its temporary file behind, recorded
// in its journal; the Put fails as disconnected; the next agent started
// for the same user removes the temporary file.
func TestFilesAgentKilledMidPut(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	_, cx := mustConnect(t, tg, tg.opts())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()
	dir := filepath.Join(tg.u.Home, "dest")
	p := filepath.Join(dir, "big.bin")
	putPattern(t, ctx, cx, p, 500, 1<<20, fs.PutOptions{WriteOptions: fs.WriteOptions{MkdirAll: true}})
	oldIno := inodeOf(t, p)
	journalDir := filepath.Join(filepath.Dir(oneAgentFile(t, tg.u)), "inflight")

	const n = 256 << 20
	const before = 6 << 20
	gate := make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
		}
	}
	defer release()
	src := &gateReader{src: pattern(501, n), after: before, gate: gate, reached: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := fs.Put(ctx, cx, p, src, n, fs.PutOptions{})
		done <- err
	}()
	select {
	case <-src.reached:
	case err := <-done:
		t.Fatalf("Put ended before the source blocked: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the source was not read up to its gate within 60s")
	}
	// The agent has received all that was sent so far into its temporary
	// file. (Waiting for all of it, not just some, means that the
	// controller is not writing to the SSH channel when the link dies:
	// see the note on x/crypto/ssh below.)
	var tmp string
	if !waitFor(30*time.Second, func() bool {
		left := tempFiles(t, dir)
		if len(left) != 1 {
			return false
		}
		fi, err := os.Stat(left[0])
		tmp = left[0]
		return err == nil && fi.Size() == before
	}) {
		t.Fatalf("no temporary file of %d bytes in %s (found %v)", before, dir, tempFiles(t, dir))
	}
	pid := cx.Hello().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Nothing removed the temporary file: its writer is dead. Its name
	// carries the writer's pid, and the writer's journal entry names its
	// directory.
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("the temporary file is gone right after the kill (%v): the test proves nothing", err)
	}
	if !strings.Contains(filepath.Base(tmp), fmt.Sprintf("%s%d-", fs.TempInfix, pid)) {
		t.Errorf("the temporary file %s does not carry its writer's pid %d", tmp, pid)
	}
	entries, _ := os.ReadDir(journalDir)
	var recorded bool
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(journalDir, e.Name())); err == nil && string(b) == dir {
			recorded = strings.HasPrefix(e.Name(), fmt.Sprintf("d%d.", pid))
		}
	}
	if !recorded {
		t.Errorf("no journal entry of pid %d in %s names %s (entries %v)", pid, journalDir, dir, entries)
	}
	// Let the source go on only once the controller has seen the link die.
	// (x/crypto/ssh's channel Write and CloseWrite race when they run at
	// once, which they would if the source fed the link while it is torn
	// down: a -race failure in bootstrap's SSH conn, not in fs.)
	select {
	case <-cx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the controller did not notice the agent's death within 30s")
	}
	release()
	err := <-done
	t.Logf("Put when the agent was killed: %v", err)
	if !errors.Is(err, spindle.ErrDisconnected) {
		t.Errorf("Put when the agent was killed: %v; want ErrDisconnected", err)
	}
	if got, size := fileSHA256(t, p); got != patternSHA256(t, 500, 1<<20) || size != 1<<20 || inodeOf(t, p) != oldIno {
		t.Errorf("the old file changed: %d bytes, sha256 %s", size, got)
	}
	// The killed agent has been reaped by its sshd session: it is gone,
	// not a zombie that still answers kill(pid, 0).
	if !waitFor(10*time.Second, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return errors.Is(err, os.ErrNotExist)
	}) {
		t.Fatalf("the killed agent %d was not reaped within 10s", pid)
	}

	// A fresh agent for the same user cleans up as it starts.
	_, cx2 := mustConnect(t, tg, tg.opts())
	if cx2.Hello().PID == pid {
		t.Fatal("the second connection reached the same agent")
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file %s is still there after a new agent started (%v)", tmp, err)
	}
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if ents, _ := os.ReadDir(journalDir); len(ents) > 0 {
		t.Errorf("journal entries left in %s: %v", journalDir, ents)
	}
	// The old file is still intact, and the new agent can replace it.
	checkRemote(t, ctx, cx2, p, 500, 1<<20)
	putPattern(t, ctx, cx2, p, 502, 3<<20, fs.PutOptions{})
	checkRemote(t, ctx, cx2, p, 502, 3<<20)
}

// TestFilesConcurrentPuts: two Puts of different 1 MiB contents to one
// path, with both temporary files present at once, leave exactly one of
// the two contents and no temporary file.
func TestFilesConcurrentPuts(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	_, cx := mustConnect(t, tg, tg.opts())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	dir := filepath.Join(tg.u.Home, "race")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, tg.u.UID, tg.u.GID); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "one.bin")
	const n = 1 << 20
	for round := range 3 {
		seeds := [2]uint64{uint64(600 + 2*round), uint64(601 + 2*round)}
		sums := [2]string{patternSHA256(t, seeds[0], n), patternSHA256(t, seeds[1], n)}
		gate := make(chan struct{})
		var errs [2]error
		var res [2]*fs.PutResult
		var readers [2]*gateReader
		var wg sync.WaitGroup
		for i := range 2 {
			readers[i] = &gateReader{src: pattern(seeds[i], n), after: n / 2, gate: gate, reached: make(chan struct{})}
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i], errs[i] = fs.Put(ctx, cx, p, readers[i], n, fs.PutOptions{})
			}()
		}
		// Both transfers are half-way: both temporary files exist.
		both := waitFor(30*time.Second, func() bool { return len(tempFiles(t, dir)) == 2 })
		close(gate)
		wg.Wait()
		if !both {
			t.Errorf("round %d: never saw both temporary files at once", round)
		}
		for i := range 2 {
			if errs[i] != nil {
				t.Fatalf("round %d: Put %d: %v", round, i, errs[i])
			}
			if res[i].SHA256 != sums[i] {
				t.Errorf("round %d: Put %d reports %s, want %s", round, i, res[i].SHA256, sums[i])
			}
		}
		got, size := fileSHA256(t, p)
		if size != n || (got != sums[0] && got != sums[1]) {
			t.Fatalf("round %d: the file is %d bytes with sha256 %s: neither %s nor %s", round, size, got, sums[0], sums[1])
		}
		if left := tempFiles(t, dir); len(left) > 0 {
			t.Fatalf("round %d: temporary files left: %v", round, left)
		}
	}
}

// openBy reports whether process pid holds a descriptor open on path.
func openBy(pid int, path string) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && l == path {
			return true
		}
	}
	return false
}

// TestFilesGetFileLocalDiskFull: GetFile of a file larger than a circuit's
// window into a full local disk fails at once with the local error (no
// space), not when ctx runs out; the old local file is intact, no
// temporary file is left, and the agent stops sending and lets go of the
// file (its handler is not left blocked on a window nobody drains).
func TestFilesGetFileLocalDiskFull(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	_, cx := mustConnect(t, tg, tg.opts())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	src := filepath.Join(tg.u.Home, "big.bin")
	const n = 64 << 20
	putPattern(t, ctx, cx, src, 700, n, fs.PutOptions{})
	dir := sshtest.TempDir(t, "spindle-files-localfull-")
	sshtest.MountTmpfs(t, dir, "size=1m")
	dst := filepath.Join(dir, "copy.bin")
	old := patternBytes(t, 701, 100<<10)
	if err := os.WriteFile(dst, old, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := fs.GetFile(ctx, cx, src, dst, false)
	t.Logf("GetFile onto a full disk: %v", err)
	if err == nil || !strings.Contains(lower(err), "no space") {
		t.Errorf("GetFile of %d bytes onto a 1 MiB tmpfs: %v; want an error saying no space", n, err)
	}
	if errors.Is(err, spindle.ErrTimeout) || ctx.Err() != nil {
		t.Errorf("GetFile waited for its deadline: %v", err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, old) {
		t.Errorf("the old local file changed (%d bytes)", len(got))
	}
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Errorf("temporary files left here: %v", left)
	}
	pid := cx.Hello().PID
	if !waitFor(10*time.Second, func() bool { return !openBy(pid, src) }) {
		t.Errorf("the agent (pid %d) still has %s open 10s after the failed Get: its handler is stuck", pid, src)
	}
	// The agent still serves Gets.
	checkRemote(t, ctx, cx, src, 700, n)
}
