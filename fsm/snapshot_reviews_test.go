package fsm_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/policy/policyfile"
)

// snapshotReviews is the committed snapshot of reviewsState: review
// records in every status, an artifact review superseded by its next
// version, a reviewer's approval bound to its counter, and replies already
// decoded (section 23). Kept forever, like the snapshots of
// testdata/snapshots (which are all from before receipt format levels).
var snapshotReviews = filepath.Join("testdata", "reviews", "snapshot-v4.bin")

// reviewsState builds a state at receipt format 4 holding decision
// records of every kind.
func reviewsState(t *testing.T) *fsm.State {
	t.Helper()
	const sec = int64(time.Second)
	doc, err := os.ReadFile(filepath.Join("testdata", "policies", "v2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := fsm.New()
	var raft uint64
	apply := func(at int64, cs ...fsm.Command) []grants.Envelope {
		raft++
		return fsm.Apply(s, raft, fsm.Batch{Time: at, Node: "n1", Commands: cs})
	}
	p, err := policyFromYAML(doc)
	if err != nil {
		t.Fatal(err)
	}
	apply(sec, fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: p.Canonical()},
		fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: 4})
	vault := func(id, name string) fsm.Command {
		args := `{"name":"` + name + `"}`
		flat, _ := policy.FlattenArgs([]byte(args))
		return fsm.Command{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "vault_read", GrantID: id,
			IdemKey: id, Digest: grants.RequestDigest("vault_read", []byte(args)), Args: flat}
	}
	art := func(v string) fsm.Command {
		return fsm.Command{Op: fsm.OpOpenReview, Caller: "w1", Lane: "coordinator", Caption: "q3-report", Path: "out/q3.pdf",
			ContentDigest: events.Sum([]byte(v)), Transition: "review_ready->send", Destination: "class:finance", ReviewerRole: "finance"}
	}
	apply(10*sec, vault("g1", "a"), vault("g2", "b"), vault("g3", "c"), art("v1"))
	apply(20*sec,
		fsm.Command{Op: fsm.OpReviewReply, Caller: "operator", Channel: "slack:#ops", Sender: "dana", ReplyAt: 19 * sec, Text: "vault-read_v1_keep"},
		fsm.Command{Op: fsm.OpDecideReview, Caller: "operator", ReviewID: "vault-read_v2_review", Outcome: "reject", Note: "no"},
		fsm.Command{Op: fsm.OpDecideReview, Caller: "reviewer:erin", Roles: []string{"finance"}, ReviewID: "q3-report_v1_keep", Outcome: "approve"},
		fsm.Command{Op: fsm.OpReviewReply, Caller: "operator", Channel: "sms", Sender: "bob", ReplyAt: 19 * sec, Text: "lgtm"},
	)
	apply(30*sec, vault("g4", "a"), art("v2"))
	return s
}

// policyFromYAML parses a policy document as the scripts do.
func policyFromYAML(doc []byte) (*policy.Policy, error) { return policyfile.Parse(doc) }

func TestReviewsSnapshotGolden(t *testing.T) {
	s := reviewsState(t)
	snap := s.Snapshot()
	if *rewrite {
		if err := os.WriteFile(snapshotReviews, snap, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(snapshotReviews)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to write it)", err)
	}
	if !bytes.Equal(snap, want) {
		t.Fatalf("the state of reviewsState no longer encodes as %s (an encoding changed: add a new golden, never edit this one)", snapshotReviews)
	}
	r, err := fsm.Restore(want)
	if err != nil {
		t.Fatal(err)
	}
	if r.Digest() != s.Digest() || r.ReceiptFormat() != fsm.ReceiptFormatReviews {
		t.Fatal("restored digest or level differs")
	}
	if _, left := fsm.ExpiryRemovals(r); len(left) > 0 {
		t.Fatalf("entries never scheduled for removal: %v", left)
	}
	statuses := map[string]string{}
	for _, rv := range r.Records() {
		statuses[rv.Caption] = rv.Status
	}
	for caption, st := range map[string]string{"vault-read_v1_review": "consumed", "vault-read_v2_review": "rejected",
		"vault-read_v3_review": "approved", "q3-report_v1_review": "superseded", "q3-report_v2_review": "open"} {
		if statuses[caption] != st {
			t.Errorf("restored %s is %q, want %q (all %v)", caption, statuses[caption], st, statuses)
		}
	}
	// The replies survive the snapshot: the same reply (which approved
	// the one live candidate, v3) is a duplicate.
	env := fsm.Apply(r, 99, fsm.Batch{Time: 40 * int64(time.Second), Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpReviewReply, Caller: "operator", Channel: "sms", Sender: "bob", ReplyAt: 19 * int64(time.Second), Text: "lgtm"}}})[0]
	if env.Kind != events.KindReviewOrphaned || env.Missing != "new reply" {
		t.Fatalf("a reply recorded before the snapshot, seen again after restoring it: %+v", env)
	}
}
