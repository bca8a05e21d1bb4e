package events

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// knownKinds lists every kind by scanning the whole uint16 space, so a kind
// added to one table but not the other is caught.
func knownKinds() []Kind {
	var out []Kind
	for k := range 1 << 16 {
		if Kind(k).Known() {
			out = append(out, Kind(k))
		}
	}
	return out
}

// TestKindNamesAndSubjects: every known kind has a unique snake_case name, a
// unique subject under writ.evt. made of valid NATS tokens, and
// KindFromString and UnmarshalText invert String.
func TestKindNamesAndSubjects(t *testing.T) {
	kinds := knownKinds()
	if len(kinds) != len(kindNames) || len(kindSubjects) != len(kindNames) {
		t.Fatalf("%d known kinds, %d names, %d subjects", len(kinds), len(kindNames), len(kindSubjects))
	}
	nameRE := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	tokenRE := regexp.MustCompile(`^[a-z]+$`)
	names := map[string]Kind{}
	subjects := map[string]Kind{}
	for _, k := range kinds {
		name := k.String()
		if !nameRE.MatchString(name) {
			t.Errorf("kind %d: name %q is not snake_case", k, name)
		}
		if other, dup := names[name]; dup {
			t.Errorf("kinds %d and %d share the name %q", other, k, name)
		}
		names[name] = k

		s, ok := kindSubjects[k]
		if !ok || Subject(k) != s {
			t.Errorf("kind %s: Subject %q, table %q", name, Subject(k), s)
		}
		rest, ok := strings.CutPrefix(s, SubjectPrefix)
		if !ok || s == Subject(0) {
			t.Errorf("kind %s: subject %q is not a specific subject under %s", name, s, SubjectPrefix)
		}
		for _, tok := range strings.Split(rest, ".") {
			if !tokenRE.MatchString(tok) {
				t.Errorf("kind %s: subject %q has token %q (want lower-case letters, no wildcards)", name, s, tok)
			}
		}
		if other, dup := subjects[s]; dup {
			t.Errorf("kinds %d and %d share the subject %q", other, k, s)
		}
		subjects[s] = k

		if back, ok := KindFromString(name); !ok || back != k {
			t.Errorf("KindFromString(%q) = %d, %v; want %d", name, back, ok, k)
		}
		text, err := k.MarshalText()
		if err != nil || string(text) != name {
			t.Errorf("MarshalText(%d) = %q, %v", k, text, err)
		}
		var u Kind
		if err := u.UnmarshalText(text); err != nil || u != k {
			t.Errorf("UnmarshalText(%q) = %d, %v", text, u, err)
		}
	}
}

// TestUnknownKinds: unknown kinds have a numbered name that does not parse
// back, and are published on writ.evt.unknown.
func TestUnknownKinds(t *testing.T) {
	for _, k := range []Kind{0, 10, 999, 0xffff} {
		if k.Known() {
			continue // a future kind; nothing to check
		}
		if got := k.String(); !strings.HasPrefix(got, "kind(") {
			t.Errorf("Kind(%d).String() = %q", k, got)
		}
		if got := Subject(k); got != SubjectPrefix+"unknown" {
			t.Errorf("Subject(%d) = %q", k, got)
		}
		if _, ok := KindFromString(k.String()); ok {
			t.Errorf("KindFromString(%q) succeeded", k.String())
		}
		var u Kind
		if err := u.UnmarshalText([]byte(k.String())); !errors.Is(err, ErrUnknownKind) {
			t.Errorf("UnmarshalText(%q) = %v, want ErrUnknownKind", k.String(), err)
		}
	}
	if !strings.HasPrefix(SubjectAll, SubjectPrefix) || !strings.HasSuffix(SubjectAll, ">") {
		t.Errorf("SubjectAll %q does not cover %s", SubjectAll, SubjectPrefix)
	}
}

// TestHashText: hashes parse from exactly 64 hex digits, the zero hash
// round-trips through the empty string, and anything else is ErrBadHash.
func TestHashText(t *testing.T) {
	h := Sum([]byte("writ"))
	cases := []struct {
		in      string
		want    Hash
		wantErr bool
	}{
		{h.String(), h, false},
		{strings.ToUpper(h.String()), h, false},
		{"", Hash{}, false},
		{h.String()[:63], Hash{}, true},
		{h.String() + "0", Hash{}, true},
		{"zz" + h.String()[2:], Hash{}, true},
	}
	for _, tc := range cases {
		var got Hash
		err := got.UnmarshalText([]byte(tc.in))
		if tc.wantErr != (err != nil) || (err != nil && !errors.Is(err, ErrBadHash)) || got != tc.want {
			t.Errorf("UnmarshalText(%q) = %s, %v", tc.in, got, err)
		}
	}
	if b, _ := (Hash{}).MarshalText(); len(b) != 0 {
		t.Errorf("zero hash marshals to %q", b)
	}
	if b, _ := h.MarshalText(); string(b) != h.String() || len(h.Short()) != 12 || !strings.HasPrefix(h.String(), h.Short()) {
		t.Errorf("MarshalText %q, String %q, Short %q", b, h.String(), h.Short())
	}
	if _, err := HashFromBytes(make([]byte, 31)); !errors.Is(err, ErrBadHash) {
		t.Errorf("HashFromBytes(31 bytes) = %v", err)
	}
}
