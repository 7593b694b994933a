package printable

import "testing"

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                       "plain",
		"two\nlines\tand a tab":       "two\nlines\tand a tab",
		"title \x1b]0;pwned\x07 done": "title ?]0;pwned? done",
		"csi \u009b2J":                "csi ?2J",
		"bad \xff utf8":               "bad ? utf8",
		"carriage\rreturn":            "carriage?return",
		"ünïcödé ✓":                   "ünïcödé ✓",
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}
