package fsm_test

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

const (
	testUserKeyA = "UA5WUJ54Z23KILLCUOUNAKTPBVZWKMQVO4O6EQ5GHLAERIMLLHNCTYM5"
	testUserKeyB = "UBXTDUQB5LBBTWCM2Y7SNJRWRAGYSFZLJNVCZSAQCPIIRQ6ZXS3KVRDN"
)

// A spawn records the NATS user key it names from receipt format level 12
// on, never below; the key survives a snapshot and a replay of the
// receipts, and RevokedUserKeys lists it once the child, or an ancestor,
// is revoked or the child moves to another incarnation, until its
// lifetime ends.
func TestSpawnRecordsUserKey(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		r := newFleetRig(rt)
		spawn := func(caller, child, key string) (grants.Envelope, []events.Event) {
			return r.apply(fsm.Command{Op: fsm.OpSpawn, Caller: caller, Key: child, Lane: "isolated", UserKey: key,
				TTL: int64(10 * time.Minute)})
		}
		// Level 8: the key is dropped.
		env, evs := spawn("r1", "r1-old", testUserKeyA)
		if env.Decision != grants.Permit || len(evs) != 1 || evs[0].UserKey != "" {
			rt.Fatalf("spawn below level 12: %+v %+v", env, evs)
		}
		if m, _ := r.s.Member("r1-old"); m.UserKey != "" {
			rt.Fatalf("member below level 12 records key %q", m.UserKey)
		}
		r.apply(fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.ReceiptFormatWorkerKeys})
		// A malformed key is refused.
		if env, _ := spawn("r1", "r1-bad", "Unot-a-key"); env.Decision == grants.Permit || env.Missing != "user_key" {
			rt.Fatalf("malformed key: %+v", env)
		}
		env, evs = spawn("r1", "r1-a", testUserKeyA)
		if env.Decision != grants.Permit || len(evs) != 1 || evs[0].UserKey != testUserKeyA {
			rt.Fatalf("spawn at level 12: %+v %+v", env, evs)
		}
		if env, _ = spawn("r1-a", "r1-a-b", testUserKeyB); env.Decision != grants.Permit {
			rt.Fatalf("grandchild: %+v", env)
		}
		// A key is recorded for one worker only; a retry of the spawn
		// that recorded it gets the original answer.
		if env, _ := spawn("r2", "r2-copy", testUserKeyA); env.Decision != grants.Deny || env.Missing != "fresh user key" {
			rt.Fatalf("a second worker with r1-a's key: %+v", env)
		}
		if env, evs := spawn("r1", "r1-a", testUserKeyA); env.Decision != grants.Permit || len(evs) != 0 {
			rt.Fatalf("retry of r1-a's spawn: %+v %+v", env, evs)
		}
		if m, _ := r.s.Member("r1-a"); m.UserKey != testUserKeyA {
			rt.Fatalf("member key %q", m.UserKey)
		}
		if got := r.s.RevokedUserKeys(r.at); len(got) != 0 {
			rt.Fatalf("nothing revoked yet, got %v", got)
		}
		// Snapshot round trip, digest included.
		back, err := fsm.Restore(r.s.Snapshot())
		if err != nil {
			rt.Fatal(err)
		}
		if back.Digest() != r.s.Digest() {
			rt.Fatal("restored digest differs")
		}
		if m, _ := back.Member("r1-a-b"); m.UserKey != testUserKeyB {
			rt.Fatalf("restored member key %q", m.UserKey)
		}
		if env := fsm.Apply(back, 1000, fsm.Batch{Time: r.at, Node: "n1", Commands: []fsm.Command{{Op: fsm.OpSpawn, Caller: "r2",
			Key: "r2-copy", Lane: "isolated", UserKey: testUserKeyB}}})[0]; env.Missing != "fresh user key" {
			rt.Fatalf("the restored state records a key twice: %+v", env)
		}
		// Replaying the receipts reaches the same digest.
		replay := fsm.New()
		for _, p := range r.s.Outbox(0, 0) {
			e, err := events.Decode(p.Data)
			if err != nil {
				rt.Fatal(err)
			}
			if err := fsm.Evolve(replay, e); err != nil {
				rt.Fatal(err)
			}
		}
		if replay.Digest() != r.s.Digest() {
			rt.Fatal("replayed digest differs")
		}
		switch rapid.IntRange(0, 2).Draw(rt, "how") {
		case 0: // the parent's subtree
			r.apply(fsm.Command{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/r1-a"})
			if got := r.s.RevokedUserKeys(r.at); !slices.Equal(got, []string{testUserKeyA, testUserKeyB}) {
				rt.Fatalf("after revoking r1-a: %v", got)
			}
		case 1: // the root above both
			r.apply(fsm.Command{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/r1"})
			if got := r.s.RevokedUserKeys(r.at); !slices.Equal(got, []string{testUserKeyA, testUserKeyB}) {
				rt.Fatalf("after revoking r1: %v", got)
			}
		case 2: // the grandchild restores a checkpoint
			if env, _ := r.apply(fsm.Command{Op: fsm.OpRestore, Caller: "r1-a-b"}); env.Decision != grants.Permit {
				rt.Fatalf("restore: %+v", env)
			}
			if got := r.s.RevokedUserKeys(r.at); !slices.Equal(got, []string{testUserKeyB}) {
				rt.Fatalf("after the restore: %v", got)
			}
		}
		if got := r.s.RevokedUserKeys(r.at + int64(10*time.Minute)); len(got) != 0 {
			rt.Fatalf("after the lifetimes ended: %v", got)
		}
		// A revocation may be forgotten once its key's worker has ended.
		if r.s.UserKeyEnded(testUserKeyA, r.at) || !r.s.UserKeyEnded(testUserKeyA, r.at+int64(10*time.Minute)) ||
			r.s.UserKeyEnded("UNKNOWN", r.at+int64(time.Hour)) {
			rt.Fatal("UserKeyEnded")
		}
	})
}
