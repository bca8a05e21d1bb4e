package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/writ-dev/writ/audit/projection"
)

// TestProjectAndExplain: project builds the file from the stream, a
// second run after more receipts resumes from the committed head and
// reaches the issuer's digest; explain answers from the file for a
// grant, a receipt sequence and an unknown id, in text and JSON.
func TestProjectAndExplain(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	is := newIssuer()
	is.scenario(10)
	b.publish(is.receipts()...)
	db := filepath.Join(t.TempDir(), "p.db")

	projectJSON := func() projectReport {
		t.Helper()
		r := runCLI(t, "project", "--json", "--db", db, "--nats-url", url)
		if r.code != ExitOK {
			t.Fatalf("project: exit %d: %s", r.code, r.stderr)
		}
		var rep projectReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%q: %v", r.stdout, err)
		}
		return rep
	}
	first := projectJSON()
	if first.Seq != is.s.Chain().Seq || first.Digest != is.s.Digest() || first.Projected != first.Seq {
		t.Fatalf("first run: %+v, issuer at %d %s", first, is.s.Chain().Seq, is.s.Digest())
	}
	is.scenario(20)
	b.publish(is.receipts()...)
	second := projectJSON()
	if second.Seq != is.s.Chain().Seq || second.Digest != is.s.Digest() || second.Projected != second.Seq-first.Seq {
		t.Fatalf("second run: %+v, issuer at %d %s", second, is.s.Chain().Seq, is.s.Digest())
	}
	if second.VerifiedFrom != first.Seq+1 || second.Violation != nil {
		t.Fatalf("checks: %+v", second.Status)
	}

	// g3: spent, confirmed by fs, then failed by http: contested.
	r := runCLI(t, "explain", "--db", db, "g3")
	if r.code != ExitOK {
		t.Fatalf("explain: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"grant g3 (projection at seq", "  decision   seq ", " permit ", "  attempt    seq ",
		"verifier=fs", "verifier=http", "  closure    contested", "Grant g3 (worker w0, lane isolated, tool Read) was permitted"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("explain g3 lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t, "explain", "--db", db, "--json", "grant:g0")
	var x projection.Explanation
	if err := json.Unmarshal([]byte(r.stdout), &x); err != nil || r.code != ExitOK {
		t.Fatalf("explain --json: %v %s %s", err, r.stdout, r.stderr)
	}
	if x.Closure != "confirmed" || x.Attempt == nil || len(x.Effects) != 1 || x.Effects[0].Fields["verifier"] != "fs" {
		t.Fatalf("explain g0: %+v", x)
	}
	r = runCLI(t, "explain", "--db", db, "seq:"+itoa(x.Attempt.Seq))
	if r.code != ExitOK || !strings.Contains(r.stdout, "Grant g0 ") {
		t.Fatalf("explain by seq: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "explain", "--db", db, "nope")
	if r.code != ExitViolation || !strings.Contains(r.stderr, "neither a grant nor a review") {
		t.Fatalf("explain nope: %d %s", r.code, r.stderr)
	}
	r = runCLI(t, "explain", "g0")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--db PATH is required") {
		t.Fatalf("explain without --db: %d %s", r.code, r.stderr)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
