package worker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/provenance"
)

// TestCallRecord: the record a PreToolUse keeps of a permit it answered.
// A delivered permit makes the next delivery a replay; one that could not
// be written does not; a call being decided holds its record, so a
// concurrent duplicate waits; another call has a record of its own.
func TestCallRecord(t *testing.T) {
	state := t.TempDir()
	call := harness.Call{Harness: harness.ClaudeCode, Session: "s1", CallID: "toolu_1", Tool: "Bash"}
	env := grants.Envelope{Decision: grants.Permit, GrantID: "g-1", Seq: 42}

	open := func(c harness.Call) *callRecord {
		t.Helper()
		r, err := openCallRecord(testCtx(t), state, c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := open(call)
	if r.replayed() {
		t.Fatal("a first delivery is a replay")
	}
	if err := r.answered(env); err == nil {
		t.Fatal("a permit recorded without the call begun")
	}
	r.begin()
	if err := r.answered(env); err != nil {
		t.Fatal(err)
	}
	// A duplicate while the first is deciding waits for it.
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := openCallRecord(short, state, call); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a concurrent duplicate got the record: %v", err)
	}
	r.close(true)

	r = open(call)
	if !r.replayed() {
		t.Fatalf("a delivered permit is not a replay: %+v", r)
	}
	err := r.replayError(call)
	if !errors.Is(err, errReplayed) || !strings.Contains(err.Error(), "grant=g-1 seq=42") || !strings.Contains(err.Error(), "toolu_1") {
		t.Fatalf("replay error %v", err)
	}
	r.close(true)

	// A permit that could not be written is answered again.
	other := call
	other.CallID = "toolu_2"
	r = open(other)
	if r.replayed() {
		t.Fatal("another call id is a replay")
	}
	r.begin()
	if err := r.answered(env); err != nil {
		t.Fatal(err)
	}
	r.close(false)
	r = open(other)
	if r.replayed() || r.state != callUndelivered || !strings.Contains(r.line, "grant=g-1") {
		t.Fatalf("an undelivered permit: %+v", r)
	}
	r.close(true)

	// Nothing kept for a refusal: the record begun is emptied again.
	refused := call
	refused.CallID = "toolu_3"
	r = open(refused)
	r.begin()
	r.close(true)
	if r = open(refused); r.replayed() || r.state != "" {
		t.Fatalf("a refused call: %+v", r)
	}
	r.close(true)

	// A hook that died while asking (or a crash that lost the answer's
	// write) leaves "pending", durable before the issuer was asked: the
	// repeat is blocked, as is a record that cannot be read.
	path := callRecordPath(state, refused)
	for _, left := range []string{"pending\n", "pending", "answ", "\x00\x00garbage\n"} {
		if err := os.WriteFile(path, []byte(left), 0o600); err != nil {
			t.Fatal(err)
		}
		r = open(refused)
		err := r.replayError(refused)
		if !r.replayed() || !errors.Is(err, errReplayed) || !strings.Contains(err.Error(), "stopped after asking the issuer") {
			t.Fatalf("record %q: replayed %v, %v", left, r.replayed(), err)
		}
		r.close(true)
	}
	// The undelivered permit's record, rewritten over a longer line, reads
	// as that line alone.
	if err := os.WriteFile(path, []byte("undelivered grant=g-9 seq=9\nanswered grant=g-old seq=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r = open(refused); r.replayed() || r.line != "undelivered grant=g-9 seq=9" {
		t.Fatalf("undelivered with a tail: %+v", r)
	}
	r.begin()
	r.close(true)
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Fatalf("record after a refusal: %q", b)
	}

	// Old records are pruned, recent ones kept.
	dir := filepath.Join(state, "calls")
	old := filepath.Join(dir, "0000")
	if err := os.WriteFile(old, []byte("answered grant=x seq=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-callRecordRetention - time.Hour)
	if err := os.Chtimes(old, then, then); err != nil {
		t.Fatal(err)
	}
	pruneCallRecords(dir, time.Now())
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("old record kept: %v", err)
	}
	if r = open(call); !r.replayed() {
		t.Fatal("a recent record was pruned")
	}
	r.close(true)
}

// TestFieldTracesTyped: a number and an identifier respelled from the
// user's prompt are traced as whole typed matches, so the issuer (from
// receipt format level 9) gives them the prompt's level; the same values
// changed by one digit are not traced.
func TestFieldTracesTyped(t *testing.T) {
	reg := provenance.NewRegistry(provenance.Options{})
	register(t, reg, seeded{source("s-prompt", "user_prompt", provenance.Instruction, ""),
		"pay the invoice of 98.70 EUR to DE89 3704 0044 0532 0130 00 today"})
	call, err := args.CanonicalJSON([]byte(`{"amount": 98.7, "iban": "DE89370400440532013000", "near": "DE89370400440532013001", "other": 98.71}`))
	if err != nil {
		t.Fatal(err)
	}
	got := traceArgs(reg, call)
	want := []api.FieldTrace{
		{Field: "/amount", Matches: []api.TraceMatch{{Source: "s-prompt", Transform: "number:EUR", Whole: true}}},
		{Field: "/iban", Matches: []api.TraceMatch{{Source: "s-prompt", Transform: "ident", Whole: true}}},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		t.Fatalf("traces:\n%s", g)
	}
}

// TestSpentCallRecord: a permit's record names its grant, digest and
// target (any bytes), and a PostToolUse reads them back whether the
// answer was delivered or not; no record, a refused call's, a record
// without a digest (an earlier build's) or a malformed one reads as none.
func TestSpentCallRecord(t *testing.T) {
	state := t.TempDir()
	call := harness.Call{Harness: harness.ClaudeCode, Session: "s1", CallID: "toolu_rec", Tool: "WebFetch"}
	if _, ok := readSpentCall(state, call); ok {
		t.Fatal("a call with no record read as spent")
	}
	d := grants.RequestDigest("WebFetch", []byte(`{"url":"x"}`))
	target := "url:https://example.org/a b?c=d&e=%41 é"
	for _, delivered := range []bool{true, false} {
		r, err := openCallRecord(testCtx(t), state, call)
		if err != nil {
			t.Fatal(err)
		}
		r.begin()
		if err := r.answered(grants.Envelope{Decision: grants.Permit, GrantID: "g-1", Seq: 7, Digest: d, Target: target}); err != nil {
			t.Fatal(err)
		}
		r.close(delivered)
		sc, ok := readSpentCall(state, call)
		if !ok || sc.grant != "g-1" || sc.digest != d || sc.target != target {
			t.Fatalf("delivered %v: read %+v %v", delivered, sc, ok)
		}
	}
	path := callRecordPath(state, call)
	for _, line := range []string{"", "pending", "answered grant=g-1 seq=7", "answered grant=g-1 seq=7 digest=zz", "refused", "answered digest=" + d.String(),
		"answered grant=g-1 digest=" + d.String() + " target=%zz"} {
		if err := os.WriteFile(path, []byte(line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if sc, ok := readSpentCall(state, call); ok {
			t.Fatalf("record %q read as %+v", line, sc)
		}
	}
}
