package events

import (
	"errors"
	"strings"
	"testing"
)

// Every golden event, in both forms of the fields that changed shape,
// passes StaticValidate.
func TestStaticValidateAcceptsGoldens(t *testing.T) {
	evs, _ := goldenChain()
	names := goldenNames(evs)
	for i := range evs {
		if err := evs[i].StaticValidate(); err != nil {
			t.Errorf("%s: %v", names[i], err)
		}
	}
}

// Each rule refuses the event it is for, with ErrInvalidEvent naming the
// problem.
func TestStaticValidateRefuses(t *testing.T) {
	evs, _ := goldenChain()
	byName := map[string]Event{}
	for i, n := range goldenNames(evs) {
		byName[n] = evs[i]
	}
	for _, c := range []struct {
		name, golden, want string
		edit               func(e *Event)
	}{
		{"no seq", "permit", "no sequence", func(e *Event) { e.Seq = 0 }},
		{"unknown kind", "permit", "unknown kind", func(e *Event) { e.Kind = 999 }},
		{"wrong decision", "permit", "decision", func(e *Event) { e.Decision = "deny" }},
		{"policy on a permit", "permit", "policy outside", func(e *Event) { e.Policy = []byte("{}") }},
		{"cancelled on a deny", "deny", "cancelled", func(e *Event) { e.Cancelled = []string{"g1"} }},
		{"usage facts on an attempt", "attempt", "usage facts outside", func(e *Event) { e.Charged = true }},
		{"quota without charged", "permit", "without charged", func(e *Event) { e.Quotas = []QuotaWindow{{Key: "q/worker/w", Until: 1}} }},
		{"ledger end without key", "permit_2", "ledger end", func(e *Event) { e.LedgerKey = "" }},
		{"instrument end without instrument", "permit_2", "instrument end", func(e *Event) { e.Instrument = "" }},
		{"quota without key", "permit_2", "quota window without a key", func(e *Event) { e.Quotas = []QuotaWindow{{Until: 1}} }},
		{"source fields on a permit", "permit", "source fields outside", func(e *Event) { e.SourceID = "s1" }},
		{"origins without id", "source_2", "without a source id", func(e *Event) { e.SourceID = "" }},
		{"both source forms", "source_2", "packed source list", func(e *Event) { e.Sources = []string{"s1"} }},
		{"permit without grant", "permit", "names no grant", func(e *Event) { e.GrantID = "" }},
		{"approval_required without review", "approval_required", "no review", func(e *Event) { e.ReviewID = "" }},
		{"attempt without grant", "attempt", "no grant", func(e *Event) { e.GrantID = "" }},
		{"effect without outcome", "effect", "no grant or outcome", func(e *Event) { e.Outcome = "" }},
		{"revoke without counter", "revoke", "no counter", func(e *Event) { e.Counters = nil }},
		{"epoch without policy", "epoch", "without a policy", func(e *Event) { e.Policy, e.PolicyDigest = nil, Hash{} }},
		{"reinstate without worker", "reinstate", "no worker", func(e *Event) { e.Worker = "" }},
		{"packed source without id", "source", "no source", func(e *Event) { e.Sources = nil }},
		{"source with an empty id", "source", "no source", func(e *Event) { e.Sources = []string{""} }},
		{"approval without tool", "approval", "no review, worker or tool", func(e *Event) { e.Tool = "" }},
	} {
		e, ok := byName[c.golden]
		if !ok {
			t.Fatalf("%s: no golden %s", c.name, c.golden)
		}
		c.edit(&e)
		err := e.StaticValidate()
		if !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an invalid event error containing %q", c.name, err, c.want)
		}
	}
}

// FuzzStaticValidate: for any event Decode accepts (bodies are sealed, so
// the fuzzer reaches the fields), StaticValidate never panics, refuses
// only with ErrInvalidEvent, gives the same answer for Decode's and
// DecodeInto's event and for the event re-decoded from its encoding, and
// passes a source event only when it names its source in one form.
func FuzzStaticValidate(f *testing.F) {
	_, encs := goldenChain()
	for _, b := range encs {
		f.Add(b[1 : len(b)-35])
	}
	f.Add([]byte(body().key(tagSeq, wireVarint).uv(1).key(tagKind, wireVarint).uv(uint64(KindSource)).str(tagSourceID, "s").str(tagSources, "t"))[1:])
	f.Add([]byte(body().key(tagSeq, wireVarint).uv(1).key(tagKind, wireVarint).uv(uint64(KindAttempt)).key(tagCharged, wireVarint).uv(1))[1:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		raw := sealBody(append([]byte{Version}, b...))
		e, err := Decode(raw)
		if err != nil {
			return
		}
		verr := e.StaticValidate()
		if verr != nil && !errors.Is(verr, ErrInvalidEvent) {
			t.Fatalf("StaticValidate error %v does not wrap ErrInvalidEvent", verr)
		}
		var into Event
		if err := DecodeInto(raw, &into); err != nil {
			t.Fatalf("DecodeInto refuses what Decode accepts: %v", err)
		}
		if (into.StaticValidate() == nil) != (verr == nil) {
			t.Fatalf("Decode's and DecodeInto's events validate differently")
		}
		again, err := Decode(e.Encode())
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if (again.StaticValidate() == nil) != (verr == nil) {
			t.Fatalf("the re-decoded event validates differently")
		}
		if verr == nil && e.Kind == KindSource {
			if id, _, _, _ := e.SourceDescriptor(); id == "" || (e.SourceID != "" && len(e.Sources) > 0) {
				t.Fatalf("a valid source event names no source or both forms: %+v", e)
			}
		}
	})
}
