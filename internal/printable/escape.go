package printable

import "unicode/utf8"

// AppendEscaped appends b to dst with whatever could act on a terminal
// written out as visible escapes, in Go's notation: control characters
// as \r, \a, \x1b, \u009b and the like, and bytes that are not UTF-8 as
// \xff. Newlines and tabs stay, and so does a carriage return right
// before a newline (a CRLF line ending: it moves the cursor back over
// nothing that follows). Everything else, UTF-8 text included, is
// copied as is. A backslash is not escaped: the result is for reading,
// not for parsing back.
func AppendEscaped(dst, b []byte) []byte {
	for len(b) > 0 {
		// The run of bytes that need nothing, in one append.
		i := 0
		for i < len(b) && plainASCII(b[i]) {
			i++
		}
		dst = append(dst, b[:i]...)
		b = b[i:]
		if len(b) == 0 {
			break
		}
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size <= 1:
			dst = appendHex(dst, `\x`, uint32(b[0]), 2)
		case r == '\r' && len(b) > 1 && b[1] == '\n':
			dst = append(dst, '\r')
		case r < 0x20 || r == 0x7f:
			if e := shortEscape(r); e != "" {
				dst = append(dst, e...)
			} else {
				dst = appendHex(dst, `\x`, uint32(r), 2)
			}
		case r >= 0x80 && r < 0xa0: // C1 controls, such as CSI (U+009B)
			dst = appendHex(dst, `\u`, uint32(r), 4)
		default:
			dst = append(dst, b[:size]...)
		}
		b = b[size:]
	}
	return dst
}

// plainASCII says whether c is printable ASCII, a newline or a tab.
func plainASCII(c byte) bool { return c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' }

// shortEscape is Go's one-letter escape for r, if it has one.
func shortEscape(r rune) string {
	switch r {
	case '\a':
		return `\a`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\r':
		return `\r`
	case '\v':
		return `\v`
	}
	return ""
}

func appendHex(dst []byte, prefix string, v uint32, digits int) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, prefix...)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		dst = append(dst, hex[v>>uint(shift)&0xf])
	}
	return dst
}
