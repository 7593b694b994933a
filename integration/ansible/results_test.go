package ansible_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// result is one task's result on one host, as the spindle_results
// callback plugin (testdata/callback_plugins) writes it.
type result struct {
	Play    string   `json:"play"`
	Host    string   `json:"host"`
	Task    string   `json:"task"`
	Status  string   `json:"status"` // ok, changed, failed, unreachable, skipped
	RC      *int     `json:"rc"`
	Stdout  *string  `json:"stdout"`
	Msg     *string  `json:"msg"`
	Ignored bool     `json:"ignored"`
	Items   []result `json:"items"`
}

func (r result) key() string { return r.Play + " / " + r.Task + " @ " + r.Host }

// comparable is r as the comparison sees it: status, rc and stdout
// (items alike), without the message. ssh runs raw and script commands
// in a terminal (-tt), which turns "\n" into "\r\n"; nothing else of the
// output may differ.
func (r result) comparable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s ignored=%v", r.Status, r.Ignored)
	if r.RC != nil {
		fmt.Fprintf(&b, " rc=%d", *r.RC)
	}
	if r.Stdout != nil {
		fmt.Fprintf(&b, " stdout=%q", strings.ReplaceAll(*r.Stdout, "\r\n", "\n"))
	}
	for i, it := range r.Items {
		fmt.Fprintf(&b, " item%d{%s}", i, it.comparable())
	}
	return b.String()
}

// readResults reads a callback's file, keyed by play, task and host.
func readResults(path string) (map[string]result, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	got := map[string]result{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, nil, fmt.Errorf("%s: %v: %q", path, err, sc.Text())
		}
		// Tasks of the same name (the unnamed asserts) on one host are
		// told apart by their order.
		k := r.key()
		for n := 2; ; n++ {
			if _, dup := got[k]; !dup {
				break
			}
			k = fmt.Sprintf("%s #%d", r.key(), n)
		}
		got[k] = r
		order = append(order, k)
	}
	return got, order, sc.Err()
}

// compareResults lists how b differs from a, task by task.
func compareResults(a, b map[string]result, aName, bName string) []string {
	var diffs []string
	for k, ra := range a {
		rb, ok := b[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: %s has %s, %s has no result", k, aName, ra.comparable(), bName))
		case ra.comparable() != rb.comparable():
			diffs = append(diffs, fmt.Sprintf("%s:\n\t%s: %s\n\t%s: %s", k, aName, ra.comparable(), bName, rb.comparable()))
		}
	}
	for k, rb := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: %s has %s, %s has no result", k, bName, rb.comparable(), aName))
		}
	}
	sort.Strings(diffs)
	return diffs
}

// checkExpected lists the results that end otherwise than their task's
// name says: "[expect failed]" or "[expect unreachable]" must end so
// (and a wrong or missing become password with Ansible's own message),
// every other task must not fail.
func checkExpected(got map[string]result) []string {
	var bad []string
	for k, r := range got {
		want := ""
		switch {
		case strings.Contains(r.Task, "[expect failed]"):
			want = "failed"
		case strings.Contains(r.Task, "[expect unreachable]") && strings.HasPrefix(r.Host, "dead"):
			want = "unreachable"
		}
		msg := ""
		if r.Msg != nil {
			msg = *r.Msg
		}
		switch {
		case want != "" && r.Status != want:
			bad = append(bad, fmt.Sprintf("%s: %s (%s), want %s", k, r.Status, msg, want))
		case want == "" && (r.Status == "failed" || r.Status == "unreachable"):
			bad = append(bad, fmt.Sprintf("%s: %s: %s", k, r.Status, msg))
		case strings.Contains(r.Task, "wrong password") && !strings.Contains(msg, "Incorrect sudo password"):
			bad = append(bad, fmt.Sprintf("%s: message %q does not say %q", k, msg, "Incorrect sudo password"))
		case strings.Contains(r.Task, "without a password") && !strings.Contains(msg, "Missing sudo password"):
			bad = append(bad, fmt.Sprintf("%s: message %q does not say %q", k, msg, "Missing sudo password"))
		}
	}
	sort.Strings(bad)
	return bad
}
