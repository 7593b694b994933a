package rpc_test

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/rpc"
)

type wireName struct {
	name string
	kind error
}

// wireNames is the wire format of the kinds (RemoteError's "k"): agents
// and controllers of other versions rely on these names, so they change
// only with PROTOCOL.md.
var wireNames = []wireName{
	{"timeout", errkind.ErrTimeout},
	{"canceled", errkind.ErrCanceled},
	{"permission", errkind.ErrPermission},
	{"not_found", errkind.ErrNotFound},
	{"exists", errkind.ErrExists},
	{"unknown_method", errkind.ErrUnknownMethod},
	{"bad_args", errkind.ErrBadArgs},
	{"auth", errkind.ErrAuth},
	{"host_key", errkind.ErrHostKey},
	{"too_large", errkind.ErrTooLarge},
	{"disconnected", errkind.ErrDisconnected},
	{"stalled", errkind.ErrStalled},
}

// localOnly are the kinds that never cross the wire by name: every
// RemoteError is ErrRemote, and only a controller runs out of children.
var localOnly = []error{errkind.ErrRemote, errkind.ErrTooManyChildren}

// An agent's error of each kind reaches the caller, through msgpack, as
// the same kind, under its name on the wire, with its message.
func TestEveryKindCrossesTheWire(t *testing.T) {
	for _, k := range errkind.All() {
		i := slices.IndexFunc(wireNames, func(w wireName) bool { return w.kind == k })
		if i < 0 {
			if !slices.Contains(localOnly, k) {
				t.Errorf("kind %q has no name on the wire and is not local-only", k)
			}
			continue
		}
		data, err := wire.Marshal(rpc.ToRemote(errkind.Errorf(k, "fs.Read /x: it went wrong")))
		if err != nil {
			t.Fatal(err)
		}
		var got rpc.RemoteError
		if err := wire.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if got.Kind != wireNames[i].name || got.Message != "fs.Read /x: it went wrong" {
			t.Errorf("kind %q crossed as %+v, want kind %q", k, got, wireNames[i].name)
		}
		for _, other := range errkind.All() {
			want := other == k || other == errkind.ErrRemote
			if errors.Is(&got, other) != want {
				t.Errorf("decoded %q: errors.Is(%q) = %v, want %v", got.Kind, other, !want, want)
			}
		}
	}
	for _, k := range localOnly {
		if re := rpc.ToRemote(errkind.Errorf(k, "x")); re.Kind != "" {
			t.Errorf("local-only kind %q crossed the wire as %q", k, re.Kind)
		}
	}
}

// PROTOCOL.md lists the same names.
func TestProtocolListsTheWireKinds(t *testing.T) {
	doc, err := os.ReadFile("../PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for line := range strings.Lines(string(doc)) {
		if strings.HasPrefix(line, "| `\"k\"` |") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("PROTOCOL.md has no row for RemoteError's \"k\"")
	}
	var documented []string
	_, kinds, _ := strings.Cut(row, "kind:")
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(kinds, -1) {
		documented = append(documented, m[1])
	}
	var names []string
	for _, w := range wireNames {
		names = append(names, w.name)
	}
	slices.Sort(documented)
	slices.Sort(names)
	if !slices.Equal(documented, names) {
		t.Errorf("PROTOCOL.md lists the kinds %v, the wire carries %v", documented, names)
	}
}
