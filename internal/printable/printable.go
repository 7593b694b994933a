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
