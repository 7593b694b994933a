package exec

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/services/modules/store"
	"golang.org/x/sys/unix"
)

// useEmptyExeDir makes the cache directory one of the test's own, to
// see that memfd runs write nothing there.
func useEmptyExeDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "exe")
	old := store.ExeDir
	store.ExeDir = func() (string, error) { return dir, nil }
	t.Cleanup(func() { store.ExeDir = old })
	return dir
}

func fileBytes(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A script and an ELF binary run from a memfd, by their bytes and then
// by hash; nothing lands in the cache directory.
func TestExeMemfd(t *testing.T) {
	dir := useEmptyExeDir(t)
	c := newLocalCaller()
	ctx := context.Background()
	script := []byte("#!/bin/sh\necho \"$0\" \"$1\"\n")
	sum := sha256.Sum256(script)
	for _, exe := range []*StdinPart{{Data: script}, {SHA256: sum[:]}} {
		res, err := Run(ctx, c, Cmd{Argv: []string{"tool", "arg"}, Exe: exe, ExeMemfd: true})
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "/proc/self/fd/3 arg\n" {
			t.Fatalf("script (data %v): %v, %+v", exe.Data != nil, err, res)
		}
	}
	echo := fileBytes(t, "/bin/echo")
	res, err := Run(ctx, c, Cmd{Argv: []string{"echo", "from", "memory"}, Exe: &StdinPart{Data: echo}, ExeMemfd: true})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "from memory\n" {
		t.Fatalf("ELF: %v, %+v", err, res)
	}
	// A binary inherits no descriptor of its memfd; a script has it as
	// fd 3.
	ls := fileBytes(t, "/bin/ls")
	res, err = Run(ctx, c, Cmd{Argv: []string{"ls", "-l", "/proc/self/fd/"}, Exe: &StdinPart{Data: ls}, ExeMemfd: true})
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), " 0 -> ") || strings.Contains(string(res.Stdout), "memfd:") {
		t.Fatalf("ls -l /proc/self/fd/: %v, %+v", err, res)
	}
	res, err = Run(ctx, c, Cmd{Argv: []string{"sh"}, Exe: &StdinPart{Data: []byte("#!/bin/sh\nls -l /proc/self/fd/ </dev/null\n")}, ExeMemfd: true})
	if err != nil || !strings.Contains(string(res.Stdout), " 3 -> /memfd:spindle-exe") {
		t.Fatalf("a script's descriptors: %v, %+v", err, res)
	}
	// Through exec.Start too.
	p, err := Start(ctx, c, Cmd{Argv: []string{"tool", "streamed"}, Exe: &StdinPart{SHA256: sum[:]}, ExeMemfd: true})
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	var out strings.Builder
	if err := p.CopyOutput(&out, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Wait(); err != nil || res.ExitCode != 0 || out.String() != "/proc/self/fd/3 streamed\n" {
		t.Fatalf("Start: %v, %+v, %q", err, res, out.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cache directory was made: %v", err)
	}
	if _, err := Run(ctx, c, Cmd{Argv: []string{"x"}, ExeMemfd: true}); !errors.Is(err, errkind.ErrBadArgs) {
		t.Errorf("ExeMemfd without Exe: %v", err)
	}
	unknown := sha256.Sum256([]byte("nothing stored"))
	if _, err := Run(ctx, c, Cmd{Argv: []string{"x"}, Exe: &StdinPart{SHA256: unknown[:]}, ExeMemfd: true}); !store.IsNotStored(err) {
		t.Errorf("an unknown hash: %v", err)
	}
}

// Where the kernel refuses, the call fails saying so and naming the
// fallback, and nothing ran: no silent fallback to the cache directory.
func TestExeMemfdRefused(t *testing.T) {
	useEmptyExeDir(t)
	c := newLocalCaller()
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "ran")
	script := []byte("#!/bin/sh\ntouch " + marker + "\n")
	echo := fileBytes(t, "/bin/echo")
	refuse := func(errno error) func(string, int) (int, error) {
		return func(string, int) (int, error) { return -1, errno }
	}
	realCreate := memfdCreate
	defer func() { memfdCreate, procSelfFD = realCreate, "/proc/self/fd/" }()
	for _, tc := range []struct {
		name   string
		create func(string, int) (int, error)
		proc   string
		exe    []byte
		kind   error
		text   string
	}{
		{"memfd_noexec=2", refuse(unix.EACCES), "/proc/self/fd/", script, errkind.ErrPermission, "kernel refuses memfd_create"},
		{"seccomp", refuse(unix.EPERM), "/proc/self/fd/", script, errkind.ErrPermission, "seccomp"},
		{"no memfd_create", refuse(unix.ENOSYS), "/proc/self/fd/", script, nil, "kernel refuses memfd_create"},
		{"no /proc", realCreate, "/nonexistent/fd/", script, errkind.ErrNotFound, "/proc not mounted"},
		{"noexec at execve", func(name string, flags int) (int, error) {
			// The path the child execs is a file without x bits: execve
			// fails with EACCES as on a memfd the kernel will not run.
			fd, err := realCreate(name, flags)
			if err == nil {
				err = os.WriteFile(filepath.Join(procSelfFD, strconv.Itoa(fd)), nil, 0o600)
			}
			return fd, err
		}, t.TempDir() + "/", echo, errkind.ErrPermission, "kernel refuses execve of the memfd"},
	} {
		memfdCreate, procSelfFD = tc.create, tc.proc
		_, err := Run(ctx, c, Cmd{Argv: []string{"tool"}, Exe: &StdinPart{Data: tc.exe}, ExeMemfd: true})
		if err == nil || tc.kind != nil && !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), "leave Cmd.ExeMemfd off") {
			t.Errorf("%s: %v; want %v with %q and the fallback", tc.name, err, tc.kind, tc.text)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the program ran", tc.name)
		}
	}
	// A kernel before 6.3 refuses the unknown MFD_EXEC: it is asked again
	// without.
	memfdCreate, procSelfFD = func(name string, flags int) (int, error) {
		if flags&unix.MFD_EXEC != 0 {
			return -1, unix.EINVAL
		}
		return realCreate(name, flags)
	}, "/proc/self/fd/"
	if _, err := Run(ctx, c, Cmd{Argv: []string{"tool"}, Exe: &StdinPart{Data: script}, ExeMemfd: true}); err != nil {
		t.Fatalf("without MFD_EXEC: %v", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("without MFD_EXEC: the script did not run: %v", err)
	}
}
