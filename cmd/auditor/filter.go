package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/writ-dev/writ/events"
)

// filterFlags are the receipt filters tail takes.
type filterFlags struct {
	worker, lane, kinds, reasons, grant, since string
}

func (f *filterFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.worker, "worker", "", "only receipts of this worker")
	fs.StringVar(&f.lane, "lane", "", "only receipts in this lane (a grant's attempt, effects and refusals take its permit's lane)")
	fs.StringVar(&f.kinds, "kind", "", "only these kinds, comma-separated ("+strings.Join(kindNames(), ",")+")")
	fs.StringVar(&f.reasons, "reason", "", "only receipts with one of these reasons, comma-separated (worker_revoked,denied_by_policy,...)")
	fs.StringVar(&f.grant, "grant", "", "only receipts of this grant id")
	fs.StringVar(&f.since, "since", "", "only receipts at or after this time: a duration back from now (90m, 1h) or an RFC 3339 time")
}

// kindNames lists the receipt kinds this build knows, in kind order.
func kindNames() []string {
	var out []string
	for k := events.Kind(1); k < 64; k++ {
		if k.Known() {
			out = append(out, k.String())
		}
	}
	return out
}

// receiptFilter is a parsed filterFlags.
type receiptFilter struct {
	worker, lane, grant string
	kinds               map[events.Kind]bool
	reasons             map[string]bool
	since               int64
	laneOf              map[string]string // grant id -> lane, from permits seen
}

func (f *filterFlags) parse(now time.Time) (*receiptFilter, error) {
	rf := &receiptFilter{worker: f.worker, lane: f.lane, grant: f.grant}
	if f.kinds != "" {
		rf.kinds = map[events.Kind]bool{}
		for _, k := range strings.Split(f.kinds, ",") {
			kind, ok := events.KindFromString(strings.TrimSpace(k))
			if !ok {
				return nil, usageErr("--kind: %q is not a receipt kind (one of %s)", k, strings.Join(kindNames(), ", "))
			}
			rf.kinds[kind] = true
		}
	}
	if f.reasons != "" {
		rf.reasons = map[string]bool{}
		for _, r := range strings.Split(f.reasons, ",") {
			rf.reasons[strings.TrimSpace(r)] = true
		}
	}
	if f.since != "" {
		t, err := parseSince(f.since, now)
		if err != nil {
			return nil, usageErr("--since: %v", err)
		}
		rf.since = t
	}
	if f.lane != "" {
		rf.laneOf = map[string]string{}
	}
	return rf, nil
}

// parseSince reads a duration back from now or an RFC 3339 time.
func parseSince(s string, now time.Time) (int64, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("%q: give a positive duration back from now", s)
		}
		return now.Add(-d).UnixNano(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a duration (90m, 1h) nor an RFC 3339 time (2026-01-02T15:04:05Z)", s)
	}
	return t.UnixNano(), nil
}

// empty reports whether the filter lets everything through.
func (rf *receiptFilter) empty() bool {
	return rf.worker == "" && rf.lane == "" && rf.grant == "" && rf.kinds == nil && rf.reasons == nil && rf.since == 0
}

// match reports whether e passes. It must see every receipt in order (it
// learns grants' lanes from their permits).
func (rf *receiptFilter) match(e *events.Event) bool {
	lane := e.Lane
	if rf.laneOf != nil {
		if e.Kind == events.KindPermit && e.GrantID != "" {
			rf.laneOf[e.GrantID] = e.Lane
		}
		if lane == "" && e.GrantID != "" {
			lane = rf.laneOf[e.GrantID]
		}
	}
	return (rf.worker == "" || e.Worker == rf.worker) &&
		(rf.lane == "" || lane == rf.lane) &&
		(rf.grant == "" || e.GrantID == rf.grant) &&
		(rf.kinds == nil || rf.kinds[e.Kind]) &&
		(rf.reasons == nil || rf.reasons[e.Reason]) &&
		(rf.since == 0 || e.Time >= rf.since)
}
