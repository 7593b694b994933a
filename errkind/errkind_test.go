package errkind_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
)

// ExportedKinds lists the names of the package's exported Err* variables
// by reading its source, so that a kind added without joining All is
// caught here (and, through All, at the root package's re-exports).
func exportedKinds(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if n.IsExported() && strings.HasPrefix(n.Name, "Err") {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

func TestAllListsEveryKind(t *testing.T) {
	names := exportedKinds(t)
	all := errkind.All()
	if len(names) != len(all) {
		t.Fatalf("the package exports %d kinds (%v) but All lists %d", len(names), names, len(all))
	}
	for i, k := range all {
		if slices.Contains(all[:i], k) {
			t.Errorf("All lists %v twice", k)
		}
	}
}

func TestErrorText(t *testing.T) {
	cause := errors.New("open /etc/shadow: permission denied")
	for _, tc := range []struct {
		err  *errkind.Error
		want string
	}{
		{&errkind.Error{Chain: "bastion → web1 → sudo:root", Op: "fs.Read", Kind: errkind.ErrPermission, Err: cause},
			"bastion → web1 → sudo:root: fs.Read: open /etc/shadow: permission denied"},
		// An op the text names already is not repeated.
		{&errkind.Error{Chain: "web1", Op: "exec.Start", Err: errors.New("exec.Start nonexist: executable file not found")},
			"web1: exec.Start nonexist: executable file not found"},
		{&errkind.Error{Chain: "web1", Op: "fs.Get", Err: errors.New("fs.Get: no such file")}, "web1: fs.Get: no such file"},
		{&errkind.Error{Chain: "web1", Op: "fs.Get", Err: errors.New("fs.GetTree /x: permission denied")},
			"web1: fs.Get: fs.GetTree /x: permission denied"},
		{&errkind.Error{Chain: "web1", Err: errors.New("connection refused")}, "web1: connection refused"},
		// Msg replaces the cause's text; the kind's text is the last resort.
		{&errkind.Error{Chain: "web1", Kind: errkind.ErrTimeout, Msg: "connect timed out: context deadline exceeded", Err: context.DeadlineExceeded},
			"web1: connect timed out: context deadline exceeded"},
		{&errkind.Error{Chain: "web1", Op: "sys.Ping", Kind: errkind.ErrDisconnected}, "web1: sys.Ping: disconnected"},
		{&errkind.Error{Kind: errkind.ErrBadArgs, Err: errors.New("fs.Read: a path is required")}, "fs.Read: a path is required"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%#v.Error() = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestIsMatchesKindAndCause(t *testing.T) {
	err := error(&errkind.Error{Chain: "web1", Kind: errkind.ErrTimeout, Msg: "timed out", Err: context.DeadlineExceeded})
	if !errors.Is(err, errkind.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v: errors.Is misses the kind or the cause", err)
	}
	if errors.Is(err, errkind.ErrCanceled) {
		t.Fatalf("%v matches a kind it is not", err)
	}
	err = errkind.Errorf(errkind.ErrNotFound, "stat %s: %w", "/x", fs.ErrNotExist)
	if !errors.Is(err, errkind.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) || err.Error() != "stat /x: file does not exist" {
		t.Fatalf("Errorf gave %q, which does not match its kind and %%w cause", err)
	}
}

func TestIn(t *testing.T) {
	handler := errkind.Errorf(errkind.ErrAuth, "sudo: wrong password")
	got := errkind.In("web1 → sudo:root", "", handler)
	var e *errkind.Error
	if !errors.As(got, &e) || e.Chain != "web1 → sudo:root" || !errors.Is(got, errkind.ErrAuth) {
		t.Fatalf("In did not name the chain of an unnamed *Error: %#v", got)
	}
	if handler.(*errkind.Error).Chain != "" {
		t.Fatal("In changed the error it was given")
	}
	if again := errkind.In("other", "op", got); again != got {
		t.Fatalf("In renamed an error that names its chain already: %v", again)
	}
	wrapped := errkind.In("web1", "fs.Read", errors.New("boom"))
	if wrapped.Error() != "web1: fs.Read: boom" {
		t.Fatalf("In wrapped a plain error as %q", wrapped)
	}
	if errkind.In("web1", "", nil) != nil {
		t.Fatal("In made an error of nil")
	}
}
