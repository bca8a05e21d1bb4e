package fsm

import (
	"fmt"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// decideRefusalSummary records the count of one worker's requests that the
// leader's admission control refused (rate_limited) over a window without
// proposing them: one receipt stands for all of them, so that a worker
// flooding refused requests costs one log entry and one receipt per window
// while the evidence survives as a count. The summary is a refusal: it
// changes no state but the chain and the clock. Below receipt format
// level 3 it is refused and records nothing (auditors of earlier builds
// do not know its kind).
func decideRefusalSummary(s *State, now int64, node string, c *Command) verdict {
	switch {
	case !s.WritesSummaries():
		return reply(grants.Refuse(grants.ReasonUnknownVersion, "receipt format",
			fmt.Sprintf("refusal summaries are written from receipt format %d; the format is %d", ReceiptFormatSummaries, s.ReceiptFormat())))
	case c.Key == "":
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "worker", "a refusal summary names no worker"))
	case c.Amount == 0:
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "count", "a refusal summary counts nothing"))
	case c.Until < c.Since:
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "window", "a refusal summary's window ends before it starts"))
	}
	e := base(events.KindRefusalSummary, now, node, c)
	e.Worker = c.Key
	e.Tool = c.Tool
	e.Amount = c.Amount
	e.IssuedAt, e.ExpiresAt = c.Since, c.Until
	what := "requests"
	if c.Tool != "" {
		what = c.Tool + " requests"
	}
	return record(deny(e, grants.ReasonRateLimited, "admission",
		fmt.Sprintf("worker %s: %d %s refused as %s between %s and %s", c.Key, c.Amount, what, grants.ReasonRateLimited,
			time.Unix(0, c.Since).UTC().Format(time.RFC3339Nano), time.Unix(0, c.Until).UTC().Format(time.RFC3339Nano))))
}
