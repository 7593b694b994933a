package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"testing"
	"unicode"
)

// FuzzReadHello feeds ReadHello what a hostile or broken target could
// print before its hello, glued to a marker's front or not: it must return
// (no panic, no hang, bounded memory), accept a hello only when the input
// carries this start's marked hello and the right protocol, and never put control characters (but tab and newline)
// into an error.
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
		h, err := ReadHello(context.Background(), bufio.NewReaderSize(bytes.NewReader(in), 4096), nonce, nil)
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
