package issuer_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// TestSourceRevocationThroughTheAPI: a worker registers a user prompt and
// content derived from it, asks for a grant whose command traces to the
// derived source, and an operator revokes the prompt: the grant minted
// before is refused at spend, a new request tracing to the derivative is
// refused at grant, and an auditor replaying the receipts reaches the
// issuer's state digest, source registry included.
func TestSourceRevocationThroughTheAPI(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc := dial(t, env.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := client.New(nc, "w1")
	op := client.New(nc, "")

	prompt := api.SourceRequest{ID: "u1", Channel: "user_prompt", Session: "s1", ContentDigest: events.Sum([]byte("run the report")).String()}
	u1, err := w.RegisterSource(ctx, prompt)
	if err != nil || u1.Decision != grants.Permit || u1.Kind != events.KindSource || u1.Authority == "" ||
		!slices.Equal(u1.Counters, []events.Counter{{Key: "source/u1"}}) {
		t.Fatalf("register u1: %+v %v", u1, err)
	}
	again, err := w.RegisterSource(ctx, prompt)
	if err != nil || again.Seq != u1.Seq || again.Authority != u1.Authority {
		t.Fatalf("repeated registration: %+v %v (first %+v)", again, err, u1)
	}
	d1, err := w.RegisterSource(ctx, api.SourceRequest{ID: "d1", Channel: "derived", Origins: []string{"u1"},
		ContentDigest: events.Sum([]byte("./report.sh")).String()})
	if err != nil || d1.Decision != grants.Permit || d1.Authority != u1.Authority || len(d1.Counters) != 2 {
		t.Fatalf("register d1: %+v %v", d1, err)
	}
	conflict, err := w.RegisterSource(ctx, api.SourceRequest{ID: "d1", Channel: "web_fetch", ContentDigest: events.Sum([]byte("x")).String()})
	if err != nil || conflict.Reason != grants.ReasonSourceConflict {
		t.Fatalf("conflicting registration: %+v %v", conflict, err)
	}
	if st := env.Service.Status(); st.Sources != 2 {
		t.Fatalf("status counts %d sources, want 2", st.Sources)
	}

	args := json.RawMessage(`{"command":"./report.sh"}`)
	trace := []api.FieldTrace{{Field: "/command", Covered: true, Matches: []api.TraceMatch{{Source: "d1", Transform: "raw"}}}}
	permit, err := w.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash", Args: args, Provenance: trace})
	if err != nil || permit.Decision != grants.Permit {
		t.Fatalf("grant: %+v %v", permit, err)
	}
	for _, key := range []string{"source/d1", "source/u1"} {
		if !slices.ContainsFunc(permit.Counters, func(c events.Counter) bool { return c.Key == key }) {
			t.Fatalf("the permit does not bind %s: %+v", key, permit.Counters)
		}
	}

	rev, err := op.Revoke(ctx, api.RevokeRequest{Source: "u1"})
	if err != nil || rev.Decision != grants.Permit || rev.Kind != events.KindRevoke {
		t.Fatalf("revoke: %+v %v", rev, err)
	}
	spend, err := w.Spend(ctx, api.SpendRequest{GrantID: permit.GrantID, Args: args})
	if err != nil || spend.Decision != grants.Deny || spend.Reason != grants.ReasonSourceRevoked || spend.Missing != "source/u1" {
		t.Fatalf("spend after the revocation: %+v %v", spend, err)
	}
	again2, err := w.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash", Args: args, Provenance: trace})
	if err != nil || again2.Decision != grants.Deny || again2.Reason != grants.ReasonSourceRevoked || len(again2.Grounds) != 1 {
		t.Fatalf("grant after the revocation: %+v %v", again2, err)
	}
	derived, err := w.RegisterSource(ctx, api.SourceRequest{ID: "d2", Channel: "derived", Origins: []string{"d1"},
		ContentDigest: events.Sum([]byte("y")).String()})
	if err != nil || derived.Reason != grants.ReasonSourceRevoked {
		t.Fatalf("a derivative of a revoked source: %+v %v", derived, err)
	}
	bad, err := nc.Request(api.WorkerSubject("w1", api.OpSource), []byte(`{"v":1,"id":"x","channel":"derived","content_digest":"abc"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var badEnv grants.Envelope
	if err := json.Unmarshal(bad.Data, &badEnv); err != nil || badEnv.Reason != grants.ReasonInvalidRequest || badEnv.Missing != "content_digest" {
		t.Fatalf("malformed registration: %s %v", bad.Data, err)
	}

	// The auditor's replay reaches the issuer's digest.
	v := replayToDigest(ctx, t, nc, env.Service.Status())
	if n := v.Summary().Kinds["source"]; n != 2 {
		t.Fatalf("the auditor saw %d source receipts, want 2", n)
	}
}
