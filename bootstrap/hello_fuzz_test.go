package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"testing"
	"unicode"

	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
)

// readHelloAllocs bounds what ReadHello allocates. Each byte read is
// copied a few times: gathered from the reader's buffer by appends (about
// twice its bytes while the slice grows), made a string, joined to what
// was carried from a cut line, and the part skipped as noise made
// printable for the debug log (a copy or two). The carried part is at
// most a line (maxLine), the noise kept for the error stops growing past
// 4 KiB plus one line, and the hello's JSON decodes into a small struct.
var readHelloAllocs = allocs.Bound{Base: 2*maxLine + 16<<10, PerByte: 16}

// FuzzReadHello feeds ReadHello what a hostile or broken target could
// print before its hello, glued to a marker's front or not: it must return
// (no panic, no hang), allocate within readHelloAllocs, accept a hello
// only when the input carries this start's marked hello and the right
// protocol, and never put control characters (but tab and newline) into
// an error.
func FuzzReadHello(f *testing.F) {
	const nonce = "0123456789abcdef01234567"
	var hello bytes.Buffer
	WriteHello(&hello, nonce, Hello{Proto: 1, Version: "v", PID: 1, OS: "linux", Arch: "amd64"})
	f.Add(hello.Bytes())
	f.Add([]byte("Welcome!\r\nlast login: yesterday\n" + hello.String()))
	f.Add([]byte("SPINDLE-ERROR no usable agent cache directory\n"))
	f.Add([]byte("SPINDLE-ERROR " + nonce + " \x1b]0;pwned\x07 \xff\n"))
	f.Add([]byte("SPINDLE-HELLO " + nonce + " {\"proto\":99}\n"))
	f.Add([]byte("SPINDLE-HELLO ffffffffffffffffffffffff {\"proto\":1}\n"))
	f.Add([]byte(strings.Repeat("x", 70000) + "\n"))
	// Login noise without a final newline, glued to the front of a marker.
	f.Add([]byte("\x1b]0;user@host\x07" + hello.String()))
	f.Add([]byte("Welcome, no newline " + hello.String()))
	f.Add([]byte("motd SPINDLE-ERROR " + nonce + " no usable agent cache directory\n"))
	f.Add([]byte("SPINDLE-ERROR boom SPINDLE-HELLO " + nonce[:8] + hello.String()))
	f.Add([]byte("SPINDLE-HELLO " + nonce + "ff {\"proto\":1}" + hello.String()))
	f.Add([]byte(strings.Repeat("x", 65530) + hello.String()))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(in), 4096)
		var h *Hello
		var err error
		allocs.Within(t, readHelloAllocs, len(in), "ReadHello", func() { h, err = ReadHello(context.Background(), r, nonce, nil) })
		if err != nil {
			if h != nil {
				t.Fatal("a hello and an error")
			}
			for _, r := range err.Error() {
				if unicode.IsControl(r) && r != '\t' && r != '\n' {
					t.Fatalf("control character %U in error %q", r, err)
				}
			}
			return
		}
		if !bytes.Contains(in, []byte(HelloPrefix+" "+nonce+" ")) {
			t.Fatalf("hello %+v accepted without a line carrying the nonce", h)
		}
	})
}
