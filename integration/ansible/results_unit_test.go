package ansible_test

import (
	"strings"
	"testing"
)

// TestCompareResults: the comparison sees a different status, rc,
// stdout or item, and a result on one side only; ssh's "\r\n" from a
// terminal equals "\n", and the message does not count.
func TestCompareResults(t *testing.T) {
	str := func(s string) *string { return &s }
	num := func(n int) *int { return &n }
	base := result{Play: "p", Host: "h", Task: "t", Status: "changed", RC: num(0), Stdout: str("a\nb"), Msg: str("x"),
		Items: []result{{Status: "ok", Stdout: str("i")}}}
	same := base
	same.Stdout, same.Msg = str("a\r\nb"), str("y")
	if d := compareResults(map[string]result{base.key(): base}, map[string]result{same.key(): same}, "a", "b"); len(d) != 0 {
		t.Errorf("equal results differ: %v", d)
	}
	for what, change := range map[string]func(*result){
		"status": func(r *result) { r.Status = "ok" },
		"rc":     func(r *result) { r.RC = num(1) },
		"stdout": func(r *result) { r.Stdout = str("a\nc") },
		"item":   func(r *result) { r.Items = []result{{Status: "failed", Stdout: str("i")}} },
	} {
		other := base
		change(&other)
		if d := compareResults(map[string]result{base.key(): base}, map[string]result{other.key(): other}, "a", "b"); len(d) != 1 {
			t.Errorf("a different %s: %v, want one difference", what, d)
		}
	}
	if d := compareResults(map[string]result{base.key(): base}, map[string]result{}, "a", "b"); len(d) != 1 || !strings.Contains(d[0], "b has no result") {
		t.Errorf("a missing result: %v", d)
	}
}

// TestCheckExpected: a task must end as its name says, and no other task
// may fail.
func TestCheckExpected(t *testing.T) {
	msg := "Incorrect sudo password"
	got := map[string]result{
		"1": {Task: "fine", Status: "ok"},
		"2": {Task: "x [expect failed]", Status: "failed"},
		"3": {Task: "y [expect unreachable]", Host: "dead1", Status: "unreachable"},
		"4": {Task: "y [expect unreachable]", Host: "t1", Status: "ok"},
		"5": {Task: "a wrong password [expect failed]", Status: "failed", Msg: &msg},
	}
	if bad := checkExpected(got); len(bad) != 0 {
		t.Errorf("as expected, yet: %v", bad)
	}
	got["6"] = result{Task: "fine too", Status: "failed"}
	got["7"] = result{Task: "z [expect failed]", Status: "ok"}
	got["8"] = result{Task: "y [expect unreachable]", Host: "dead2", Status: "failed"}
	got["9"] = result{Task: "another wrong password [expect failed]", Status: "failed"}
	if bad := checkExpected(got); len(bad) != 4 {
		t.Errorf("four results end otherwise than said, got %d: %v", len(bad), bad)
	}
}
