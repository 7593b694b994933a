package cli

import (
	stdctx "context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	"go.uber.org/zap"
)

func TestParseEscapeChar(t *testing.T) {
	for _, tc := range []struct {
		in  string
		c   byte
		on  bool
		bad bool
	}{
		{"~", '~', true, false},
		{"%", '%', true, false},
		{"^]", 0x1d, true, false},
		{"^A", 0x01, true, false},
		{"none", 0, false, false},
		{"", 0, false, true},
		{"~~", 0, false, true},
		{"^", '^', true, false},
		{"^1", 0, false, true},
	} {
		c, on, err := parseEscapeChar(tc.in)
		if (err != nil) != tc.bad || c != tc.c || on != tc.on {
			t.Errorf("parseEscapeChar(%q) = %q, %v, %v; want %q, %v, bad %v", tc.in, c, on, err, tc.c, tc.on, tc.bad)
		}
	}
}

// filterAll reads everything through an escapeReader fed one byte at a
// time (sequences split across reads, as a terminal delivers them) and
// says which actions ran.
func filterAll(t *testing.T, in string, esc byte) (out string, events []string) {
	t.Helper()
	r := newEscapeReader(iotest.OneByteReader(strings.NewReader(in)), esc, escapeActions{
		disconnect: func() { events = append(events, "disconnect") },
		suspend:    func() { events = append(events, "suspend") },
		help:       func(text string) { events = append(events, "help") },
	})
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%q: %v", in, err)
	}
	return string(b), events
}

func TestEscapeReader(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		events  string
	}{
		{"ls\r", "ls\r", ""},
		{"~.", "", "disconnect"},
		{"ls\r~.after", "ls\r", "disconnect"},
		{"ls\n~.", "ls\n", "disconnect"},
		{"a~.b", "a~.b", ""},           // not at a line start
		{"~~x\r", "~x\r", ""},          // a doubled escape sends one
		{"~~.", "~.", ""},              // and the line is no longer at its start
		{"~x", "~x", ""},               // not a sequence: both go
		{"~\r~.", "~\r", "disconnect"}, // ~ then CR: both sent, a new line starts
		{"~?~.", "", "help disconnect"},
		{"~\x1als\r", "ls\r", "suspend"},
		{"x\r~", "x\r~", ""}, // an escape typed last is sent at end of file
		{"~", "~", ""},
	} {
		out, events := filterAll(t, tc.in, '~')
		if out != tc.out || strings.Join(events, " ") != tc.events {
			t.Errorf("%q: sent %q, did %q; want %q, %q", tc.in, out, events, tc.out, tc.events)
		}
	}
	// Another escape character, and ~ is plain again.
	if out, events := filterAll(t, "~.\r\x1d.", 0x1d); out != "~.\r" || len(events) != 1 {
		t.Errorf("^] escape: sent %q, did %q", out, events)
	}
}

// A read error reaches the caller after the bytes read before it.
func TestEscapeReaderError(t *testing.T) {
	boom := errors.New("boom")
	r := newEscapeReader(io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(boom)), '~', escapeActions{})
	b, err := io.ReadAll(r)
	if string(b) != "ab" || !errors.Is(err, boom) {
		t.Errorf("got %q, %v; want \"ab\", boom", b, err)
	}
}

// The shell's escape character: -e (or -o) first, then ssh_config's
// EscapeChar for the chain's last SSH hop, then ~; a chain without SSH
// hops has only the first and the last.
func TestSessionEscapeChar(t *testing.T) {
	cfg, badCfg := filepath.Join(t.TempDir(), "config"), filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(cfg, []byte("Host web1\n  EscapeChar %\nHost db\n  EscapeChar none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badCfg, []byte("Host bad\n  EscapeChar xx\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := zap.NewNop()
	ctl := spindle.NewController(spindle.Options{Logger: log})
	defer ctl.Close()
	cx, err := ctl.Connect(stdctx.Background(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hop := func(host string) spindle.Connector { return ssh.Options{Host: host, ConfigFile: cfg} }
	for _, tc := range []struct {
		flag string
		hops []spindle.Connector
		want shellEscape
		bad  bool
	}{
		{"", []spindle.Connector{hop("web1")}, shellEscape{'%', true}, false},
		{"", []spindle.Connector{hop("web1"), sudo.Options{}}, shellEscape{'%', true}, false},
		{"", []spindle.Connector{hop("web1"), hop("db")}, shellEscape{}, false},
		{"^]", []spindle.Connector{hop("db")}, shellEscape{0x1d, true}, false},
		{"", []spindle.Connector{hop("other")}, shellEscape{'~', true}, false},
		{"", []spindle.Connector{local.Options{}}, shellEscape{'~', true}, false},
		{"", []spindle.Connector{ssh.Options{Host: "bad", ConfigFile: badCfg}}, shellEscape{}, true},
	} {
		s := &session{cx: cx, log: log, hops: [][]spindle.Connector{tc.hops}}
		got, err := s.escapeChar(stdctx.Background(), tc.flag)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("flag %q, hops %v: %+v, %v; want %+v (error: %v)", tc.flag, tc.hops, got, err, tc.want, tc.bad)
		}
	}
}
