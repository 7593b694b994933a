package cli

import (
	"fmt"
	"io"
)

// Escape sequences of `spindle shell`, as ssh(1) has them on a terminal:
// right after a newline (or at the start), the escape character (~ unless
// -e, -o EscapeChar or ssh_config's EscapeChar says otherwise) followed by
// '.' disconnects, ^Z suspends spindle, '?' lists the sequences, and a
// second escape character sends one. The escape character followed by
// anything else sends both. What a hung session or a dead network leaves
// a user with is a terminal in raw mode, where ^C is a byte for the
// remote side: ~. is the way out that ssh users reach for.

// defaultEscapeChar is ssh's.
const defaultEscapeChar = "~"

// parseEscapeChar reads an escape character as ssh does: one character,
// ^X for a control character (X from @ to DEL: ^] is 0x1d), or "none",
// which disables escapes (on is false).
func parseEscapeChar(v string) (c byte, on bool, err error) {
	switch {
	case v == "none":
		return 0, false, nil
	case len(v) == 1:
		return v[0], true, nil
	case len(v) == 2 && v[0] == '^' && v[1] >= 64 && v[1] <= 127:
		return v[1] & 31, true, nil
	}
	return 0, false, fmt.Errorf("bad escape character %q: want one character, ^X for a control character, or none", v)
}

// escapeName shows c as the user would type it.
func escapeName(c byte) string {
	if c < 32 {
		return "^" + string(rune(c|64))
	}
	return string(rune(c))
}

// escapeActions are what the sequences do; any may be nil.
type escapeActions struct {
	disconnect func()
	suspend    func()
	help       func(text string)
}

// escapeHelp is what <esc>? prints (on a raw terminal: CR LF).
func escapeHelp(c byte) string {
	e := escapeName(c)
	return "Supported escape sequences:\r\n" +
		" " + e + ".   - terminate the connection\r\n" +
		" " + e + "^Z  - suspend spindle\r\n" +
		" " + e + "?   - this message\r\n" +
		" " + e + e + "   - send the escape character by typing it twice\r\n" +
		"(Note that escapes are only recognized immediately after newline.)\r\n"
}

// escapeReader passes through what the user types, minus the escape
// sequences, which it acts on. After <esc>. it reads nothing more and
// reports end of file.
type escapeReader struct {
	r   io.Reader
	esc byte
	act escapeActions

	lineStart bool  // the next byte starts a line
	pending   bool  // an escape character at a line start, not yet sent
	done      bool  // disconnected
	err       error // from r, returned once out is empty
	in        []byte
	out       []byte // filtered, not yet returned
}

func newEscapeReader(r io.Reader, esc byte, act escapeActions) *escapeReader {
	return &escapeReader{r: r, esc: esc, act: act, lineStart: true}
}

func (e *escapeReader) Read(p []byte) (int, error) {
	for len(e.out) == 0 {
		switch {
		case e.done:
			return 0, io.EOF
		case e.err != nil:
			return 0, e.err
		}
		if e.in == nil {
			e.in = make([]byte, 4096)
		}
		n, err := e.r.Read(e.in)
		e.filter(e.in[:n])
		if err != nil {
			if e.pending && !e.done {
				e.out = append(e.out, e.esc) // typed last: sent as is
				e.pending = false
			}
			e.err = err
		}
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	return n, nil
}

// filter moves b to out, acting on escape sequences.
func (e *escapeReader) filter(b []byte) {
	for _, c := range b {
		if e.done {
			return
		}
		if e.pending {
			e.pending = false
			switch c {
			case '.':
				e.done = true
				if e.act.disconnect != nil {
					e.act.disconnect()
				}
				continue
			case 0x1a: // ^Z
				if e.act.suspend != nil {
					e.act.suspend()
				}
				continue // still at a line start: nothing was sent
			case '?':
				if e.act.help != nil {
					e.act.help(escapeHelp(e.esc))
				}
				continue
			case e.esc:
				e.out = append(e.out, c)
				e.lineStart = false
				continue
			}
			e.out = append(e.out, e.esc) // not a sequence: both go
		} else if e.lineStart && c == e.esc {
			e.pending = true
			continue
		}
		e.out = append(e.out, c)
		e.lineStart = c == '\r' || c == '\n'
	}
}
