package spin

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReaderPassesDataAndEOF(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	sr := Reader(r, 20*time.Microsecond)
	if _, ok := sr.(*reader); !ok {
		t.Fatalf("a pipe was not wrapped")
	}
	want := bytes.Repeat([]byte("spindle"), 10000)
	go func() {
		w.Write(want)
		w.Close()
	}()
	got, err := io.ReadAll(sr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d", len(got), len(want))
	}
	r.Close()
}

func TestReaderParksWhenIdle(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sr := Reader(r, time.Microsecond)
	done := make(chan []byte)
	go func() {
		b := make([]byte, 4)
		n, _ := sr.Read(b)
		done <- b[:n]
	}()
	// The reader spins out its budget and parks; a later write must still
	// wake it.
	time.Sleep(10 * time.Millisecond)
	w.Write([]byte("late"))
	if got := <-done; string(got) != "late" {
		t.Fatalf("got %q", got)
	}
	w.Close()
}

func TestNonFileAndZeroBudgetPassThrough(t *testing.T) {
	var b bytes.Buffer
	if Reader(&b, DefaultBudget) != io.Reader(&b) {
		t.Fatal("a non-file reader was wrapped")
	}
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	if Reader(r, 0) != io.Reader(r) {
		t.Fatal("a zero budget still wrapped")
	}
}

func TestBudgetFromEnv(t *testing.T) {
	t.Setenv("SPINDLE_SPIN", "0")
	if Budget() != 0 {
		t.Fatal("SPINDLE_SPIN=0 did not disable spinning")
	}
	t.Setenv("SPINDLE_SPIN", "10us")
	if Budget() != 10*time.Microsecond {
		t.Fatal("SPINDLE_SPIN=10us not honoured")
	}
	t.Setenv("SPINDLE_SPIN", "")
	if Budget() != DefaultBudget {
		t.Fatal("default budget wrong")
	}
}

// A Read whose data took longer than spinning could have caught makes the
// next Read park at once; a quick one turns spinning back on.
func TestReaderSpinsOnlyAfterShortWaits(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	sr := Reader(r, 50*time.Microsecond).(*reader)
	var clock time.Time
	step := time.Duration(0)
	sr.now = func() time.Time { clock = clock.Add(step); return clock }
	b := make([]byte, 8)
	read := func() {
		t.Helper()
		if _, err := w.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if n, err := sr.Read(b); n != 1 || err != nil {
			t.Fatalf("Read = %d, %v", n, err)
		}
	}
	if !sr.spinNext {
		t.Fatal("a new reader does not spin")
	}
	step = time.Millisecond // every clock reading 1 ms later: a long wait
	read()
	if sr.spinNext {
		t.Fatal("still spinning after a 1 ms wait")
	}
	step = time.Microsecond
	read()
	if !sr.spinNext {
		t.Fatal("not spinning again after a short wait")
	}
}
