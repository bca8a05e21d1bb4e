package fsm_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

func mustPolicy(t *testing.T, s *fsm.State, at int64) {
	t.Helper()
	env := fsm.Apply(s, 1, fsm.Batch{Time: at, Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()}}})
	if env[0].Kind != events.KindEpoch {
		t.Fatalf("policy refused: %+v", env[0])
	}
}

// A policy that parses but whose canonical form does not (here: over the
// size limit once '<' is escaped as \u003c) is refused up front with no
// event and no epoch change, instead of Decide emitting an epoch event that
// Evolve cannot fold.
func TestSetPolicyCanonicalFormMustReparse(t *testing.T) {
	s := fsm.New()
	pattern := strings.Repeat("<", policy.MaxDocumentBytes/2)
	doc := []byte(`{"version":1,"default_ttl":"1m","lanes":{"x":{"tools":["` + pattern + `"]}}}`)
	if _, err := policy.Parse(doc); err != nil {
		t.Fatalf("the document itself must parse for this test: %v", err)
	}
	env := fsm.Apply(s, 1, fsm.Batch{Time: 1, Commands: []fsm.Command{{Op: fsm.OpSetPolicy, Policy: doc}}})
	if env[0].Reason != grants.ReasonInvalidRequest || env[0].Seq != 0 || strings.HasPrefix(env[0].Detail, "internal") {
		t.Fatalf("envelope %+v", env[0])
	}
	if s.Chain().Seq != 0 || s.Epoch() != 0 {
		t.Fatalf("state moved: seq %d epoch %d", s.Chain().Seq, s.Epoch())
	}
}

// Expiry and retention saturate instead of wrapping: a grant minted near
// the end of time expires at math.MaxInt64, not in the distant past.
func TestExpirySaturates(t *testing.T) {
	s := fsm.New()
	mustPolicy(t, s, 1)
	at := int64(math.MaxInt64 - int64(time.Second))
	d := grants.RequestDigest("Bash", []byte(`{}`))
	env := fsm.Apply(s, 2, fsm.Batch{Time: at, Commands: []fsm.Command{
		{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "Bash", Digest: d, GrantID: "g1"},
		{Op: fsm.OpSpend, Caller: "w1", GrantID: "g1", Digest: d},
	}})
	if env[0].ExpiresAt != math.MaxInt64 || env[1].Kind != events.KindAttempt {
		t.Fatalf("permit %+v, spend %+v", env[0], env[1])
	}
	if _, ok := s.Grant("g1"); !ok {
		t.Fatal("grant forgotten at once")
	}
	// At the last representable instant the grant is expired and its
	// retention is over.
	fsm.Apply(s, 3, fsm.Batch{Time: math.MaxInt64, Commands: []fsm.Command{{Op: fsm.OpRevoke, Key: "dest/x"}}})
	if _, ok := s.Grant("g1"); ok {
		t.Fatal("grant retained at the end of time")
	}
	if _, err := fsm.Restore(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
}

// A request naming an empty source is refused: "source/" is not a counter
// that can ever be revoked.
func TestEmptySourceRefused(t *testing.T) {
	s := fsm.New()
	mustPolicy(t, s, 1)
	env := fsm.Apply(s, 2, fsm.Batch{Time: 2, Commands: []fsm.Command{
		{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "Bash", GrantID: "g1",
			Digest: grants.RequestDigest("Bash", []byte(`{}`)), Sources: []string{"s1", ""}},
	}})
	if env[0].Reason != grants.ReasonInvalidRequest || env[0].Missing != "sources" {
		t.Fatalf("envelope %+v", env[0])
	}
}

// Envelopes and Decide's events are the caller's: changing them does not
// reach the state (the property tests check this at random; this pins the
// permit envelope returned for a retried request).
func TestRetryEnvelopeDoesNotAliasState(t *testing.T) {
	s := fsm.New()
	mustPolicy(t, s, 1)
	req := fsm.Command{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "Bash", GrantID: "g1",
		IdemKey: "k1", Digest: grants.RequestDigest("Bash", []byte(`{}`)), Sources: []string{"s1"}}
	fsm.Apply(s, 2, fsm.Batch{Time: 2, Commands: []fsm.Command{req}})
	req.Sources[0] = "changed-by-caller"
	env := fsm.Apply(s, 3, fsm.Batch{Time: 3, Commands: []fsm.Command{req}})
	env[0].Counters[0].Value = 999
	g, _ := s.Grant("g1")
	if !slices.Equal(g.Sources, []string{"s1"}) || g.Counters[0].Value != 0 {
		t.Fatalf("state changed through the caller's slices: %+v", g)
	}
}
