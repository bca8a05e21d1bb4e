package api

import (
	"errors"
	"strings"
	"testing"
)

func TestParseWorkerSubject(t *testing.T) {
	long := strings.Repeat("a", 65)
	max := strings.Repeat("a", 64)
	cases := []struct {
		name     string
		subj     string
		worker   string
		op       string
		wantFail bool
	}{
		{"grant", "writ.api.w1.grant", "w1", OpGrant, false},
		{"spend", "writ.api.w1.spend", "w1", OpSpend, false},
		{"effect", "writ.api.worker_A-7.effect", "worker_A-7", OpEffect, false},
		{"64-char worker", "writ.api." + max + ".grant", max, OpGrant, false},

		{"star worker", "writ.api.*.grant", "", "", true},
		{"gt worker", "writ.api.>.grant", "", "", true},
		{"gt op", "writ.api.w1.>", "", "", true},
		{"star op", "writ.api.w1.*", "", "", true},
		{"empty worker", "writ.api..grant", "", "", true},
		{"too-long worker", "writ.api." + long + ".grant", "", "", true},
		{"space in worker", "writ.api.w 1.grant", "", "", true},
		{"non-ascii worker", "writ.api.wé.grant", "", "", true},
		{"extra token", "writ.api.w1.grant.x", "", "", true},
		{"extra middle token", "writ.api.w1.w2.grant", "", "", true},
		{"missing op", "writ.api.w1", "", "", true},
		{"empty op", "writ.api.w1.", "", "", true},
		{"unknown op", "writ.api.w1.delete", "", "", true},
		{"op case", "writ.api.w1.GRANT", "", "", true},
		{"op with space", "writ.api.w1.grant ", "", "", true},
		{"operator subject", SubjectRevoke, "", "", true},
		{"no prefix", "w1.grant", "", "", true},
		{"prefix only", WorkerPrefix, "", "", true},
		{"empty", "", "", "", true},
		{"wildcard subject", WorkerWildcard, "", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, op, err := ParseWorkerSubject(tc.subj)
			if tc.wantFail {
				if err == nil {
					t.Fatalf("ParseWorkerSubject(%q) = %q, %q; want an error", tc.subj, w, op)
				}
				if !errors.Is(err, ErrBadSubject) {
					t.Fatalf("ParseWorkerSubject(%q): error %v does not wrap ErrBadSubject", tc.subj, err)
				}
				if w != "" || op != "" {
					t.Fatalf("ParseWorkerSubject(%q) returned %q, %q alongside an error", tc.subj, w, op)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseWorkerSubject(%q): %v", tc.subj, err)
			}
			if w != tc.worker || op != tc.op {
				t.Fatalf("ParseWorkerSubject(%q) = %q, %q; want %q, %q", tc.subj, w, op, tc.worker, tc.op)
			}
			if got := WorkerSubject(w, op); got != tc.subj {
				t.Fatalf("WorkerSubject(%q, %q) = %q; want %q", w, op, got, tc.subj)
			}
		})
	}
}

func TestValidID(t *testing.T) {
	ok := []string{"a", "w1", "W-1_x", "0", strings.Repeat("z", 64), "coordinator", "_", "-"}
	bad := []string{
		"", strings.Repeat("z", 65), "*", ">", "a.b", "a b", "a\tb", "a\x00", "é", "a/b", "a:b", "$SYS", "w1\n",
	}
	for _, s := range ok {
		if err := ValidID(s); err != nil {
			t.Errorf("ValidID(%q) = %v; want nil", s, err)
		}
	}
	for _, s := range bad {
		err := ValidID(s)
		if err == nil {
			t.Errorf("ValidID(%q) = nil; want an error", s)
			continue
		}
		if !errors.Is(err, ErrBadToken) {
			t.Errorf("ValidID(%q): %v does not wrap ErrBadToken", s, err)
		}
	}
}

func FuzzParseWorkerSubject(f *testing.F) {
	for _, s := range []string{
		"writ.api.w1.grant", "writ.api.w1.spend", "writ.api.w1.effect", "writ.api.*.grant",
		"writ.api.>", "writ.api..grant", "writ.api.w1.grant.x", "writ.api.w1", "writ.op.revoke",
		"", "writ.api.", "writ.api.w1.", "writ.api.\xff.grant", "writ.api." + strings.Repeat("a", 65) + ".spend",
		"writ.api.w1.source",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subj string) {
		w, op, err := ParseWorkerSubject(subj)
		if err != nil {
			if !errors.Is(err, ErrBadSubject) {
				t.Fatalf("ParseWorkerSubject(%q): %v does not wrap ErrBadSubject", subj, err)
			}
			return
		}
		if verr := ValidID(w); verr != nil {
			t.Fatalf("ParseWorkerSubject(%q) accepted worker %q: %v", subj, w, verr)
		}
		switch op {
		case OpGrant, OpSpend, OpEffect, OpSource:
		default:
			t.Fatalf("ParseWorkerSubject(%q) accepted op %q", subj, op)
		}
		if got := WorkerSubject(w, op); got != subj {
			t.Fatalf("round trip: ParseWorkerSubject(%q) = %q, %q but WorkerSubject gives %q", subj, w, op, got)
		}
		w2, op2, err := ParseWorkerSubject(WorkerSubject(w, op))
		if err != nil || w2 != w || op2 != op {
			t.Fatalf("re-parse of %q: %q, %q, %v", subj, w2, op2, err)
		}
	})
}

func BenchmarkParseWorkerSubject(b *testing.B) {
	subj := WorkerSubject("worker-0042", OpSpend)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseWorkerSubject(subj); err != nil {
			b.Fatal(err)
		}
	}
}

// IsValidID and ValidID accept the same ids.
func TestIsValidIDAgrees(t *testing.T) {
	for _, s := range []string{"", "w1", "a-b_C9", strings.Repeat("a", 64), strings.Repeat("a", 65),
		"a.b", "a b", "é", "a\x00", "a\xff", "*", ">", "w1\n"} {
		if got, want := IsValidID(s), ValidID(s) == nil; got != want {
			t.Errorf("%q: IsValidID %v, ValidID accepts %v", s, got, want)
		}
	}
}
