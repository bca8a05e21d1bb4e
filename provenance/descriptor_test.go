package provenance

import (
	"errors"
	"reflect"
	"testing"

	"github.com/writ-dev/writ/authority"
)

func TestLevelOrderAndText(t *testing.T) {
	order := []Level{Evidence, Preference, Instruction, Policy}
	for i, l := range order {
		if i > 0 && !(order[i-1] < l) {
			t.Fatalf("%v not below %v", order[i-1], l)
		}
		txt, err := l.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Level
		if err := back.UnmarshalText(txt); err != nil || back != l {
			t.Fatalf("round trip %v: got %v, %v", l, back, err)
		}
	}
	if _, err := ParseLevel("root"); err == nil {
		t.Fatal("unknown level parsed")
	}
	if _, err := Level(9).MarshalText(); err == nil {
		t.Fatal("invalid level marshalled")
	}
	tests := []struct {
		in   []Level
		want Level
	}{
		{nil, Evidence},
		{[]Level{Policy}, Policy},
		{[]Level{Policy, Instruction, Preference}, Preference},
		{[]Level{Instruction, Evidence, Policy}, Evidence},
		{[]Level{Policy, Level(42)}, Evidence}, // invalid never confers authority
	}
	for _, tc := range tests {
		if got := Lowest(tc.in...); got != tc.want {
			t.Errorf("Lowest(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestDeriveLattice(t *testing.T) {
	user := NewSource("u1", authority.ChannelUserPrompt, "alice", ScopeSession, Instruction, 3, []byte("pay bob"))
	pol := NewSource("p1", authority.ChannelInstructionFile, "alice", ScopeSession, Policy, 1, []byte("policy"))
	web := NewSource("w1", authority.ChannelWebFetch, "agent", ScopeTask, Evidence, 7, []byte("page"))
	pref := NewSource("f1", authority.ChannelUserPrompt, "alice", ScopeSession, Preference, 0, []byte("likes"))
	mid := Derive("d0", "agent", user, pol)
	stale := user
	stale.OriginCounters = []OriginCounter{{Source: "u1", Counter: 2}}

	tests := []struct {
		name       string
		inputs     []Descriptor
		wantAuth   Level
		wantScope  Scope
		wantOrigin []string
		wantCount  []OriginCounter
	}{
		{"no inputs is evidence, task", nil, Evidence, ScopeTask, nil, nil},
		{"single input keeps level", []Descriptor{pol}, Policy, ScopeSession, []string{"p1"}, []OriginCounter{{"p1", 1}}},
		{"lowest of inputs", []Descriptor{pol, user}, Instruction, ScopeSession, []string{"p1", "u1"}, []OriginCounter{{"p1", 1}, {"u1", 3}}},
		{"evidence taints", []Descriptor{pol, user, web}, Evidence, ScopeTask, []string{"p1", "u1", "w1"}, []OriginCounter{{"p1", 1}, {"u1", 3}, {"w1", 7}}},
		{"preference", []Descriptor{user, pref}, Preference, ScopeSession, []string{"f1", "u1"}, []OriginCounter{{"f1", 0}, {"u1", 3}}},
		{"nested derive dedups origins", []Descriptor{mid, user, pol}, Instruction, ScopeSession, []string{"p1", "u1"}, []OriginCounter{{"p1", 1}, {"u1", 3}}},
		{"older counter kept", []Descriptor{user, stale}, Instruction, ScopeSession, []string{"u1"}, []OriginCounter{{"u1", 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Derive("out", "agent", tc.inputs...)
			if d.Authority != tc.wantAuth || d.Scope != tc.wantScope || d.Owner != "agent" || d.Channel != authority.ChannelDerived {
				t.Fatalf("got auth=%v scope=%v owner=%q ch=%q", d.Authority, d.Scope, d.Owner, d.Channel)
			}
			if len(d.Origins) != 0 || len(tc.wantOrigin) != 0 {
				if !reflect.DeepEqual(d.Origins, tc.wantOrigin) {
					t.Fatalf("origins %v, want %v", d.Origins, tc.wantOrigin)
				}
			}
			if len(d.OriginCounters) != 0 || len(tc.wantCount) != 0 {
				if !reflect.DeepEqual(d.OriginCounters, tc.wantCount) {
					t.Fatalf("counters %v, want %v", d.OriginCounters, tc.wantCount)
				}
			}
			for _, in := range tc.inputs {
				if d.Authority > in.Authority {
					t.Fatalf("derived %v above input %v", d.Authority, in.Authority)
				}
			}
		})
	}
}

func TestRaiseOnlyByOwner(t *testing.T) {
	web := NewSource("w1", authority.ChannelWebFetch, "alice", ScopeSession, Evidence, 0, []byte("x"))
	derived := Derive("d1", "agent", web)
	tests := []struct {
		name    string
		d       Descriptor
		to      Level
		by      string
		wantErr error
	}{
		{"owner raises", web, Instruction, "alice", nil},
		{"model cannot", web, Instruction, "model", ErrNotOwner},
		{"empty caller", Descriptor{Owner: ""}, Policy, "", ErrNotOwner},
		{"deriver owns derived, source owner does not", derived, Preference, "alice", ErrNotOwner},
		{"not a raise", web, Evidence, "alice", errors.New("any")},
		{"invalid level", web, Level(9), "alice", errors.New("any")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Raise(tc.d, tc.to, tc.by)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr == nil:
				if got.Authority != tc.to || tc.d.Authority == tc.to {
					t.Fatalf("not raised: %v", got.Authority)
				}
			case err == nil:
				t.Fatal("raise allowed")
			case tc.wantErr == ErrNotOwner && !errors.Is(err, ErrNotOwner):
				t.Fatalf("err %v, want ErrNotOwner", err)
			default:
				if got.Authority != tc.d.Authority {
					t.Fatal("authority changed on error")
				}
			}
		})
	}
}

func TestStale(t *testing.T) {
	d := Derive("d", "agent",
		NewSource("a", authority.ChannelFileRead, "o", ScopeSession, Evidence, 1, nil),
		NewSource("b", authority.ChannelFileRead, "o", ScopeSession, Evidence, 5, nil))
	cur := map[string]uint64{"a": 1, "b": 6}
	got := d.Stale(func(s string) (uint64, bool) { c, ok := cur[s]; return c, ok })
	if !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("stale %v", got)
	}
}
