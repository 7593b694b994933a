// Package printable makes text that came from the far end safe to show on
// the user's terminal: an error message is no channel for a hostile
// target's or agent's escape sequences (which can retitle a window, move
// the cursor over earlier output, or worse on some terminals).
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with invalid UTF-8 and every control character except
// newline and tab replaced by '?'. Text without them is returned as is,
// without allocating.
func String(s string) string {
	if strings.IndexFunc(s, unsafe) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unsafe(r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// unsafe reports whether r is not shown as is: a control character other
// than newline or tab, or utf8.RuneError (what ranging over invalid UTF-8
// yields).
func unsafe(r rune) bool {
	return r == utf8.RuneError || (unicode.IsControl(r) && r != '\n' && r != '\t')
}

// Line returns s as one line of a log: every control character (newline
// and tab included), the Unicode controls that reorder what a line shows
// (bidirectional embeddings, overrides, isolates and marks) and invalid
// UTF-8 written as Go escapes (\n, \r, \t, \x1b, \u009b, \u202e, and \xff
// for a byte that is not UTF-8). Text from the far end so shown can
// neither drive the terminal (retitle the window, erase or move over
// earlier output) nor pass for a line of its own. A backslash is left as
// is: the escapes are for reading, not for decoding back. Text without
// such characters is returned as is, without allocating.
func Line(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || reorders(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || unicode.IsControl(r) || reorders(r) {
			return true
		}
		i += size
	}
	return false
}

// reorders reports whether r is a bidirectional formatting character,
// which can make a line read other than it is ("KO" shown as "OK").
func reorders(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
