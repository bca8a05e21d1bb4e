package raftnode

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// SlogLogger returns an hclog.Logger that writes through lg, so that
// raft's own lines (elections, snapshots, transport) come out in the same
// format and stream as the rest of the process's log. Start sets its level
// from Config.LogLevel; lines below it are dropped before they reach lg,
// whose handler filters again by its own level. Each line carries the
// logger's name ("raft", "raft.snapshots") as the attribute "logger".
func SlogLogger(lg *slog.Logger) hclog.Logger {
	l := &slogLogger{lg: lg, name: "raft", level: new(atomic.Int32)}
	l.level.Store(int32(hclog.Info))
	return l
}

type slogLogger struct {
	lg      *slog.Logger
	name    string
	implied []any
	level   *atomic.Int32 // hclog.Level, shared by the loggers derived from one root
}

var _ hclog.Logger = (*slogLogger)(nil)

// slogLevel maps an hclog level onto slog's (trace below debug).
func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (l *slogLogger) enabled(level hclog.Level) bool {
	min := hclog.Level(l.level.Load())
	if min == hclog.NoLevel {
		min = hclog.DefaultLevel
	}
	return min != hclog.Off && level >= min && l.lg.Enabled(context.Background(), slogLevel(level))
}

func (l *slogLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || !l.enabled(level) {
		return
	}
	attrs := make([]any, 0, 2+len(l.implied)+len(args))
	attrs = append(attrs, "logger", l.name)
	attrs = append(attrs, l.implied...)
	attrs = append(attrs, normalize(args)...)
	l.lg.Log(context.Background(), slogLevel(level), msg, attrs...)
}

// reservedKeys are attributes the process's own handler puts on every line
// (the node id, raft term and applied index, the logger name); raft's
// arguments of the same name are renamed raft_<key>, so that no line
// carries one key twice.
var reservedKeys = map[string]bool{"node": true, "term": true, "index": true, "logger": true}

// normalize turns hclog's key-value list into slog's: keys become strings,
// values are written as hclog writes them (a Stringer or an error as its
// text, not as a JSON object of its fields), and an odd trailing value
// gets hclog's key, EXTRA_VALUE_AT_END.
func normalize(args []any) []any {
	out := make([]any, 0, len(args)+1)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			out = append(out, hclog.MissingKey, value(args[i]))
			break
		}
		k, ok := args[i].(string)
		if !ok {
			k = fmt.Sprint(args[i])
		}
		if reservedKeys[k] {
			k = "raft_" + k
		}
		out = append(out, k, value(args[i+1]))
	}
	return out
}

// value is v as hclog would print it.
func value(v any) any {
	switch t := v.(type) {
	case error:
		return t.Error()
	case fmt.Stringer:
		return t.String()
	}
	return v
}

func (l *slogLogger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *slogLogger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *slogLogger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *slogLogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *slogLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *slogLogger) IsTrace() bool { return l.enabled(hclog.Trace) }
func (l *slogLogger) IsDebug() bool { return l.enabled(hclog.Debug) }
func (l *slogLogger) IsInfo() bool  { return l.enabled(hclog.Info) }
func (l *slogLogger) IsWarn() bool  { return l.enabled(hclog.Warn) }
func (l *slogLogger) IsError() bool { return l.enabled(hclog.Error) }

func (l *slogLogger) ImpliedArgs() []any { return append([]any(nil), l.implied...) }

func (l *slogLogger) With(args ...any) hclog.Logger {
	c := *l
	c.implied = append(append([]any(nil), l.implied...), normalize(args)...)
	return &c
}

func (l *slogLogger) Name() string { return l.name }

func (l *slogLogger) Named(name string) hclog.Logger {
	c := *l
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (l *slogLogger) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	return &c
}

func (l *slogLogger) SetLevel(level hclog.Level) { l.level.Store(int32(level)) }

func (l *slogLogger) GetLevel() hclog.Level { return hclog.Level(l.level.Load()) }

func (l *slogLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

func (l *slogLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return stdWriter{l: l, level: level}
}

// stdWriter feeds a standard library logger's lines into the logger.
type stdWriter struct {
	l     *slogLogger
	level hclog.Level
}

func (w stdWriter) Write(p []byte) (int, error) {
	w.l.Log(w.level, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
