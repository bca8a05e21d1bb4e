package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/worker"
)

// maxNameLen bounds tool names, verifiers and idempotency keys.
const maxNameLen = 256

// checkWorker validates --worker (which may come from WRIT_WORKER).
func (g *globals) checkWorker() error {
	if g.Worker == "" {
		return usageErr("--worker is required (or set %s)", EnvWorker)
	}
	return checkID("--worker", g.Worker)
}

// checkConn validates the connection flags that can be checked offline.
func (g *globals) checkConn() error {
	if g.Conn.Timeout <= 0 {
		return usageErr("--timeout must be positive, got %v", g.Conn.Timeout)
	}
	return nil
}

// checkID validates an id flag with api.ValidID.
func checkID(flag, v string) error {
	if err := api.ValidID(v); err != nil {
		return usageErr("%s: %v", flag, strings.TrimPrefix(err.Error(), api.ErrBadToken.Error()+": "))
	}
	return nil
}

// checkName validates a free-form name (tool, verifier, idempotency key):
// non-empty, bounded, printable, no spaces.
func checkName(flag, v string) error {
	if v == "" {
		return usageErr("%s must not be empty", flag)
	}
	if len(v) > maxNameLen {
		return usageErr("%s is %d bytes, longer than %d", flag, len(v), maxNameLen)
	}
	for _, r := range v {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return usageErr("%s %q contains %q (no spaces or control characters)", flag, v, r)
		}
	}
	return nil
}

// argsInput is the --args / --args-file pair.
type argsInput struct {
	inline string
	file   string
}

func (a *argsInput) given() int {
	n := 0
	if a.inline != "" {
		n++
	}
	if a.file != "" {
		n++
	}
	return n
}

// read returns the canonical JSON of the tool arguments, from --args or
// --args-file (a path, or - for stdin). The issuer canonicalizes again; doing
// it here rejects malformed arguments before anything is sent.
func (a *argsInput) read(stdin io.Reader) (json.RawMessage, error) {
	flag, raw := "--args", []byte(a.inline)
	if a.file != "" {
		flag = "--args-file"
		var r io.Reader
		if a.file == "-" {
			r = stdin
		} else {
			f, err := os.Open(a.file)
			if err != nil {
				return nil, usageErr("--args-file: %v", err)
			}
			defer f.Close()
			r = f
		}
		b, err := io.ReadAll(io.LimitReader(r, args.MaxBytes+1))
		if err != nil {
			return nil, usageErr("--args-file %s: %v", a.file, err)
		}
		if len(b) > args.MaxBytes {
			// Count the rest (up to a bound) to state the real size.
			rest, _ := io.Copy(io.Discard, io.LimitReader(r, maxCountedArgs))
			size := fmt.Sprintf("%d bytes", int64(len(b))+rest)
			if rest == maxCountedArgs {
				size = fmt.Sprintf("more than %d bytes", int64(len(b))+rest)
			}
			return nil, usageErr("--args-file %s: the arguments are %s; the limit is %d bytes", a.file, size, args.MaxBytes)
		}
		raw = b
	}
	if len(raw) > args.MaxBytes {
		return nil, usageErr("%s: the arguments are %d bytes; the limit is %d bytes", flag, len(raw), args.MaxBytes)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, usageErr("%s: empty; give the tool arguments as a JSON value (e.g. '{}')", flag)
	}
	c, err := args.CanonicalJSON(raw)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), args.ErrCanonical.Error()+": ")
		if msg == "EOF" || msg == "unexpected EOF" {
			msg = "unexpected end of input"
		}
		if strings.Contains(msg, "exceeds limit") {
			return nil, usageErr("%s: %s", flag, msg) // too large, not malformed
		}
		return nil, usageErr("%s: not valid JSON arguments: %s", flag, msg)
	}
	return c, nil
}

// maxCountedArgs bounds how much of an oversized --args-file is read to
// state its size.
const maxCountedArgs = 64 << 20

// newKey returns k, or a fresh idempotency key when k is empty. The CLI
// picks the key itself so it can name it when the issuer does not answer.
func newKey(k string) string {
	if k != "" {
		return k
	}
	return client.NewKey()
}

// call runs one request inside the --timeout deadline and reports its
// answer: the envelope on stdout, a human line on stderr for anything but a
// clean permit, and the exit code as the returned error.
func (g *globals) call(ctx context.Context, key string, do func(context.Context, *client.Client) (grants.Envelope, error)) error {
	ctx, cancel := context.WithTimeout(ctx, g.Conn.Timeout)
	defer cancel()
	c, nc, err := g.Client(ctx)
	if err != nil {
		return g.unavailable(err, key)
	}
	defer nc.Close()
	env, err := do(ctx, c)
	if err != nil {
		if errors.Is(err, client.ErrUnavailable) {
			err = g.Conn.NoAnswer(err) // NATS was up: say so
		}
		return g.unavailable(err, key)
	}
	return g.report(env)
}

// report prints env and maps its decision to an exit code.
func (g *globals) report(env grants.Envelope) error {
	if err := g.print(env); err != nil {
		fmt.Fprintf(g.Stderr, "worker-agent: writing the envelope: %v\n", err)
	}
	switch env.Decision {
	case grants.Permit:
		if env.Reason != grants.ReasonNone {
			// A recorded answer that still needs attention, e.g. a
			// contested effect.
			fmt.Fprintln(g.Stderr, refusalLine("note", env))
		}
		return nil
	case grants.Deny:
		fmt.Fprintln(g.Stderr, refusalLine("denied", env))
		g.detail(env)
		return &worker.ExitError{Code: ExitDeny}
	case grants.ApprovalRequired:
		fmt.Fprintln(g.Stderr, refusalLine("approval required", env))
		g.detail(env)
		return &worker.ExitError{Code: ExitApproval}
	}
	return &worker.ExitError{Code: ExitUnavailable, Err: fmt.Errorf("the issuer answered with unknown decision %q; do not proceed", env.Decision)}
}

// refusalLine renders the human summary of an envelope, e.g.
// "denied: already_spent (missing: unspent) — next: reconcile_consumption".
func refusalLine(prefix string, env grants.Envelope) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString(": ")
	switch {
	case env.Reason != grants.ReasonNone:
		b.WriteString(string(env.Reason))
	case env.Decision == grants.ApprovalRequired:
		b.WriteString("review")
	default:
		b.WriteString("unspecified")
	}
	if env.ReviewID != "" {
		b.WriteString(" [review " + env.ReviewID + "]")
	}
	rule := harness.DecidingRule(env)
	if rule != "" {
		b.WriteString(" [rule " + rule + "]")
	}
	if env.Missing != "" && (rule == "" || !harness.GenericMissing(env.Missing)) {
		b.WriteString(" (missing: " + env.Missing + ")")
	}
	rec := env.Recovery
	if rec == "" {
		rec = grants.RecoveryFor(env.Reason)
	}
	if env.Decision == grants.ApprovalRequired && env.Recovery == "" && env.Reason == grants.ReasonNone {
		b.WriteString(" — do not run the call until the review is decided")
		return b.String()
	}
	b.WriteString(" — next: " + string(rec))
	return b.String()
}

func (g *globals) detail(env grants.Envelope) {
	if env.Detail != "" {
		fmt.Fprintf(g.Stderr, "  detail: %s\n", env.Detail)
	}
}

// unavailable reports that nothing is known (exit 3). stdout still gets an
// envelope (deny / issuer_unavailable, with no receipt sequence: it is this
// program's verdict, not the issuer's) so scripts always parse one object.
func (g *globals) unavailable(err error, key string) error {
	var ee *worker.ExitError
	if errors.As(err, &ee) {
		return ee
	}
	if errors.Is(err, connect.ErrBadURL) {
		return &worker.ExitError{Code: ExitUsage, Err: err} // nothing was sent
	}
	env := grants.Refuse(grants.ReasonIssuerUnavail, "issuer answer", "worker-agent: "+err.Error())
	_ = g.print(env)
	msg := "issuer unavailable: nothing is known, do not proceed"
	if key != "" {
		msg += "; re-run with --idempotency-key " + key + " to get the original answer"
	}
	fmt.Fprintf(g.Stderr, "worker-agent: %v\n%s — next: %s\n", err, msg, env.Recovery)
	return &worker.ExitError{Code: ExitUnavailable}
}

// print writes env as one JSON line, or indented with --pretty.
func (g *globals) print(env grants.Envelope) error {
	enc := json.NewEncoder(g.Stdout)
	enc.SetEscapeHTML(false)
	if g.Pretty {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(env)
}
