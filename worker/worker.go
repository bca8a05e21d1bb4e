// Package worker owns a worker's side of writ: the hooks, MCP proxy and sidecar that ask the issuer before each tool call.
package worker

import (
	"fmt"
	"io"

	"github.com/writ-dev/writ/connect"
)

// EnvWorker supplies the worker id when --worker is not given.
const EnvWorker = "WRIT_WORKER"

// ExitUsage is the exit code of a usage error: bad flags, ids, arguments
// or configuration; nothing was sent.
const ExitUsage = 2

// Agent is one worker's connection settings and the streams a command
// reads and writes.
type Agent struct {
	Conn   connect.Options
	Worker string // the worker id: the NATS subject writ.api.<worker>.<op>
	Pretty bool   // indent printed JSON

	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// HardExit, when set, ends the process if a hook overruns its
	// deadline however it got stuck; in-process tests leave it nil.
	HardExit func(code int)

	// HookRunner, when set, lets the sidecar run hooks for writ-hook in
	// its own process (hookrun.go).
	HookRunner HookRunner

	hosted *hostedHook // the sidecar's run of this hook, if it is one
}

// ExitError carries a process exit code. Whatever the user should see has
// been written by the time one is returned, except Err, which the command
// prints.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Usagef reports a usage error (ExitUsage).
func Usagef(format string, a ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, a...)}
}
