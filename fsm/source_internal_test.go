package fsm

import (
	"errors"
	"strconv"
	"testing"

	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

func sourceBytes(r source) string { return string(encodeSource(nil, &r)) }

// Restore refuses source records a live state cannot hold.
func TestRestoreRejectsSources(t *testing.T) {
	ok := source{ID: "s1", Owner: "w1", Channel: "user_prompt", Scope: "task", Digest: events.Sum([]byte("x")),
		Authority: authority.Instruction, Counters: []events.Counter{{Key: "source/s1"}}, At: 10, Seq: 1}
	with := func(f func(r *source)) string {
		r := ok
		f(&r)
		return sourceBytes(r)
	}
	cases := map[string][]byte{
		"as varint":   snap(func(w *events.Writer) { w.Uint(stSource, 1) }),
		"no id":       snap(func(w *events.Writer) { w.Strings(stSource, []string{with(func(r *source) { r.ID = "" })}) }),
		"no owner":    snap(func(w *events.Writer) { w.Strings(stSource, []string{with(func(r *source) { r.Owner = "" })}) }),
		"no seq":      snap(func(w *events.Writer) { w.Strings(stSource, []string{with(func(r *source) { r.Seq = 0 })}) }),
		"bad level":   snap(func(w *events.Writer) { w.Strings(stSource, []string{with(func(r *source) { r.Authority = 9 })}) }),
		"unknown tag": snap(func(w *events.Writer) { w.Strings(stSource, []string{sourceBytes(ok) + "\xf8\x01\x01"}) }),
		"dup": snap(func(w *events.Writer) {
			w.Strings(stSource, []string{sourceBytes(ok), sourceBytes(ok)})
		}),
		"unordered": snap(func(w *events.Writer) {
			w.Strings(stSource, []string{with(func(r *source) { r.ID = "s2" }), sourceBytes(ok)})
		}),
		"counters unordered": snap(func(w *events.Writer) {
			w.Strings(stSource, []string{with(func(r *source) {
				r.Counters = []events.Counter{{Key: "source/s2"}, {Key: "source/s1"}}
			})})
		}),
		"bad counter key": snap(func(w *events.Writer) {
			w.Strings(stSource, []string{with(func(r *source) { r.Counters = []events.Counter{{Key: "nope"}} })})
		}),
		"past retention": snap(func(w *events.Writer) {
			w.Int(stClock, 10+SourceRetention)
			w.Strings(stSource, []string{sourceBytes(ok)})
		}),
	}
	for name, data := range cases {
		s, err := Restore(data)
		if err == nil || s != nil || !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: Restore = %v, %v; want nil, ErrBadSnapshot", name, s != nil, err)
		}
	}
	good := snap(func(w *events.Writer) {
		w.Int(stClock, 10)
		w.Strings(stSource, []string{
			sourceBytes(ok),
			with(func(r *source) {
				r.ID, r.Channel, r.Origins, r.ModelMade, r.Authority = "s2", authority.ChannelDerived, []string{"s1"}, true, authority.Evidence
			}),
		})
	})
	s, err := Restore(good)
	if err != nil {
		t.Fatalf("good snapshot: %v", err)
	}
	if string(s.Snapshot()) != string(good) {
		t.Fatal("good snapshot does not round-trip")
	}
	if got, _ := s.Source("s2"); got.Authority != authority.Evidence || !got.ModelMade || len(got.Origins) != 1 {
		t.Fatalf("restored s2 = %+v", got)
	}
}

// An empty registry writes nothing: a state without sources encodes
// exactly as it did before the registry existed, so its snapshots and
// digests agree with older builds'.
func TestNoSourcesEncodeNothing(t *testing.T) {
	w := events.NewWriter(nil)
	New().authority(w)
	if len(w.Bytes()) != 0 {
		t.Fatalf("an empty state encodes %x", w.Bytes())
	}
}

// A worker holding MaxSourcesPerWorker live sources is refused until some
// expire; another worker is not affected.
func TestSourceCapPerWorker(t *testing.T) {
	s := New()
	const at = int64(1000)
	for i := 0; i < MaxSourcesPerWorker; i++ {
		// Half of them a minute older, so they expire first.
		t0 := at
		if i%2 == 0 {
			t0 = at - 60e9
		}
		s.addSource(&source{ID: "s" + strconv.Itoa(i), Owner: "w1", Channel: "web_fetch", Scope: "task", At: t0, Seq: uint64(i + 1)})
	}
	reg := func(worker, id string, now int64) grants.Envelope {
		t.Helper()
		c := Command{Op: OpSource, Caller: worker, SourceID: id, Channel: "web_fetch", Scope: "task", ContentDigest: events.Sum([]byte(id))}
		o := Decide(s, now, "n1", c)
		if o.Reply != nil {
			return *o.Reply
		}
		return grants.FromEvent(o.Events[0])
	}
	if env := reg("w1", "one-more", at); env.Decision != grants.Deny || env.Reason != grants.ReasonQuotaExhausted {
		t.Fatalf("at the cap: %+v", env)
	}
	if env := reg("w2", "one-more", at); env.Decision != grants.Permit {
		t.Fatalf("another worker: %+v", env)
	}
	// Once the older half has expired (on the control-plane clock, pruned
	// or not) there is room again.
	if env := reg("w1", "one-more", at-60e9+SourceRetention); env.Decision != grants.Permit {
		t.Fatalf("after expiry: %+v", env)
	}
}

// Evolve refuses a source event without an id or with an unknown level,
// and leaves the state unchanged.
func TestEvolveRefusesMalformedSourceEvents(t *testing.T) {
	for name, e := range map[string]events.Event{
		"no id":      {Kind: events.KindSource, Decision: "permit", Authority: "evidence", Worker: "w1"},
		"bad level":  {Kind: events.KindSource, Decision: "permit", Authority: "root", Worker: "w1", Sources: []string{"s1"}},
		"not permit": {Kind: events.KindSource, Decision: "deny", Authority: "evidence", Worker: "w1", Sources: []string{"s1"}},
	} {
		s := New()
		var c events.Chain
		c.Append(&e, nil)
		before := s.Snapshot()
		if err := Evolve(s, e); !errors.Is(err, ErrReplay) {
			t.Errorf("%s: Evolve = %v, want ErrReplay", name, err)
		}
		if string(s.Snapshot()) != string(before) {
			t.Errorf("%s: state changed", name)
		}
	}
}

// A source's authority under each channel follows the policy in force;
// nothing applied means evidence.
func TestSourceAuthorityFollowsPolicy(t *testing.T) {
	s := New()
	c := Command{Op: OpSource, Caller: "w1", SourceID: "u1", Channel: "user_prompt", Scope: "task", ContentDigest: events.Sum([]byte("u"))}
	if o := Decide(s, 1, "n1", c); o.Events[0].Authority != "evidence" {
		t.Fatalf("no policy: %+v", o.Events[0])
	}
	Apply(s, 1, Batch{Time: 1, Commands: []Command{{Op: OpSetPolicy, Caller: "op", Policy: policy.LegacyDefault().Canonical()}}})
	want := policy.LegacyDefault().SourceAuthority("user_prompt", "", "").String()
	if o := Decide(s, 2, "n1", c); o.Events[0].Authority != want {
		t.Fatalf("default policy: %+v, want %s", o.Events[0], want)
	}
}
