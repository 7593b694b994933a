package printable

import (
	"unicode"
	"unicode/utf8"
)

// AppendEscaped appends b, text from the far end that the user reads as
// lines (a command's output), to dst with everything Line escapes written
// out the same way (\r, \x1b, \u009b, \u202e, \xff...) except newlines
// and tabs, which stay, and a carriage return right before a newline (a
// CRLF line ending: it moves the cursor back over nothing that follows).
// Everything else, UTF-8 text included, is copied as is.
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
		case r == '\r':
			dst = append(dst, `\r`...)
		case r < 0x80 && unicode.IsControl(r):
			dst = appendHex(dst, `\x`, uint32(r), 2)
		case unicode.IsControl(r) || reorders(r):
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

func appendHex(dst []byte, prefix string, v uint32, digits int) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, prefix...)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		dst = append(dst, hex[v>>uint(shift)&0xf])
	}
	return dst
}
