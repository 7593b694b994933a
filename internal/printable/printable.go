// Package printable makes text that came from the far end safe to show on
// the user's terminal: an error message is no channel for a hostile
// target's or agent's escape sequences (which can retitle a window, move
// the cursor over earlier output, or worse on some terminals).
package printable

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with invalid UTF-8 and every control character except
// newline and tab replaced by '?'. Text without them is returned as is,
// without allocating.
func String(s string) string {
	if clean(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\n' && r != '\t') {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

func clean(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\n' && r != '\t') {
			return false
		}
	}
	return true
}
