// Package log forwards an agent's log records to the controller over the
// bus (router.HandleLog), so that `-vvv` on the controller shows what every
// agent in the tree did, tagged with the context it came from.
package log

import (
	"strings"
	"time"

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

// Receive installs the controller's receiver for forwarded records: each is
// written to log with the name of the context it came from.
func Receive(rt *router.Router, log *zap.Logger) {
	rt.Register(router.HandleLog, router.Receiver{Accept: router.AcceptChildren, Deliver: func(m *router.Message) {
		var rec Record
		if err := wire.Unmarshal(m.Data, &rec); err != nil {
			log.Warn("malformed log record", zap.String("context", rt.Name(m.Src)), zap.Error(err))
			return
		}
		lvl := zapcore.Level(rec.Level)
		if lvl < zapcore.DebugLevel || lvl > zapcore.FatalLevel {
			lvl = zapcore.ErrorLevel
		}
		if lvl > zapcore.ErrorLevel {
			lvl = zapcore.ErrorLevel // an agent's fatal must not end the controller
		}
		if ce := log.Check(lvl, rec.Msg); ce != nil {
			ce.Time = time.Unix(0, rec.Time)
			fields := []zap.Field{zap.String("context", rt.Name(m.Src))}
			if rec.Fields != "" && rec.Fields != "{}" {
				fields = append(fields, zap.String("fields", rec.Fields))
			}
			ce.Write(fields...)
		}
	}})
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
