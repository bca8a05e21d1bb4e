package natsbus

import (
	"fmt"
	"sync"
)

// serverLogger adapts a printf function to nats-server's Logger and records
// the first fatal message. nats-server logs a fatal error (a port in use,
// JetStream unable to start) and stops starting up; it does not exit the
// process unless its own logger does, and this one never does.
type serverLogger struct {
	logf func(format string, args ...any)

	mu    sync.Mutex
	fatal string
	dead  bool
}

func newServerLogger(logf func(format string, args ...any)) *serverLogger {
	return &serverLogger{logf: logf}
}

func (l *serverLogger) fatalMessage() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal, l.dead
}

func (l *serverLogger) log(level, format string, args []any) {
	if l.logf != nil {
		l.logf(level+" "+format, args...)
	}
}

func (l *serverLogger) Noticef(format string, v ...any) { l.log("[INF]", format, v) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.log("[WRN]", format, v) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.log("[ERR]", format, v) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.log("[DBG]", format, v) }
func (l *serverLogger) Tracef(format string, v ...any)  { l.log("[TRC]", format, v) }

func (l *serverLogger) Fatalf(format string, v ...any) {
	l.log("[FTL]", format, v)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.dead {
		l.dead = true
		l.fatal = fmt.Sprintf(format, v...)
	}
}
