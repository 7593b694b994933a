package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"unicode"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

const testNonce = "0123456789abcdef01234567"

// gluedNoise is what login scripts print without a final newline, and
// noise that contains a marker's kind but not this start's nonce.
var gluedNoise = []string{
	"\x1b]0;user@host: ~\x07",
	"Welcome, no newline here ",
	"\r\x1b[2K",
	"SPINDLE-HELLO ",
	"SPINDLE-ERROR boom ",
	"SPINDLE-ERROR ffffffffffffffffffffffff boom ",
	"SPINDLE-NEED 0000 Linux x86_64 gzip, ",
	"SPINDLE-HELLO " + testNonce[:10],
	"SPINDLE-HELLO " + testNonce + "ff {} ",
}

func helloLine(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHello(&b, testNonce, Hello{Proto: 1, Version: "v", PID: 7, OS: "linux", Arch: "amd64"}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func observe() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// Every marker counts with noise glued to its front; the noise is logged
// at debug level, printable.
func TestMarkersAfterGluedNoise(t *testing.T) {
	for _, noise := range gluedNoise {
		t.Run("hello", func(t *testing.T) {
			log, logs := observe()
			h, err := ReadHello(context.Background(), bufio.NewReader(strings.NewReader(noise+helloLine(t))), testNonce, log)
			if err != nil || h.PID != 7 {
				t.Fatalf("noise %q: hello %+v, %v", noise, h, err)
			}
			checkNoiseLogged(t, logs, noise)
		})
		t.Run("error", func(t *testing.T) {
			in := noise + ErrorPrefix + " " + testNonce + " no usable agent cache directory\n" + helloLine(t)
			_, err := ReadHello(context.Background(), bufio.NewReader(strings.NewReader(in)), testNonce, nil)
			if !errors.Is(err, ErrAgent) || !strings.HasSuffix(err.Error(), ": no usable agent cache directory") {
				t.Fatalf("noise %q: want the stage's error, got %v", noise, err)
			}
		})
		for _, kind := range []string{NeedPrefix, StalePrefix} {
			t.Run(kind, func(t *testing.T) {
				want := kind + " " + testNonce + " Linux x86_64 gzip,"
				var got []string
				handle := func(line string) (bool, error) {
					got = append(got, line)
					return true, nil
				}
				h, err := readHello(context.Background(), bufio.NewReader(strings.NewReader(noise+want+"\n"+helloLine(t))), testNonce, nil, handle)
				if err != nil || h == nil {
					t.Fatalf("noise %q: %v", noise, err)
				}
				if len(got) != 1 || got[0] != want {
					t.Fatalf("noise %q: the handler saw %q, want just %q", noise, got, want)
				}
			})
		}
	}
}

func checkNoiseLogged(t *testing.T, logs *observer.ObservedLogs, noise string) {
	t.Helper()
	skipped := logs.FilterMessage("skipped output before hello").All()
	if len(skipped) == 0 {
		t.Fatalf("noise %q not logged", noise)
	}
	for _, e := range skipped {
		line := e.ContextMap()["line"].(string)
		if strings.IndexFunc(line, unicode.IsControl) >= 0 {
			t.Errorf("noise logged with control characters: %q", line)
		}
		if strings.Contains(line, HelloPrefix+" "+testNonce+" ") {
			t.Errorf("the hello itself was logged as noise: %q", line)
		}
	}
}

// Noise that only contains markers' kinds, or markers of another nonce,
// never ends a start nor passes for a request.
func TestNoiseIsNotAMarker(t *testing.T) {
	var in strings.Builder
	for _, noise := range gluedNoise {
		in.WriteString(noise + "\n")
	}
	in.WriteString(helloLine(t))
	handle := func(line string) (bool, error) {
		t.Errorf("noise taken for a request: %q", line)
		return false, nil
	}
	h, err := readHello(context.Background(), bufio.NewReader(strings.NewReader(in.String())), testNonce, nil, handle)
	if err != nil || h.PID != 7 {
		t.Fatalf("hello %+v, %v", h, err)
	}
}

// A marker is found wherever a line longer than the per-line bound is cut:
// the bytes that may begin a marker wait for the rest of the line.
func TestMarkerAcrossACutLine(t *testing.T) {
	hello := helloLine(t)
	for n := maxLine - len(hello) - 8; n <= maxLine+8; n++ {
		in := strings.Repeat("x", n) + hello
		h, err := ReadHello(context.Background(), bufio.NewReaderSize(strings.NewReader(in), 4096), testNonce, nil)
		if err != nil || h.PID != 7 {
			t.Fatalf("%d bytes of noise before the hello: %+v, %v", n, h, err)
		}
	}
	// Noise alone, in lines that never end, is still bounded.
	_, err := ReadHello(context.Background(), bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 2*maxNoise)), 4096), testNonce, nil)
	if err == nil || !strings.Contains(err.Error(), "bytes of output and no hello") {
		t.Fatalf("endless noise: %v", err)
	}
}

// What precedes EOF without a newline is quoted, printable, in the error.
func TestUnendedNoiseBeforeEOF(t *testing.T) {
	_, err := ReadHello(context.Background(), bufio.NewReader(strings.NewReader("sh: 1: exec: /x: not found\x1b[2J")), testNonce, nil)
	if !errors.Is(err, ErrNoHello) || !strings.Contains(err.Error(), "exec: /x: not found") {
		t.Fatalf("got %v", err)
	}
	if strings.IndexFunc(err.Error(), unicode.IsControl) >= 0 {
		t.Fatalf("control characters in %q", err)
	}
}
