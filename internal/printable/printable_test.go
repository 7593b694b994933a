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

func TestLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                                   "plain",
		`C:\path \x1b as text`:                    `C:\path \x1b as text`,
		"ok\nall 50 targets OK":                   `ok\nall 50 targets OK`,
		"\rforged\ttab":                           `\rforged\ttab`,
		"title \x1b]0;pwned\x07 done":             `title \x1b]0;pwned\x07 done`,
		"erase \x1b[2K\x1b[1A line, del \x7f":     `erase \x1b[2K\x1b[1A line, del \x7f`,
		"csi \u009b2J":                            `csi \u009b2J`,
		"bad \xff\xfe utf8":                       `bad \xff\xfe utf8`,
		"reversed \u202eKO\u202c, isolate \u2066": `reversed \u202eKO\u202c, isolate \u2066`,
		"ünïcödé ✓ \u00a0nbsp":                    "ünïcödé ✓ \u00a0nbsp",
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLineDoesNotAllocateForPlainText(t *testing.T) {
	s := "web1: exec.Run took 12 ms ✓"
	if n := testing.AllocsPerRun(100, func() { _ = Line(s) }); n != 0 {
		t.Errorf("Line allocated %v times for plain text", n)
	}
}
