package ansible

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/spindle-rpc/spindle/ansible/wire"
	"github.com/spindle-rpc/spindle/internal/testkit/allocs"
)

// decoded decodes a request's host object as handle does.
func decoded(t *testing.T, e *Endpoint, host string) *request {
	t.Helper()
	var r request
	if err := json.Unmarshal([]byte(`{"op":"exec","host":`+host+`}`), &r); err != nil {
		t.Fatal(err)
	}
	if err := e.decodeHost(&r); err != nil {
		t.Fatalf("host %s: %v", host, err)
	}
	return &r
}

// A host sent again with the same bytes gets the resolution of the first
// request, which is what resolving it again gives.
func TestResolvedRemembered(t *testing.T) {
	e := &Endpoint{}
	host := `{"name":"web1","address":"10.0.0.1","port":2222,"user":"deploy","password":"pw","ssh_args":"-o ConnectTimeout=5 -o ControlPersist=60s"}`
	first := decoded(t, e, host)
	rh, err := e.resolveHost(first)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := first.Host.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if want := hostKey(fresh); rh.key != want || !reflect.DeepEqual(rh.res, fresh) {
		t.Fatalf("remembered %+v, %+v; resolved now %+v, %+v", rh.key, rh.res, want, fresh)
	}

	again := decoded(t, e, host)
	if again.resolved != rh || again.Host != rh.host {
		t.Fatal("the same bytes were decoded and resolved again")
	}
	if got, err := e.resolveHost(again); err != nil || got != rh {
		t.Fatalf("resolveHost: %p, %v; want the remembered %p", got, err, rh)
	}

	other := decoded(t, e, `{"name":"web1","address":"10.0.0.1","port":2223,"user":"deploy","password":"pw"}`)
	if other.resolved != nil {
		t.Fatal("another host's bytes found a resolution")
	}
	ro, err := e.resolveHost(other)
	if err != nil {
		t.Fatal(err)
	}
	if ro.key == rh.key {
		t.Fatalf("ports 2222 and 2223 share the key %+v", ro.key)
	}
}

// No host (absent or null) is no host; a host of the wrong shape is a
// bad request; a host that does not resolve is not remembered.
func TestDecodeHostErrors(t *testing.T) {
	e := &Endpoint{}
	for _, host := range []string{`null`} {
		if r := decoded(t, e, host); r.Host != nil || r.HostJSON != nil {
			t.Errorf("host %s: %+v", host, r.Host)
		}
	}
	var r request
	if err := json.Unmarshal([]byte(`{"op":"exec"}`), &r); err != nil {
		t.Fatal(err)
	}
	if err := e.decodeHost(&r); err != nil || r.Host != nil {
		t.Errorf("no host: %+v, %v", r.Host, err)
	}
	r = request{HostJSON: json.RawMessage(`{"name":"x","port":"22"}`)}
	if err := e.decodeHost(&r); !errors.Is(err, wire.ErrBadRequest) {
		t.Errorf("a port of the wrong type: %v, want a bad request", err)
	}
	bad := decoded(t, e, `{"name":"x","ssh_args":"-o 'open"}`)
	for i := 0; i < 2; i++ {
		if _, err := e.resolveHost(bad); err == nil {
			t.Fatal("an unclosed quote in ssh_args resolved")
		}
	}
	if n := len(e.resolved.m); n != 0 {
		t.Errorf("%d resolutions remembered after a failure", n)
	}
}

// However many hosts a daemon sees, it keeps at most maxResolved.
func TestResolvedBounded(t *testing.T) {
	e := &Endpoint{}
	for i := 0; i < maxResolved+10; i++ {
		r := decoded(t, e, fmt.Sprintf(`{"name":"h%d"}`, i))
		if _, err := e.resolveHost(r); err != nil {
			t.Fatal(err)
		}
		if n := len(e.resolved.m); n > maxResolved {
			t.Fatalf("%d resolutions kept after %d hosts", n, i+1)
		}
	}
	// The latest is remembered still.
	if r := decoded(t, e, fmt.Sprintf(`{"name":"h%d"}`, maxResolved+9)); r.resolved == nil {
		t.Error("the latest host was forgotten")
	}
}

// hostAllocs bounds what decoding and resolving a host object allocates:
// JSON decoding costs a few times its input, and a resolution a few
// KiB besides.
var hostAllocs = allocs.Bound{Base: 64 << 10, PerByte: 32}

// FuzzDecodeHost: any host object gives a host and a resolution, or an
// error, never a panic or an allocation beyond hostAllocs; what is
// remembered for its bytes is what it resolves to.
func FuzzDecodeHost(f *testing.F) {
	f.Add([]byte(`{"name":"web1","address":"10.0.0.1","port":22,"user":"u","ssh_args":"-o ConnectTimeout=5"}`))
	f.Add([]byte(`{"name":"x","via":"ssh:b@bastion,sudo","target":"sudo:root"}`))
	f.Add([]byte(`{"name":"x","ssh_extra_args":"-o 'open"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e := &Endpoint{}
		r := request{HostJSON: json.RawMessage(b)}
		var err error
		allocs.Within(t, hostAllocs, len(b), "decodeHost and resolveHost", func() {
			if err = e.decodeHost(&r); err == nil && r.Host != nil {
				_, err = e.resolveHost(&r)
			}
		})
		if err != nil || r.Host == nil {
			return
		}
		again := request{HostJSON: json.RawMessage(b)}
		if err := e.decodeHost(&again); err != nil || again.resolved != r.resolved {
			t.Fatalf("the same bytes again: %v, %p; want the remembered %p", err, again.resolved, r.resolved)
		}
	})
}

// BenchmarkHostResolution: what a request's host costs the daemon,
// remembered and resolved each time (a host with the usual variables).
func BenchmarkHostResolution(b *testing.B) {
	header := []byte(`{"v":1,"spindle":"dev","op":"exec","host":{"name":"web1","address":"127.0.0.1","port":2222,"user":"deploy","password":null,"private_key_file":"/home/deploy/.ssh/id_ed25519","ssh_args":"-C -o ControlMaster=auto -o ControlPersist=60s","ssh_common_args":"","ssh_extra_args":"","host_key_checking":false,"timeout":10,"via":null,"target":null},"become":null,"cmd":"true","pty":false,"module_runner":true}`)
	for _, remember := range []bool{true, false} {
		b.Run(fmt.Sprintf("remembered=%v", remember), func(b *testing.B) {
			e := &Endpoint{}
			for i := 0; i < b.N; i++ {
				var r request
				if err := json.Unmarshal(header, &r); err != nil {
					b.Fatal(err)
				}
				if !remember {
					e.resolved = resolvedHosts{}
				}
				if err := e.decodeHost(&r); err != nil {
					b.Fatal(err)
				}
				if _, err := e.resolveHost(&r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
