// Package wire encodes and decodes Spindle's msgpack payloads.
//
// Payloads arrive from agents that may be hostile, and msgpack/v5 v5.4.1
// trusts the lengths it reads: an array header announcing 2^31 elements
// makes it allocate gigabytes before it notices the bytes are missing.
// Unmarshal therefore walks the whole encoding first and checks that every
// announced length fits in the bytes that remain (an element costs at least
// one byte), with a bound on nesting depth. msgpack/v5 also preallocates a
// slice's announced length, so n one-byte elements cost n times the size of
// the element type: Unmarshal, which knows the target type, refuses an array
// or map whose announced count times its element size exceeds 16 times its
// encoded size plus 4 KiB. Only then does msgpack decode it, and only
// into concrete types: never decode untrusted bytes into interface{}.
package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// MaxDepth bounds the nesting of arrays and maps in a payload.
const MaxDepth = 32

// ErrInvalid is wrapped by every validation failure.
var ErrInvalid = errors.New("invalid msgpack payload")

var encPool = sync.Pool{New: func() any {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("msgpack")
	enc.UseCompactInts(true)
	return &encoder{buf: &buf, enc: enc}
}}

type encoder struct {
	buf *bytes.Buffer
	enc *msgpack.Encoder
}

// Marshal encodes v. Structs are encoded as maps keyed by their msgpack tags.
func Marshal(v any) ([]byte, error) {
	e := encPool.Get().(*encoder)
	e.buf.Reset()
	err := e.enc.Encode(v)
	out := append([]byte(nil), e.buf.Bytes()...)
	if e.buf.Cap() <= 64<<10 {
		encPool.Put(e)
	}
	return out, err
}

// Unmarshal validates data and decodes it into v, which must point to a
// concrete type. Trailing bytes are an error.
func Unmarshal(data []byte, v any) error {
	c := checker{b: data}
	if err := c.value(0, reflect.TypeOf(v)); err != nil {
		return fmt.Errorf("%w: at byte %d: %v", ErrInvalid, c.off, err)
	}
	if c.off != len(data) {
		return fmt.Errorf("%w: %d trailing bytes", ErrInvalid, len(data)-c.off)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	dec.SetCustomStructTag("msgpack")
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// Validate checks that data starts with one well-formed msgpack value whose
// every announced length fits in data, and returns its encoded length.
func Validate(data []byte) (int, error) {
	c := checker{b: data}
	if err := c.value(0, nil); err != nil {
		return 0, fmt.Errorf("%w: at byte %d: %v", ErrInvalid, c.off, err)
	}
	return c.off, nil
}

type checker struct {
	b   []byte
	off int
}

// Expansion bound: msgpack/v5 allocates a slice's announced length up
// front (and a map's, up to 10^6 entries), so n one-byte nils decoded into
// a slice of T cost n*sizeof(T). When the target type is known, an array
// or map may announce at most (maxExpansion*its encoded size +
// expansionSlack) bytes of elements.
const (
	maxExpansion   = 16
	expansionSlack = 4 << 10
)

var errExpansion = errors.New("container would expand too much in memory")

var structFields sync.Map // reflect.Type → map[string]reflect.Type

// fieldTypes maps a struct's msgpack keys to its fields' types, the way
// msgpack/v5 names them (tag name, else field name; anonymous structs
// without a tag name are inlined).
func fieldTypes(t reflect.Type) map[string]reflect.Type {
	if m, ok := structFields.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	var add func(t reflect.Type, depth int)
	add = func(t reflect.Type, depth int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("msgpack")
			name, _, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && name == "" && ft.Kind() == reflect.Struct && depth < 4 {
				add(ft, depth+1)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := m[name]; !dup {
				m[name] = f.Type
			}
		}
	}
	add(t, 0)
	structFields.Store(t, m)
	return m
}

// peekString returns the string at the cursor, if there is one.
func (c *checker) peekString() (string, bool) {
	if c.left() < 1 {
		return "", false
	}
	t := c.b[c.off]
	var n, hdr int
	switch {
	case t >= 0xa0 && t <= 0xbf:
		n, hdr = int(t&0x1f), 1
	case t == 0xd9 && c.left() >= 2:
		n, hdr = int(c.b[c.off+1]), 2
	case t == 0xda && c.left() >= 3:
		n, hdr = int(binary.BigEndian.Uint16(c.b[c.off+1:])), 3
	default:
		return "", false
	}
	if c.left() < hdr+n {
		return "", false
	}
	return string(c.b[c.off+hdr : c.off+hdr+n]), true
}

var errShort = errors.New("announced length exceeds the bytes left")

func (c *checker) left() int { return len(c.b) - c.off }

func (c *checker) skip(n uint64) error {
	if n > uint64(c.left()) {
		return errShort
	}
	c.off += int(n)
	return nil
}

func (c *checker) readN(n int) (uint64, error) {
	if c.left() < n {
		return 0, errShort
	}
	s := c.b[c.off : c.off+n]
	c.off += n
	switch n {
	case 1:
		return uint64(s[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(s)), nil
	default:
		return uint64(binary.BigEndian.Uint32(s)), nil
	}
}

func (c *checker) value(depth int, typ reflect.Type) error {
	for typ != nil && typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if depth > MaxDepth {
		return fmt.Errorf("nesting deeper than %d", MaxDepth)
	}
	if c.left() < 1 {
		return errShort
	}
	t := c.b[c.off]
	c.off++
	if isExt(t) && typ != nil && typ.Kind() == reflect.Map {
		// msgpack/v5 decodes a map from an ext value by skipping the ext
		// header and reading the map from its body, whose lengths this
		// walk took for opaque bytes: a forged count there made it
		// allocate up to a million entries. No Spindle payload wraps a
		// map in an ext.
		return fmt.Errorf("an ext value (type byte 0x%02x) where a map is expected", t)
	}
	switch {
	case t <= 0x7f, t >= 0xe0, t == 0xc0, t == 0xc2, t == 0xc3:
		return nil // fixint, negative fixint, nil, false, true
	case t >= 0x80 && t <= 0x8f:
		return c.items(uint64(t&0x0f), depth, typ, true)
	case t >= 0x90 && t <= 0x9f:
		return c.items(uint64(t&0x0f), depth, typ, false)
	case t >= 0xa0 && t <= 0xbf:
		return c.skip(uint64(t & 0x1f))
	}
	switch t {
	case 0xc4, 0xd9: // bin8, str8
		return c.lenThenSkip(1, 0)
	case 0xc5, 0xda:
		return c.lenThenSkip(2, 0)
	case 0xc6, 0xdb:
		return c.lenThenSkip(4, 0)
	case 0xc7: // ext8: len, type, data
		return c.lenThenSkip(1, 1)
	case 0xc8:
		return c.lenThenSkip(2, 1)
	case 0xc9:
		return c.lenThenSkip(4, 1)
	case 0xca, 0xce, 0xd2: // float32, uint32, int32
		return c.skip(4)
	case 0xcb, 0xcf, 0xd3:
		return c.skip(8)
	case 0xcc, 0xd0:
		return c.skip(1)
	case 0xcd, 0xd1:
		return c.skip(2)
	case 0xd4:
		return c.skip(2)
	case 0xd5:
		return c.skip(3)
	case 0xd6:
		return c.skip(5)
	case 0xd7:
		return c.skip(9)
	case 0xd8:
		return c.skip(17)
	case 0xdc:
		n, err := c.readN(2)
		if err != nil {
			return err
		}
		return c.items(n, depth, typ, false)
	case 0xdd:
		n, err := c.readN(4)
		if err != nil {
			return err
		}
		return c.items(n, depth, typ, false)
	case 0xde:
		n, err := c.readN(2)
		if err != nil {
			return err
		}
		return c.items(n, depth, typ, true)
	case 0xdf:
		n, err := c.readN(4)
		if err != nil {
			return err
		}
		return c.items(n, depth, typ, true)
	}
	return fmt.Errorf("type byte 0x%02x is never used", t)
}

// isExt reports whether t starts a msgpack ext value (fixext or ext).
func isExt(t byte) bool { return (t >= 0xc7 && t <= 0xc9) || (t >= 0xd4 && t <= 0xd8) }

func (c *checker) lenThenSkip(width int, extra uint64) error {
	n, err := c.readN(width)
	if err != nil {
		return err
	}
	return c.skip(n + extra)
}

// items checks n nested values (n entries of two values for a map); every
// value costs at least one byte, so an n larger than the bytes left is
// refused before looking at any of them. typ, when known, is the type the
// container decodes into.
func (c *checker) items(n uint64, depth int, typ reflect.Type, isMap bool) error {
	values := n
	if isMap {
		values = 2 * n
	}
	if values > uint64(c.left()) {
		return errShort
	}
	var elem, key reflect.Type
	var fields map[string]reflect.Type
	var perElem uint64
	if typ != nil {
		switch k := typ.Kind(); {
		case k == reflect.Slice && !isMap && typ.Elem().Kind() != reflect.Uint8:
			elem, perElem = typ.Elem(), uint64(typ.Elem().Size())
		case k == reflect.Array && !isMap:
			elem = typ.Elem()
		case k == reflect.Map && isMap:
			key, elem = typ.Key(), typ.Elem()
			// Key, value and Go's per-entry overhead.
			perElem = uint64(key.Size()+elem.Size()) + 8
		case k == reflect.Struct && isMap:
			fields = fieldTypes(typ)
		case k == reflect.Interface:
			// Decoding into interfaces makes []any and map[string]any.
			key, elem, perElem = typ, typ, 16
			if isMap {
				perElem = 48
			}
		}
	}
	start := c.off
	for i := uint64(0); i < n; i++ {
		if isMap {
			var vt reflect.Type
			if fields != nil {
				if name, ok := c.peekString(); ok {
					vt = fields[name]
				}
			}
			if err := c.value(depth+1, key); err != nil {
				return err
			}
			if fields == nil {
				vt = elem
			}
			if err := c.value(depth+1, vt); err != nil {
				return err
			}
			continue
		}
		if err := c.value(depth+1, elem); err != nil {
			return err
		}
	}
	if perElem > 0 && n*perElem > maxExpansion*uint64(c.off-start)+expansionSlack {
		return fmt.Errorf("%w: %d elements of %d bytes in %d bytes", errExpansion, n, perElem, c.off-start)
	}
	return nil
}
