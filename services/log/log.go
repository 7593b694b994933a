// Package log forwards an agent's log records to the controller over the
// bus (router.HandleLog), so that `-vvv` on the controller shows what every
// agent in the tree did, tagged with the context it came from. The
// controller treats them as text from the far end: escaped, and
// rate-limited per context.
package log

import (
	"strings"
	"sync"
	"time"

	"github.com/spindle-rpc/spindle/internal/printable"
	"github.com/spindle-rpc/spindle/internal/ratelimit"
	"github.com/spindle-rpc/spindle/internal/wire"
	"github.com/spindle-rpc/spindle/router"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Record is one forwarded log entry.
type Record struct {
	Level  int8   `msgpack:"l"`
	Time   int64  `msgpack:"t"`
	Logger string `msgpack:"n,omitempty"`
	Msg    string `msgpack:"m"`
	Fields string `msgpack:"f,omitempty"` // JSON object of the entry's fields
}

// Sender is the part of a router the forwarding core needs.
type Sender interface {
	Send(*router.Message) error
}

// NewCore returns a zap core that sends entries at or above level to the
// controller through rt. A record that cannot be sent is dropped.
func NewCore(rt Sender, level zapcore.LevelEnabler) zapcore.Core {
	return &core{LevelEnabler: level, rt: rt, enc: zapcore.NewJSONEncoder(zapcore.EncoderConfig{})}
}

type core struct {
	zapcore.LevelEnabler
	rt     Sender
	enc    zapcore.Encoder
	fields []zapcore.Field
}

func (c *core) With(fields []zapcore.Field) zapcore.Core {
	cc := *c
	cc.fields = append(append([]zapcore.Field{}, c.fields...), fields...)
	return &cc
}

func (c *core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *core) Write(e zapcore.Entry, fields []zapcore.Field) error {
	buf, err := c.enc.EncodeEntry(zapcore.Entry{}, append(append([]zapcore.Field{}, c.fields...), fields...))
	if err != nil {
		return err
	}
	rec := Record{Level: int8(e.Level), Time: e.Time.UnixNano(), Logger: e.LoggerName, Msg: e.Message, Fields: strings.TrimSpace(buf.String())}
	buf.Free()
	data, err := wire.Marshal(&rec)
	if err != nil {
		return err
	}
	return c.rt.Send(&router.Message{Dst: router.ControllerID, Handle: router.HandleLog, Data: data})
}

func (c *core) Sync() error { return nil }

// The bounds on the records shown per agent: a burst of RecordBurst at
// once, RecordRate a second on average. A flood beyond them (a broken
// agent, or a hostile one) is dropped and counted, and one summary line
// per ReportInterval says how many: "web1: 12,345 log records dropped
// (more than 100/s)".
const (
	RecordRate     = 100
	RecordBurst    = 1000
	ReportInterval = 5 * time.Second
)

// ReceiveOptions adjust how the controller shows forwarded records.
type ReceiveOptions struct {
	// Raw shows records as the agent sent them. By default their message
	// and fields have every control character (newline included) and
	// invalid UTF-8 escaped (printable.Line), so that a record can neither
	// retitle the user's window, erase or move over earlier output, nor
	// forge a line of its own. Records are rate-limited either way.
	Raw bool
	// Clock times the rate limit (default the system's; tests pass a
	// fake one).
	Clock ratelimit.Clock
}

// Receive installs the controller's receiver for forwarded records: each is
// written to log with the name of the context it came from, made printable
// unless opts.Raw, at most RecordRate a second (after a RecordBurst) per
// context.
func Receive(rt *router.Router, log *zap.Logger, opts ReceiveOptions) {
	rc := newReceiver(log, opts, rt.Name)
	rt.Register(router.HandleLog, router.Receiver{Accept: router.AcceptChildren, Deliver: func(m *router.Message) {
		rc.deliver(m.Src, m.Data)
	}})
	rt.OnRouteLoss(func(loss router.RouteLoss) { rc.forget(loss.IDs) })
}

// receiver turns forwarded records into log lines.
type receiver struct {
	log  *zap.Logger
	opts ReceiveOptions
	name func(id uint32) string

	mu     sync.Mutex
	limits map[uint32]*ratelimit.Limiter // by source context
}

func newReceiver(log *zap.Logger, opts ReceiveOptions, name func(uint32) string) *receiver {
	return &receiver{log: log, opts: opts, name: name, limits: map[uint32]*ratelimit.Limiter{}}
}

func (rc *receiver) deliver(src uint32, data []byte) {
	var rec Record
	if err := wire.Unmarshal(data, &rec); err != nil {
		if rc.limit(src).Allow() {
			rc.log.Warn("malformed log record", zap.String("context", rc.name(src)), zap.Error(err))
		}
		return
	}
	lvl := zapcore.Level(rec.Level)
	if lvl < zapcore.DebugLevel || lvl > zapcore.FatalLevel {
		lvl = zapcore.ErrorLevel
	}
	if lvl > zapcore.ErrorLevel {
		lvl = zapcore.ErrorLevel // an agent's fatal must not end the controller
	}
	// Only records that would be shown spend the budget.
	ce := rc.log.Check(lvl, rec.Msg)
	if ce == nil || !rc.limit(src).Allow() {
		return
	}
	msg, recFields := rec.Msg, rec.Fields
	if !rc.opts.Raw {
		msg, recFields = printable.Line(msg), printable.Line(recFields)
	}
	ce.Message = msg
	ce.Time = time.Unix(0, rec.Time)
	fields := []zap.Field{zap.String("context", rc.name(src))}
	if recFields != "" && recFields != "{}" {
		fields = append(fields, zap.String("fields", recFields))
	}
	ce.Write(fields...)
}

// limit returns src's limiter, made on its first record.
func (rc *receiver) limit(src uint32) *ratelimit.Limiter {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	l := rc.limits[src]
	if l == nil {
		name := rc.name(src)
		l = ratelimit.New(RecordRate, RecordBurst, ReportInterval, rc.opts.Clock, func(n uint64) {
			rc.log.Warn(name+": "+l.Summary(n, "log records"), zap.String("context", name), zap.Uint64("dropped", n))
		})
		rc.limits[src] = l
	}
	return l
}

// forget reports what the limiters of contexts that are gone dropped, and
// lets them go.
func (rc *receiver) forget(ids []uint32) {
	var gone []*ratelimit.Limiter
	rc.mu.Lock()
	for _, id := range ids {
		if l := rc.limits[id]; l != nil {
			gone = append(gone, l)
			delete(rc.limits, id)
		}
	}
	rc.mu.Unlock()
	for _, l := range gone {
		l.Close()
	}
}

// LevelFor maps a -v count to a level, like Ansible's -vvv: warnings by
// default, -v info, -vv and more debug. The controller and every agent use
// the same mapping, so one -vv shows the whole tree at debug.
func LevelFor(verbosity int) zapcore.Level {
	switch {
	case verbosity >= 2:
		return zapcore.DebugLevel
	case verbosity == 1:
		return zapcore.InfoLevel
	}
	return zapcore.WarnLevel
}
