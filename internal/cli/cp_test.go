package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/internal/testkit"
	"github.com/spindle-rpc/spindle/target"
)

func TestParseCopyArg(t *testing.T) {
	ok := []struct {
		in     string
		target string
		path   string
		hops   []target.Hop // of the target, when remote
	}{
		{"local:/tmp/x", "local", "/tmp/x", []target.Hop{{Kind: "local"}}},
		{"local:/", "local", "/", []target.Hop{{Kind: "local"}}},
		{"web1:/etc/motd", "web1", "/etc/motd", []target.Hop{{Kind: "ssh", Arg: "web1"}}},
		{"ssh:web1:/etc/motd", "ssh:web1", "/etc/motd", []target.Hop{{Kind: "ssh", Arg: "web1"}}},
		// Ports: the first ":/" after a valid TARGET, not the first ':'.
		{"ssh:web1:2222:/etc/motd", "ssh:web1:2222", "/etc/motd", []target.Hop{{Kind: "ssh", Arg: "web1:2222"}}},
		{"deploy@web1:2222:/srv", "deploy@web1:2222", "/srv", []target.Hop{{Kind: "ssh", Arg: "deploy@web1:2222"}}},
		// IPv6, bracketed with and without a port, and bare.
		{"[::1]:22:/tmp/x", "[::1]:22", "/tmp/x", []target.Hop{{Kind: "ssh", Arg: "[::1]:22"}}},
		{"ssh:[::1]:/tmp/x", "ssh:[::1]", "/tmp/x", []target.Hop{{Kind: "ssh", Arg: "[::1]"}}},
		{"ssh:[fe80::1%eth0]:22:/x", "ssh:[fe80::1%eth0]:22", "/x", []target.Hop{{Kind: "ssh", Arg: "[fe80::1%eth0]:22"}}},
		{"ssh:::1:/x", "ssh:::1", "/x", []target.Hop{{Kind: "ssh", Arg: "::1"}}},
		// Chains and become hops: ',' and ':' inside the TARGET.
		{"bastion,web1,sudo:postgres:/var/lib/x", "bastion,web1,sudo:postgres", "/var/lib/x",
			[]target.Hop{{Kind: "ssh", Arg: "bastion"}, {Kind: "ssh", Arg: "web1"}, {Kind: "sudo", Arg: "postgres"}}},
		{"ssh:bastion:2200,web1:2222,sudo:/root/x", "ssh:bastion:2200,web1:2222,sudo", "/root/x",
			[]target.Hop{{Kind: "ssh", Arg: "bastion:2200"}, {Kind: "ssh", Arg: "web1:2222"}, {Kind: "sudo"}}},
		{"sudo:/etc/shadow", "sudo", "/etc/shadow", []target.Hop{{Kind: "sudo"}}},
		{"local,doas:/etc/x", "local,doas", "/etc/x", []target.Hop{{Kind: "local"}, {Kind: "doas"}}},
		{"su:postgres:/var/lib/pg", "su:postgres", "/var/lib/pg", []target.Hop{{Kind: "su", Arg: "postgres"}}},
		// Containers.
		{"docker:app1:/etc/nginx", "docker:app1", "/etc/nginx", []target.Hop{{Kind: "docker", Arg: "app1"}}},
		{"web1,docker:www@app1:/srv", "web1,docker:www@app1", "/srv", []target.Hop{{Kind: "ssh", Arg: "web1"}, {Kind: "docker", Arg: "www@app1"}}},
		{"kubectl:ns/pod/c:/data", "kubectl:ns/pod/c", "/data", []target.Hop{{Kind: "kubectl", Arg: "ns/pod/c"}}},
		{"local,setns:1234:/proc/1/x", "local,setns:1234", "/proc/1/x", []target.Hop{{Kind: "local"}, {Kind: "setns", Arg: "1234"}}},
		// The PATH may hold ":/" itself.
		{"local:/tmp/a:/b", "local", "/tmp/a:/b", []target.Hop{{Kind: "local"}}},
		// Local paths.
		{"/tmp/x", "", "/tmp/x", nil},
		{"/tmp/a:/b", "", "/tmp/a:/b", nil},
		{"./web1:/x", "", "./web1:/x", nil},
		{"../x", "", "../x", nil},
		{".", "", ".", nil},
		{"dir/file", "", "dir/file", nil},
		{"file", "", "file", nil},
	}
	for _, tc := range ok {
		got, err := parseCopyArg(tc.in)
		if err != nil {
			t.Errorf("parseCopyArg(%q): %v", tc.in, err)
			continue
		}
		if got.Target != tc.target || got.Path != tc.path {
			t.Errorf("parseCopyArg(%q) = %q, %q; want %q, %q", tc.in, got.Target, got.Path, tc.target, tc.path)
			continue
		}
		if got.String() != tc.in {
			t.Errorf("parseCopyArg(%q).String() = %q", tc.in, got.String())
		}
		if tc.target == "" {
			continue
		}
		tgt, err := target.Parse(got.Target)
		if err != nil || !reflect.DeepEqual(tgt.Hops, tc.hops) {
			t.Errorf("%q: target hops %+v (%v), want %+v", tc.in, tgt.Hops, err, tc.hops)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "empty path"},
		{"local:", "must be absolute"},
		{"local:tmp/x", "must be absolute"},
		{"web1:notes.txt", "must be absolute"},
		{"ssh:web1:2222:rel", "must be absolute"},
		{"bastion,sudo:postgres:rel", "must be absolute"},
		// A ":/" after no valid TARGET: the TARGET's error, not a local path.
		{"dokcer:app1:/etc", `unknown kind "dokcer"`},
		{"two words:/x", "white space"},
		{"local:x,web1:/y", "local takes no argument"},
	} {
		got, err := parseCopyArg(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseCopyArg(%q) = %+v, %v; want an error with %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseCopyArgs(t *testing.T) {
	if src, dst, err := parseCopyArgs("./a", "local:/b"); err != nil || src.remote() || !dst.remote() {
		t.Errorf("upload: %+v %+v %v", src, dst, err)
	}
	if src, dst, err := parseCopyArgs("web1,sudo:/a", "/b"); err != nil || !src.remote() || dst.remote() {
		t.Errorf("download: %+v %+v %v", src, dst, err)
	}
	if src, dst, err := parseCopyArgs("local:/a", "web1:/b"); err != nil || !src.remote() || !dst.remote() {
		t.Errorf("between targets: %+v %+v %v", src, dst, err)
	}
	for _, args := range [][2]string{{"/a", "/b"}, {"local:a", "/b"}, {"/a", "local:"}} {
		if _, _, err := parseCopyArgs(args[0], args[1]); err == nil {
			t.Errorf("parseCopyArgs(%q, %q) accepted", args[0], args[1])
		}
	}
}

func TestCopyFailureExitCodes(t *testing.T) {
	notFound := &spindle.Error{Chain: "local", Op: "fs.Stat", Err: spindle.ErrNotFound}
	gone := &spindle.Error{Chain: "web1", Op: "fs.Put", Err: fmt.Errorf("%w: link lost", spindle.ErrDisconnected)}
	for _, tc := range []struct {
		err  error
		sig  syscall.Signal
		want int
	}{
		{notFound, 0, 1}, // not exitCode's 127: a copy error is 1
		{fmt.Errorf("%w", spindle.ErrPermission), 0, 1},
		{errors.New("disk full"), 0, 1},
		{gone, 0, 255},
		{fmt.Errorf("%w", spindle.ErrCanceled), syscall.SIGINT, 130},
	} {
		err := copyFailure("a → local:/b", tc.err, tc.sig)
		if got := exitCode(err); got != tc.want {
			t.Errorf("copyFailure(%v, %v): exit %d, want %d", tc.err, tc.sig, got, tc.want)
		}
		if tc.sig == 0 && !strings.Contains(err.Error(), "cp a → local:/b: ") {
			t.Errorf("copyFailure(%v) = %q does not name the copy", tc.err, err)
		}
	}
}

// ---- end to end, through the built CLI and local: targets ----

// cpTreeState describes a tree for comparisons: type, permission bits,
// content, symlink target, and (with mtimes) file mtimes.
func cpTreeState(t *testing.T, root string, mtimes bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		s := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s += " " + string(b)
			if mtimes {
				s += " " + info.ModTime().UTC().Format(time.RFC3339Nano)
			}
		case info.Mode()&iofs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			s += " → " + target
		}
		out[rel] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func cpSameTree(t *testing.T, a, b string, mtimes bool) {
	t.Helper()
	if sa, sb := cpTreeState(t, a, mtimes), cpTreeState(t, b, mtimes); !reflect.DeepEqual(sa, sb) {
		t.Errorf("%s and %s differ:\n%v\n%v", a, b, sa, sb)
	}
}

// cpMakeTree builds a small tree with a subdirectory, an empty file, a file
// larger than fs.InlineLimit, a symlink and assorted modes and mtimes.
func cpMakeTree(t *testing.T, root string) {
	t.Helper()
	mt := time.Date(2021, 3, 4, 5, 6, 7, 891011, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "sub", "deeper"), 0o755))
	files := map[string]iofs.FileMode{"a.txt": 0o644, "sub/script": 0o755, "sub/deeper/secret": 0o600, "empty": 0o640}
	for rel, mode := range files {
		p := filepath.Join(root, rel)
		must(os.WriteFile(p, []byte("content of "+rel+"\n"), 0o600))
		must(os.Chmod(p, mode))
		must(os.Chtimes(p, mt, mt))
	}
	must(os.WriteFile(filepath.Join(root, "empty"), nil, 0o640))
	must(os.Chtimes(filepath.Join(root, "empty"), mt, mt))
	must(os.WriteFile(filepath.Join(root, "big.bin"), bytes.Repeat([]byte("0123456789abcdef"), 40_000), 0o644)) // 640 KB
	must(os.Chtimes(filepath.Join(root, "big.bin"), mt, mt))
	must(os.Symlink("sub/script", filepath.Join(root, "link")))
	must(os.Chmod(filepath.Join(root, "sub", "deeper"), 0o700))
}

func cpOK(t *testing.T, args ...string) {
	t.Helper()
	out, errs, code := spindleCmd(t, "", append([]string{"cp"}, args...)...)
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("spindle cp %v: exit %d, stdout %q, stderr %q; want 0 and no output (stderr is no terminal)", args, code, out, errs)
	}
}

func TestE2ECpFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.txt")
	os.WriteFile(src, []byte("hello\n"), 0o640)
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	os.Chtimes(src, old, old)

	// Upload to a new name, then into an existing directory.
	cpOK(t, src, "local:"+filepath.Join(dir, "up.txt"))
	into := filepath.Join(dir, "into")
	os.Mkdir(into, 0o755)
	cpOK(t, src, "local:"+into)
	cpOK(t, src, "local:"+into+"/") // a trailing slash is the same
	// Download to a new name, then into an existing directory.
	down := filepath.Join(dir, "down")
	os.Mkdir(down, 0o755)
	cpOK(t, "local:"+src, filepath.Join(down, "d.txt"))
	cpOK(t, "local:"+src, down)
	for _, p := range []string{"up.txt", "into/src.txt", "down/d.txt", "down/src.txt"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || string(b) != "hello\n" {
			t.Errorf("%s: %q, %v", p, b, err)
			continue
		}
		// Without -p: the permission bits (less group/other write), not
		// the mtime.
		st, _ := os.Stat(filepath.Join(dir, p))
		if st.Mode() != 0o640 || st.ModTime().Equal(old) {
			t.Errorf("%s without -p: mode %v, mtime %v", p, st.Mode(), st.ModTime())
		}
	}

	// -p keeps mode and mtime, both ways.
	os.Chmod(src, 0o751)
	cpOK(t, "-p", src, "local:"+filepath.Join(dir, "p-up"))
	cpOK(t, "-p", "local:"+src, filepath.Join(dir, "p-down"))
	for _, p := range []string{"p-up", "p-down"} {
		st, err := os.Stat(filepath.Join(dir, p))
		if err != nil || st.Mode() != 0o751 || !st.ModTime().Equal(old) {
			t.Errorf("%s with -p: %v %v %v; want -rwxr-x--x and %v", p, st.Mode(), st.ModTime(), err, old)
		}
	}

	// Through a two-hop chain, and with -J.
	cpOK(t, src, "local,local:"+filepath.Join(dir, "chained"))
	cpOK(t, "-J", "local", "local:"+filepath.Join(dir, "chained"), filepath.Join(dir, "via"))
	if b, _ := os.ReadFile(filepath.Join(dir, "via")); string(b) != "hello\n" {
		t.Errorf("through a chain: %q", b)
	}
}

func TestE2ECpTree(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	cpMakeTree(t, src)

	// Upload to a new directory: it mirrors src.
	cpOK(t, "-r", "-p", src, "local:"+filepath.Join(dir, "up"))
	cpSameTree(t, src, filepath.Join(dir, "up"), true)
	// Into an existing directory: src lands inside it, like cp -r.
	os.Mkdir(filepath.Join(dir, "into"), 0o755)
	cpOK(t, "-r", "-p", "--parallel", "3", src, "local:"+filepath.Join(dir, "into"))
	cpSameTree(t, src, filepath.Join(dir, "into", "src"), true)
	// Download, to a new directory and into an existing one.
	cpOK(t, "-rp", "local:"+src, filepath.Join(dir, "down"))
	cpSameTree(t, src, filepath.Join(dir, "down"), true)
	os.Mkdir(filepath.Join(dir, "downinto"), 0o755)
	cpOK(t, "-r", "-p", "local:"+src, filepath.Join(dir, "downinto"))
	cpSameTree(t, src, filepath.Join(dir, "downinto", "src"), true)
	// Without -p the content and modes (here none with group/other write)
	// are kept, the mtimes are not.
	cpOK(t, "-r", src, "local:"+filepath.Join(dir, "nop"))
	cpSameTree(t, src, filepath.Join(dir, "nop"), false)
	if st, _ := os.Stat(filepath.Join(dir, "nop", "a.txt")); st.ModTime().Year() == 2021 {
		t.Errorf("mtime kept without -p")
	}
}

// Between two targets (two connections, or one when both sides name the
// same target): files and trees, into existing directories, with -p.
func TestE2ECpBetweenTargets(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	cpMakeTree(t, src)
	big := filepath.Join(dir, "big")
	os.WriteFile(big, bytes.Repeat([]byte("0123456789abcdef"), 64<<10), 0o640) // 1 MiB: streamed

	cpOK(t, "-r", "-p", "local:"+src, "local,local:"+filepath.Join(dir, "tree"))
	cpSameTree(t, src, filepath.Join(dir, "tree"), true)
	os.Mkdir(filepath.Join(dir, "into"), 0o755)
	cpOK(t, "-r", "-p", "local,local:"+src, "local:"+filepath.Join(dir, "into"))
	cpSameTree(t, src, filepath.Join(dir, "into", "src"), true)
	cpOK(t, "-r", "local:"+src, "local:"+filepath.Join(dir, "same-target"))
	cpSameTree(t, src, filepath.Join(dir, "same-target"), false)

	want, _ := os.ReadFile(big)
	cpOK(t, "-p", "local:"+big, "local,local:"+filepath.Join(dir, "big.copy"))
	cpOK(t, "local,local:"+big, "local:"+filepath.Join(dir, "into"))
	for _, p := range []string{"big.copy", "into/big"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		st, _ := os.Stat(filepath.Join(dir, p))
		if err != nil || !bytes.Equal(b, want) || st.Mode() != 0o640 {
			t.Errorf("%s: %d bytes (want %d), mode %v, %v", p, len(b), len(want), st.Mode(), err)
		}
	}
}

func TestE2ECpErrors(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "srcdir")
	os.Mkdir(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("f"), 0o644)
	missing := filepath.Join(dir, "missing")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // in stderr
	}{
		{"dir up without -r", []string{src, "local:" + filepath.Join(dir, "x")}, 1, []string{src + " is a directory (use -r"}},
		{"dir down without -r", []string{"local:" + src, filepath.Join(dir, "x")}, 1, []string{src + " is a directory (use -r"}},
		{"missing local source", []string{missing, "local:" + filepath.Join(dir, "x")}, 1, []string{"spindle: cp " + missing, "no such file"}},
		{"missing remote source", []string{"local:" + missing, filepath.Join(dir, "x")}, 1, []string{"spindle: cp local:" + missing, "local: fs.Stat", "no such file"}},
		{"missing remote source through a chain", []string{"-r", "local,local:" + missing, filepath.Join(dir, "x")}, 1, []string{"local → local: fs.Stat", missing}},
		{"missing remote directory", []string{filepath.Join(src, "f"), "local:" + filepath.Join(dir, "no", "such", "dir") + "/"}, 1, []string{"no such directory"}},
		{"file in the way of a tree", []string{"-r", src, "local:" + filepath.Join(src, "f")}, 1, []string{filepath.Join(src, "f") + " exists and is not a directory"}},
		{"both local", []string{src, dir}, 2, []string{"both local"}},
		{"dir between targets without -r", []string{"local:" + src, "local,local:" + filepath.Join(dir, "x")}, 1, []string{src + " is a directory (use -r"}},
		{"missing source between targets", []string{"local:" + missing, "local,local:" + filepath.Join(dir, "x")}, 1, []string{"spindle: cp local:" + missing + " → local,local:", "local: fs.Stat", "no such file"}},
		{"relative remote path", []string{src, "local:tmp"}, 2, []string{"must be absolute"}},
		{"one argument", []string{src}, 2, []string{"needs SRC and DST"}},
		{"bad target", []string{src, "local,nosuchkind:x:/tmp"}, 2, []string{"unknown kind"}},
		{"bad parallel", []string{"--parallel", "0", src, "local:/tmp"}, 2, []string{"--parallel"}},
	} {
		out, errs, code := spindleCmd(t, "", append([]string{"cp"}, tc.args...)...)
		if code != tc.code || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d", tc.name, code, out, errs, tc.code)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: stderr %q does not contain %q", tc.name, errs, w)
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "x")); err == nil {
		t.Errorf("a failed copy created its destination")
	}

	// A connection failure is 255, like ssh.
	cmd := osexec.Command(filepath.Join(binDir, "spindle"), "cp", filepath.Join(src, "f"), "local:"+filepath.Join(dir, "y"))
	cmd.Env = append(os.Environ(), "SPINDLE_AGENT="+filepath.Join(binDir, "no-such-agent"))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	if ee, ok := err.(*osexec.ExitError); !ok || ee.ExitCode() != 255 || !strings.HasPrefix(errb.String(), "spindle: ") {
		t.Errorf("connect failure: %v, stderr %q; want exit 255", err, errb.String())
	}
}

// On a terminal, standard error shows a progress bar (percent, bytes,
// throughput); standard output stays empty.
func TestE2ECpProgressOnTerminal(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "big")
	os.WriteFile(src, bytes.Repeat([]byte("x"), 3<<20), 0o644)
	testCpProgress(t, "3.1/3.1 MB", src, "local:"+filepath.Join(dir, "copy"))
	// To two targets, one bar counts both copies.
	testCpProgress(t, "6.3/6.3 MB", "--to", "local", "--to", "local,local", src, filepath.Join(dir, "copy2"))
}

// testCpProgress runs spindle cp args with stderr a terminal and checks
// that it drew a bar that ended at 100% of size.
func testCpProgress(t *testing.T, size string, args ...string) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		testkit.Unavailable(t, "no pseudo-terminal to draw the progress bar on: "+err.Error())
	}
	defer ptmx.Close()
	pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 120})
	cmd := osexec.Command(filepath.Join(binDir, "spindle"), append([]string{"cp"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child has it now: reads end when the child exits
	var bar bytes.Buffer
	read := make(chan struct{})
	go func() {
		io.Copy(&bar, ptmx) //nolint:errcheck // ends with EIO once the child exits
		close(read)
	}()
	err = cmd.Wait()
	<-read
	if err != nil || out.Len() != 0 {
		t.Fatalf("cp on a terminal: %v, stdout %q, stderr %q", err, out.String(), bar.String())
	}
	s := bar.String()
	for _, want := range []string{"100%", size, "B/s)"} {
		if !strings.Contains(s, want) {
			t.Errorf("progress output %q has no %q", s, want)
		}
	}
}

// spindle cp --to T1 --to T2 SRC DST: SRC to DST on each target (every
// copy logged at -v), failures named by their targets with a summary, the
// largest exit status; the same through the daemon.
func TestE2ECpToMany(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.txt")
	os.WriteFile(src, []byte("to many\n"), 0o644)
	_, errs, code := spindleCmd(t, "", "-v", "cp", "--to", "local", "--to", "local,local", src, dir+"/copy")
	if b, _ := os.ReadFile(filepath.Join(dir, "copy")); code != 0 || string(b) != "to many\n" || strings.Count(errs, "copied 1 files") != 2 {
		t.Errorf("cp --to two targets: exit %d, copy %q; stderr:\n%s", code, b, errs)
	}
	// Larger than a call carries: streamed to each target against the one
	// hash taken before the copies.
	big := filepath.Join(dir, "big")
	bigData := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16)
	os.WriteFile(big, bigData, 0o644)
	_, errs, code = spindleCmd(t, "", "cp", "--to", "local", "--to", "local,local", big, dir+"/bigcopy")
	if b, _ := os.ReadFile(filepath.Join(dir, "bigcopy")); code != 0 || !bytes.Equal(b, bigData) {
		t.Errorf("cp --to of %d bytes: exit %d, copy of %d bytes equal %v; stderr:\n%s", len(bigData), code, len(b), bytes.Equal(b, bigData), errs)
	}
	list := filepath.Join(dir, "targets")
	os.WriteFile(list, []byte("local\nlocal,local\n"), 0o600)
	_, errs, code = spindleCmd(t, "", "--timeout", "10s", "cp", "--to", "@"+list, "--to", "ssh:nobody@127.0.0.1:1", src, dir+"/copy2")
	if _, err := os.Stat(filepath.Join(dir, "copy2")); code != 255 || err != nil ||
		!strings.Contains(errs, "spindle: ssh:nobody@127.0.0.1:1: ") || !strings.Contains(errs, "1 of 3 targets failed: ssh:nobody@127.0.0.1:1 (not reached)") {
		t.Errorf("one target not reached: exit %d, copy %v; stderr:\n%s", code, err, errs)
	}
	for _, env := range [][]string{nil, persistEnv(t)} {
		args := []string{"cp", "--to", "local", "--to", "local,local", src, "/dev/null/x"}
		if env != nil {
			args = append([]string{"cp", "--persist", "1m"}, args[1:]...)
		}
		_, errs, code = spindleEnv(t, env, "", args...)
		if code != 1 || !strings.Contains(errs, "spindle: local,local: cp "+src+" → local,local:/dev/null/x: ") ||
			!strings.Contains(errs, "2 of 2 targets failed: local (failed), local,local (failed)") {
			t.Errorf("%v: exit %d, want 1; stderr:\n%s", args, code, errs)
		}
	}
	if _, errs, code := spindleEnv(t, persistEnv(t), "", "cp", "--persist", "1m", "--to", "local", "--to", "local,local", src, dir+"/copy3"); code != 0 {
		t.Errorf("cp --persist --to: exit %d; stderr:\n%s", code, errs)
	} else if b, _ := os.ReadFile(filepath.Join(dir, "copy3")); string(b) != "to many\n" {
		t.Errorf("cp --persist --to: copy %q", b)
	}

	for _, bad := range [][]string{
		{"--to", "local", src, "relative"},
		{"--to", "local", src, "local:/tmp/x"},
		{"--to", "local", "--fanout", "0", src, "/tmp/x"},
		{"--to", "@" + list + ".missing", src, "/tmp/x"},
		{"--to", "local", src},
	} {
		if _, errs, code := spindleCmd(t, "", append([]string{"cp"}, bad...)...); code != 2 {
			t.Errorf("cp %q: exit %d, want 2 (usage); stderr:\n%s", bad, code, errs)
		}
	}
	// A missing SRC is said once, before anything connects.
	_, errs, code = spindleCmd(t, "", "cp", "--to", "ssh:nobody@127.0.0.1:1", "--to", "local", src+".missing", "/tmp/x")
	if code != 1 || strings.Count(errs, "no such file") != 1 || strings.Contains(errs, "127.0.0.1") {
		t.Errorf("a missing SRC: exit %d, want 1 and one error; stderr:\n%s", code, errs)
	}
}
