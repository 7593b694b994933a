// Package ansiballz runs Ansible's pipelined AnsiballZ modules on an
// agent from Go, the way the Ansible endpoint does for Ansible: the
// module's zip crosses the link once into the agent's module store
// (services/modules/store), as the binary its base64 stands for (Zip), and
// is named by hash afterwards, and the run goes
// through the agent's warm Python runner (exec.Cmd.Python) when the
// interpreter can host one, a fresh interpreter otherwise.
//
// The wrapper around the zip (a few KiB of Python before and after it)
// differs between the tasks of one module only in a few places: the
// module's arguments, the time. A sender that keeps a Wrapper stored on
// an agent (Wrapper.StdinParts, once) sends the wrappers of later
// payloads of the same zip as slices of the stored one and the bytes
// they differ in (Wrapper.Delta), and the agent rebuilds the payload
// byte for byte (exec.StdinPart's Offset and Length). The agent's store
// is a cache: a wrapper it lost fails the call as a lost zip does
// (IsNotStored), before anything runs, and is sent in full again.
package ansiballz

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/modules/store"
	"golang.org/x/sys/unix"
)

// A pipelined AnsiballZ payload (the stdin of a module run with
// pipelining) is a Python wrapper of a few KiB around a base64 zip of
// 100-200 KiB that is byte-identical for every task and host running the
// same module in one run.

// The wrapper's marker, and how each ansible-core generation writes the
// zip: 2.14-2.15 ZIPDATA = """…""", 2.16-2.18 ZIPDATA = '…', 2.19 and
// later zip_data='…' (an argument of _ansiballz_main).
var (
	marker   = []byte("_ANSIBALLZ_WRAPPER = True")
	zipForms = []struct{ open, close []byte }{
		{[]byte(`ZIPDATA = """`), []byte(`"""`)},
		{[]byte(`ZIPDATA = '`), []byte(`'`)},
		{[]byte(`zip_data='`), []byte(`'`)},
	}
)

// Bounds of a zip worth storing: smaller ones cost less to send than to
// track, larger ones would not fit in a call (package router's frame).
const (
	minZip = 4 << 10
	maxZip = 2 << 20
)

// Split splits a pipelined AnsiballZ payload around its zip. It takes
// only a payload that starts with "#!", has the wrapper's marker, and
// exactly one zip in one of the known forms, all base64: anything else
// is no such payload.
func Split(payload []byte) (prefix, zip, suffix []byte, ok bool) {
	if !bytes.HasPrefix(payload, []byte("#!")) || !bytes.Contains(payload, marker) {
		return nil, nil, nil, false
	}
	found := 0
	var start, end int
	for _, f := range zipForms {
		n := bytes.Count(payload, f.open)
		found += n
		if n != 1 {
			continue
		}
		start = bytes.Index(payload, f.open) + len(f.open)
		e := bytes.Index(payload[start:], f.close)
		if e < 0 {
			return nil, nil, nil, false
		}
		end = start + e
	}
	if found != 1 || end-start < minZip || end-start > maxZip || !isBase64(payload[start:end]) {
		return nil, nil, nil, false
	}
	return payload[:start], payload[start:end], payload[end:], true
}

// base64Alphabet marks the bytes of standard base64 and its padding: a
// table, because every module request scans its 100-200 KiB zip.
var base64Alphabet = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") {
		t[c] = true
	}
	return t
}()

func isBase64(b []byte) bool {
	for _, c := range b {
		if !base64Alphabet[c] {
			return false
		}
	}
	return true
}

// Zip is a payload's zip as it crosses the link: the binary its base64
// stands for, a quarter smaller, which the agent encodes again
// (exec.StdinPart.Base64), when the base64 is the standard encoding of
// it; else the base64 text itself.
type Zip struct {
	// Sum names it in the agent's module store.
	Sum  [sha256.Size]byte
	data []byte
	b64  bool
}

// NewZip is the zip whose base64 is text (Split's zip: the alphabet
// alone, no line breaks).
func NewZip(text []byte) Zip {
	// Strict: padding bits must be zero. With the padded length too, the
	// encoding of what it decodes to is text again, byte for byte.
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
	if n, err := base64.StdEncoding.Strict().Decode(raw, text); err == nil && base64.StdEncoding.EncodedLen(n) == len(text) {
		raw = raw[:n]
		return Zip{Sum: sha256.Sum256(raw), data: raw, b64: true}
	}
	return Zip{Sum: sha256.Sum256(text), data: text}
}

// Bytes is what an agent stores under Sum (modules.Put): the binary,
// or the base64 text when it is not a standard encoding. The caller
// must not change it.
func (z Zip) Bytes() []byte { return z.data }

// part is the zip's stdin part: by hash alone, or with its bytes
// (withZip) for an agent that may not have it. A module's zip is the
// same for every host and user: shared, so that the agent may serve it
// to its children (the wrapper, which holds the task's arguments, is
// not).
func (z Zip) part(withZip bool) exec.StdinPart {
	p := exec.StdinPart{SHA256: z.Sum[:], Base64: z.b64, Shared: true}
	if withZip {
		p.Data = z.data
	}
	return p
}

// StdinParts are the parts of a payload's stdin, the zip's second.
func StdinParts(prefix []byte, zip Zip, suffix []byte, withZip bool) []exec.StdinPart {
	return []exec.StdinPart{{Data: prefix}, zip.part(withZip), {Data: suffix}}
}

// A Wrapper is a payload's bytes before and after its zip, as stored on
// an agent under their hashes.
type Wrapper struct {
	prefix, suffix       []byte
	prefixSum, suffixSum [sha256.Size]byte
}

// NewWrapper is the wrapper of a payload split as prefix, zip, suffix
// (Split). It keeps copies: slices of the payload would keep its zip
// alive for as long as the wrapper is remembered.
func NewWrapper(prefix, suffix []byte) *Wrapper {
	prefix, suffix = bytes.Clone(prefix), bytes.Clone(suffix)
	return &Wrapper{prefix: prefix, suffix: suffix, prefixSum: sha256.Sum256(prefix), suffixSum: sha256.Sum256(suffix)}
}

// StdinParts are the parts of w's own payload's stdin, w's bytes sent
// with their hashes so that the agent stores them, and the index of the
// zip's part (exec.Python.ZipPart).
func (w *Wrapper) StdinParts(zip Zip, withZip bool) (parts []exec.StdinPart, zipPart int) {
	parts = StdinParts(w.prefix, zip, w.suffix, withZip)
	parts[0].SHA256 = w.prefixSum[:]
	parts[2].SHA256 = w.suffixSum[:]
	return parts, 1
}

// Delta are the parts of the stdin of a payload of the same zip as w's,
// its prefix and suffix each sent as what it shares with w's at its
// start and end (slices of w's, which the agent must hold) and the bytes
// between, when that is smaller than the bytes themselves; and the
// index of the zip's part.
func (w *Wrapper) Delta(prefix []byte, zip Zip, suffix []byte, withZip bool) (parts []exec.StdinPart, zipPart int) {
	parts = delta(nil, w.prefix, w.prefixSum, prefix)
	zipPart = len(parts)
	parts = append(parts, zip.part(withZip))
	return delta(parts, w.suffix, w.suffixSum, suffix), zipPart
}

// What a part costs on the wire beyond its data, about: a msgpack map of
// a hash, an offset and a length; of data alone.
const (
	slicePartCost = 56
	dataPartCost  = 8
)

// delta appends to parts those of cur as slices of ref (stored under
// sum) for the bytes they share at the start and the end, and cur's
// bytes between; or cur alone when that is smaller.
func delta(parts []exec.StdinPart, ref []byte, sum [sha256.Size]byte, cur []byte) []exec.StdinPart {
	lead := 0
	for lead < len(ref) && lead < len(cur) && ref[lead] == cur[lead] {
		lead++
	}
	trail := 0
	for n := min(len(ref), len(cur)) - lead; trail < n && ref[len(ref)-1-trail] == cur[len(cur)-1-trail]; {
		trail++
	}
	mid := cur[lead : len(cur)-trail]
	cost := 0
	if lead > 0 {
		cost += slicePartCost
	}
	if len(mid) > 0 {
		cost += dataPartCost + len(mid)
	}
	if trail > 0 {
		cost += slicePartCost
	}
	if cost >= dataPartCost+len(cur) {
		return append(parts, exec.StdinPart{Data: cur})
	}
	if lead > 0 {
		parts = append(parts, exec.StdinPart{SHA256: sum[:], Length: int64(lead)})
	}
	if len(mid) > 0 {
		parts = append(parts, exec.StdinPart{Data: mid})
	}
	if trail > 0 {
		parts = append(parts, exec.StdinPart{SHA256: sum[:], Offset: int64(len(ref) - trail), Length: int64(trail)})
	}
	return parts
}

// IsNotStored says that err is the agent's answer for a hash its module
// store lacks: nothing ran, and the bytes must be sent again.
func IsNotStored(err error) bool {
	return errors.Is(err, errkind.ErrNotFound) && strings.Contains(err.Error(), store.NotStored)
}

// Result is a module run's outcome: what Ansible's connection returns.
type Result struct {
	// ExitCode is the interpreter's exit status (128+N for a signal N).
	ExitCode int
	// Stdout holds the module's JSON result; Stderr what it wrote there.
	Stdout, Stderr []byte
}

// Run runs payload, a pipelined AnsiballZ module as ansible-core builds
// it, with interpreter (an absolute path) on c. The zip is named by
// hash first, and sent with the call only when c's agent lacks it (one
// call more, the first time). warm false runs a fresh interpreter even
// where a runner could.
func Run(ctx context.Context, c rpc.Caller, interpreter string, payload []byte, warm bool) (*Result, error) {
	prefix, zip, suffix, ok := Split(payload)
	if !ok {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "ansiballz: not a pipelined AnsiballZ payload (no single base64 zip of %d-%d bytes after the wrapper marker)", minZip, maxZip)
	}
	if !strings.HasPrefix(interpreter, "/") || strings.ContainsAny(interpreter, " \t\n'\"\\$`;&|<>()*?[]{}~") {
		return nil, errkind.Errorf(errkind.ErrBadArgs, "ansiballz: interpreter %q: want an absolute path with no shell characters", interpreter)
	}
	z := NewZip(zip)
	cmd := exec.Cmd{Shell: interpreter}
	if warm {
		cmd.Python = &exec.Python{Interpreter: interpreter, ZipPart: 1}
	}
	for _, withZip := range []bool{false, true} {
		cmd.StdinParts = StdinParts(prefix, z, suffix, withZip)
		res, err := run(ctx, c, cmd)
		if err != nil && !withZip && IsNotStored(err) {
			continue
		}
		return res, err
	}
	panic("unreachable")
}

func run(ctx context.Context, c rpc.Caller, cmd exec.Cmd) (*Result, error) {
	p, err := exec.Start(ctx, c, cmd)
	if err != nil {
		return nil, err
	}
	p.Stdin().Close()
	var out, errb bytes.Buffer
	cerr := p.CopyOutput(&out, &errb)
	res, err := p.Wait()
	if err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	code := res.ExitCode
	if res.Signal != "" {
		code = 255
		if n := unix.SignalNum(res.Signal); n != 0 {
			code = 128 + int(n)
		}
	}
	return &Result{ExitCode: code, Stdout: out.Bytes(), Stderr: errb.Bytes()}, nil
}
