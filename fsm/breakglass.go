package fsm

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// MaxBreakGlassTTL bounds a break-glass case's lifetime.
const MaxBreakGlassTTL = int64(api.MaxBreakGlassTTLMillis) * int64(time.Millisecond)

// decideBreakGlass records an operator's break-glass case: for its
// lifetime, auditors may show the payloads of one worker's receipts. It
// is evidence only: nothing the issuer decides depends on it, so it
// changes no state but the chain and the clock (the case lives in the
// receipt stream, where auditors read it), and no snapshot section holds
// it. Below receipt format level 6 it is refused and records nothing
// (auditors of earlier builds do not know its kind).
func decideBreakGlass(s *State, now int64, node string, c *Command) verdict {
	refuse := func(missing, format string, a ...any) verdict {
		return reply(grants.Refuse(grants.ReasonInvalidRequest, missing, fmt.Sprintf(format, a...)))
	}
	if !s.WritesBreakGlass() {
		return reply(grants.Refuse(grants.ReasonUnknownVersion, "receipt format",
			fmt.Sprintf("break-glass cases are written from receipt format %d; the format is %d (every voter must run a build that writes it)", ReceiptFormatBreakGlass, s.ReceiptFormat())))
	}
	worker, err := api.ParseBreakGlassScope(c.GlassScope)
	switch {
	case c.Caller == "":
		return refuse("operator", "a break-glass case names no operator")
	case !api.IsValidID(c.CaseID):
		return refuse("case_id", "a case id is 1-%d of letters, digits, - and _", api.MaxIDLen)
	case err != nil:
		return refuse("scope", "%v", err)
	case c.TTL <= 0 || c.TTL > MaxBreakGlassTTL:
		return refuse("ttl", "a case lasts more than 0 and at most %s", time.Duration(MaxBreakGlassTTL))
	case c.Note == "" || len(c.Note) > api.MaxBreakGlassReason || !utf8.ValidString(c.Note):
		return refuse("reason", "a case needs a reason of 1-%d bytes of UTF-8", api.MaxBreakGlassReason)
	}
	e := base(events.KindBreakGlass, now, node, c)
	e.Decision = string(grants.Permit)
	e.Worker = worker
	e.CaseID, e.GlassScope = c.CaseID, c.GlassScope
	e.IssuedAt, e.ExpiresAt = now, AddSat(now, c.TTL)
	e.Detail = c.Note
	return record(e)
}
