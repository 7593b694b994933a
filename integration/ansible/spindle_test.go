package ansible_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLongSilentTask: a task silent for two minutes completes through
// the spindle connection (the host's controller only: what is tested is
// the daemon and the link, the same for every ansible-core).
func TestLongSilentTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	ctl := prepare(t, "2.14", "")
	p := f.play(t, ctl, "spindle", "long.yml")
	for _, k := range []string{"long silence / two minutes of silence @ t1", "long silence / after the silence @ t1"} {
		if r, ok := p.results[k]; !ok || r.Status == "failed" || r.Status == "unreachable" {
			t.Errorf("%s: %+v (found %v)\n%s\ndaemon log:\n%s", k, r, ok, p.output, p.daemonLog())
		}
	}
}

// TestDaemonKilledMidPlay: killing the spindle daemon while a task runs
// fails that task as UNREACHABLE, and the next task reconnects through a
// new daemon.
func TestDaemonKilledMidPlay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	ctl := prepare(t, "2.14", "")
	started, release := filepath.Join(f.dir, "started.fifo"), filepath.Join(f.dir, "release.fifo")
	for _, p := range []string{started, release} {
		if err := syscall.Mkfifo(p, 0o666); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o666) // past the umask: the login user opens them
	}
	// Whatever happens, the task's `cat` on the target must end.
	t.Cleanup(func() { unblockFifo(release) })

	xdg := filepath.Join(f.dir, "run-2.14-spindle", "xdg")
	killed := make(chan error, 1)
	go func() {
		// Opening blocks until the task opens the fifo to write "started".
		r, err := os.Open(started)
		if err != nil {
			killed <- err
			return
		}
		defer r.Close()
		if n, _ := io.Copy(io.Discard, r); n == 0 {
			killed <- errors.New("the task never started (the play ended first)")
			return
		}
		killed <- killDaemons(xdg)
	}()
	p := f.play(t, ctl, "spindle", "kill.yml", "-e", "fifo_started="+started, "-e", "fifo_release="+release)
	unblockFifo(started) // the goroutine's open returns if the task never ran
	if err := <-killed; err != nil {
		t.Fatalf("kill the daemon: %v\n%s", err, p.output)
	}
	want := map[string]string{
		"daemon killed / first task connects @ t1":      "changed",
		"daemon killed / killed mid-task @ t1":          "unreachable",
		"daemon killed / the next task reconnects @ t1": "changed",
	}
	for k, status := range want {
		if r := p.results[k]; r.Status != status {
			t.Errorf("%s: %q, want %q", k, r.Status, status)
		}
	}
	// The plugin's words for a daemon gone with a request in flight.
	if r := p.results["daemon killed / killed mid-task @ t1"]; r.Msg == nil || !strings.Contains(*r.Msg, "spindle daemon died") {
		t.Errorf("the killed task's message: %v, want it to say \"spindle daemon died\"", r.Msg)
	}
	if r := p.results["daemon killed / the next task reconnects @ t1"]; r.Stdout == nil || *r.Stdout != "reconnected" {
		t.Errorf("the next task's stdout: %v, want \"reconnected\"", r.Stdout)
	}
	if t.Failed() {
		t.Logf("output:\n%s\ndaemon log:\n%s", p.output, p.daemonLog())
	}
}

// unblockFifo ends a blocked open or read of the fifo at p by the other
// side, if one is waiting (opening to write without a reader fails at
// once, and then nobody waits).
func unblockFifo(p string) {
	if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
}

// killDaemons kills every spindle daemon with a socket under xdg/spindle
// (SIGKILL, by the pid its hello gives).
func killDaemons(xdg string) error {
	socks, _ := filepath.Glob(filepath.Join(xdg, "spindle", "*.sock"))
	if len(socks) == 0 {
		return errors.New("no daemon socket under " + xdg)
	}
	for _, s := range socks {
		var hello struct{ PID int }
		if err := daemonCall(s, map[string]any{"v": 1, "op": "hello"}, &hello); err != nil {
			return err
		}
		if hello.PID <= 1 {
			return errors.New("hello gave no pid")
		}
		if err := syscall.Kill(hello.PID, syscall.SIGKILL); err != nil {
			return err
		}
	}
	return nil
}
