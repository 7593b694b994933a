package printable

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestAppendEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"plain text":              "plain text",
		"two\nlines\tand a tab\n": "two\nlines\tand a tab\n",
		"crlf line\r\n":           "crlf line\r\n",
		"over\rwrite":             `over\rwrite`,
		"end\r":                   `end\r`,
		"title \x1b]0;pwned\a":    `title \x1b]0;pwned\x07`,
		"clear \x1b[2J":           `clear \x1b[2J`,
		"csi \u009b2J":            `csi \u009b2J`,
		"bad \xff\xc3 utf8":       `bad \xff\xc3 utf8`,
		"nul\x00 del\x7f bs\b":    `nul\x00 del\x7f bs\x08`,
		"KO\u202eOK":              `KO\u202eOK`,
		"ünïcödé ✓ 日本":            "ünïcödé ✓ 日本",
		"back\\slash":             `back\slash`,
	} {
		if got := string(AppendEscaped([]byte("> "), []byte(in))); got != "> "+want {
			t.Errorf("AppendEscaped(%q) = %q, want %q", in, got, "> "+want)
		}
	}
}

// Nothing AppendEscaped returns acts on a terminal: it is UTF-8 without
// control characters but newlines, tabs, and carriage returns right
// before a newline, and without characters that reorder a line.
func FuzzAppendEscaped(f *testing.F) {
	for _, s := range []string{"a\rb", "\x1b[2J", "\u009b", "\xff", "x\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := string(AppendEscaped(nil, in))
		if !utf8.ValidString(out) {
			t.Fatalf("AppendEscaped(%q) = %q: not UTF-8", in, out)
		}
		for i, r := range out {
			if (unicode.IsControl(r) || reorders(r)) && r != '\n' && r != '\t' && !(r == '\r' && strings.HasPrefix(out[i+1:], "\n")) {
				t.Fatalf("AppendEscaped(%q) = %q: control character %U at %d", in, out, r, i)
			}
		}
	})
}
