package hostvars

import (
	"errors"
	"strings"
)

// errUnterminated is a quote left open.
var errUnterminated = errors.New("unterminated quote")

// splitShell splits s into words as a POSIX shell (and Python's
// shlex.split, which Ansible's ssh connection uses) does: blanks separate
// words; single quotes keep everything literally; double quotes keep
// everything but \\, \", \$, \` and a backslash-newline; a backslash
// outside quotes keeps the next character. No expansions.
func splitShell(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\\':
			inWord = true
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					w.WriteByte(s[i])
				}
			}
		case c == '\'':
			inWord = true
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errUnterminated
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`\n", s[i+1]) >= 0 {
					i++
					if s[i] == '\n' {
						continue
					}
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errUnterminated
			}
		default:
			inWord = true
			w.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
