package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/audit"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/lanes"
)

// The lane and tool the tests' grants ask for (Mint uses them).
const (
	Lane = lanes.Coordinator
	Tool = "Bash"
)

// ArgsFor is the tool call of a test's grant i; every grant binds a
// different one.
func ArgsFor(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"command":"echo %d"}`, i))
}

// IsAttempt reports whether env answers a spend with its attempt receipt.
func IsAttempt(env grants.Envelope) bool {
	return env.Decision == grants.Permit && env.Kind == events.KindAttempt && env.Seq > 0
}

// IsPermit reports whether env answers a grant request with a permit.
func IsPermit(env grants.Envelope) bool {
	return env.Decision == grants.Permit && env.Kind == events.KindPermit && env.GrantID != "" && env.Seq > 0
}

// IsRefusal reports whether env is a denial for reason r.
func IsRefusal(env grants.Envelope, r grants.Reason) bool {
	return env.Decision == grants.Deny && env.Reason == r
}

// Mint asks c for grant i (Lane, Tool, ArgsFor(i)) with idempotency key
// key and fails the test unless it is permitted.
func Mint(t testing.TB, ctx context.Context, c *client.Client, i int, key string) grants.Envelope {
	t.Helper()
	env, err := c.Grant(ctx, api.GrantRequest{Lane: Lane, Tool: Tool, Args: ArgsFor(i), IdempotencyKey: key})
	if err != nil {
		t.Fatalf("grant %d (%s): %v", i, key, err)
	}
	if !IsPermit(env) {
		t.Fatalf("grant %d (%s): want permit, got %+v", i, key, env)
	}
	return env
}

// CheckedStream reads the whole receipt stream, checks it is whole (see
// CheckReceipts: gap-free, event seq == stream seq == message id, chain
// intact, no duplicates) and runs the auditor over it, comparing the
// auditor's replay with st's state digest when st's seq is the stream's
// last. It returns the events (index i is seq i+1) and fails the test on
// any violation.
func (c *Cluster) CheckedStream(t testing.TB, st api.Status) []events.Event {
	t.Helper()
	// A second more for every 2,000 receipts: a load test's stream of a
	// hundred thousand is read, checked and audited under -race.
	ctx, cancel := context.WithTimeout(context.Background(), ConvergeTimeout+time.Duration(st.StreamLastSeq/2000)*time.Second)
	defer cancel()
	si, rs, err := c.Receipts(ctx, st.StreamLastSeq)
	if err != nil {
		t.Fatalf("reading the receipt stream: %v", err)
	}
	evs := CheckReceipts(t, si, rs)
	digest := ""
	if st.Seq == si.LastSeq {
		digest = st.StateDigest
	} else {
		t.Logf("status seq %d != stream last seq %d: digest not compared", st.Seq, si.LastSeq)
	}
	auditReceipts(t, rs, digest)
	return evs
}

// auditReceipts runs the auditor over the whole stream rs and, when digest
// is given, compares its projection with that issuer state digest (taken
// at the stream's last seq).
func auditReceipts(t testing.TB, rs []Receipt, digest string) {
	t.Helper()
	v := audit.NewVerifier(audit.Options{})
	for _, r := range rs {
		if err := v.Add(r.Data, r.StreamSeq); err != nil {
			t.Fatalf("invariant auditor finds no violation: %v", err)
		}
	}
	if digest == "" {
		return
	}
	want, err := events.ParseHash(digest)
	if err != nil {
		t.Fatalf("state digest %q: %v", digest, err)
	}
	if err := v.CheckDigest(want); err != nil {
		t.Fatalf("invariant replay of the stream gives the issuer's state digest: %v", err)
	}
}
