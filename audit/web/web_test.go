package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/writ-dev/writ/audit/projection"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/internal/telemetry"
	"github.com/writ-dev/writ/internal/testing/receipts"
)

// server projects the every-kind scenario and serves it.
func server(t *testing.T) (*httptest.Server, *receipts.Sim) {
	t.Helper()
	return serverAt(t, time.Hour) // after the scenario's break-glass case
}

// serverAt serves the every-kind scenario with the wall clock at the
// scenario's end plus after.
func serverAt(t *testing.T, after time.Duration) (*httptest.Server, *receipts.Sim) {
	t.Helper()
	return serverPaged(t, after, 0)
}

// serverPaged is serverAt with pages of pageSize rows.
func serverPaged(t *testing.T, after time.Duration, pageSize int) (*httptest.Server, *receipts.Sim) {
	t.Helper()
	m, _ := receipts.EveryKind(t)
	d, err := projection.Open(projection.DefaultConfig(filepath.Join(t.TempDir(), "p.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for _, b := range m.Raw() {
		if err := d.Apply(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	telemetry.NewAuditor(reg).Progress(d.Head().Seq, d.Head().Seq+3)
	s, err := New(Config{DB: d, Metrics: reg, Stream: func() StreamInfo { return StreamInfo{LastSeq: d.Head().Seq + 3, Following: true} },
		Now: func() time.Time { return time.Unix(0, m.Now).Add(after) }, PageSize: pageSize})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts, m
}

func get(t *testing.T, ts *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// section is the text of the table with the given id.
func section(body, id string) string {
	i := strings.Index(body, `<table id="`+id+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(body[i:], "</table>")
	return body[i : i+j]
}

// TestPages: every page loads, shows what it is for, and the filters
// select rows; a grant's chain shows its permit, attempt and effect.
func TestPages(t *testing.T) {
	ts, m := server(t)
	at := receiptsAt(t)
	head := m.S.Chain().Head.String()
	rv8 := fsm.ReviewID("g8")
	for _, c := range []struct {
		path    string
		code    int
		table   string
		want    []string
		notWant []string
		rows    int // rows of the table (header excluded), -1: unchecked
		rowsOf  string
	}{
		{path: "/", code: 200, table: "reviews", want: []string{head, "/review/" + rv8, "ok: chain and invariants checked from seq 1", "projection lag <span class=\"warn\">3</span>"}, rows: 1},
		{path: "/", code: 200, table: "live", want: []string{"/grant/l2"}, rows: -1},
		{path: "/", code: 200, table: "orphans", want: []string{"what is this?", "/seq/" + itoa(at["orphan"])}, rows: 1},
		{path: "/worker/w5", code: 200, table: "timeline", want: []string{"approval_required", "/grant/g7", "break_glass"}, notWant: []string{"owner said yes", `id="glass"`}, rows: 8},
		{path: "/worker/w5?kind=review_consumed", code: 200, table: "timeline", rows: 1, rowsOf: `class="review_consumed"`},
		{path: "/worker/w7", code: 200, table: "timeline", want: []string{"review_superseded", "review_expired", "ship it"}, rows: -1},
		{path: "/worker/w5?kind=approval_required", code: 200, table: "timeline", rows: 2, rowsOf: `class="approval_required"`},
		{path: "/worker/nobody", code: 404, want: []string{"No receipt of worker nobody"}, rows: -1},
		{path: "/grant/g7", code: 200, table: "chain", want: []string{"<th>decision</th>", "permit", "<th>attempt</th>", "<th>effect</th>", "verifier=vault-audit", "<b>confirmed</b>", "Grant g7 (worker w5", "<th>approval</th>", "<th>consumed</th>", "review_consumed", "after review vault-read_v2_review was approved by operator:alice by command"}, rows: -1},
		{path: "/grant/l2", code: 200, table: "chain", want: []string{"<th>approval</th>", `<tr class="approval">`}, notWant: []string{"<th>consumed</th>"}, rows: -1},
		{path: "/review/q3-report_v2_keep", code: 200, table: "chain", want: []string{"q3-report_v2_review", "approved by operator:alice", "q3-report_v2_keep, ship it", "from dana on slack:#finance", "out/q3-report.pdf v2", "authorizes review_ready-&gt;send toward class:finance", "reviewer role finance"}, rows: -1},
		{path: "/review/notes_v1_review", code: 200, table: "chain", want: []string{"rejected by operator:alice", "no to notes_v1_review, the numbers are wrong", "review_rejected"}, rows: -1},
		{path: "/review/q3-report_v1_review", code: 200, table: "chain", want: []string{"superseded by a new version", "review_superseded"}, rows: -1},
		{path: "/review/" + fsm.ReviewID("x1"), code: 200, table: "chain", want: []string{"the approval lapsed unused", "review_expired"}, rows: -1},
		{path: "/seq/" + itoa(at["orphan"]), code: 200, table: "chain", want: []string{"review_orphaned", "decided nothing"}, rows: -1},
		{path: "/grant/g1", code: 200, table: "chain", want: []string{"<b>contested</b>", "<th>later</th>"}, rows: -1},
		{path: "/grant/nope", code: 404, want: []string{"no grant"}, rows: -1},
		{path: "/review/" + fsm.ReviewID("g6"), code: 200, table: "chain", want: []string{"operator:alice", "/grant/g7", "<th>consumed</th>", "vault-read_v2_review"}, notWant: []string{"owner said yes"}, rows: -1},
		{path: "/refusals", code: 200, table: "rows", rows: -1, want: []string{"worker_revoked", "already_spent", "unknown_grant", "review_required"}},
		{path: "/refusals?kind=approval_required", code: 200, table: "rows", rows: 4, rowsOf: `class="approval_required"`},
		{path: "/refusals?worker=w2&reason=worker_revoked", code: 200, table: "rows", rows: 1, rowsOf: `class="deny"`},
		{path: "/refusals?lane=coordinator&kind=approval_required", code: 200, table: "rows", rows: 4, rowsOf: `class="approval_required"`},
		{path: "/refusals?since=1h500ms", code: 200, table: "rows", rows: 0},
		{path: "/refusals?since=1h2s", code: 200, table: "rows", rows: 1},
		{path: "/refusals?kind=bogus", code: 400, want: []string{"not a receipt kind"}, rows: -1},
		{path: "/effects", code: 200, table: "contested", want: []string{"/grant/g1", "/grant/rt2"}, rows: 2}, // rt2: a route_stale effect
		{path: "/effects", code: 200, table: "unverified", want: []string{"/grant/g3"}, rows: 1},
		{path: "/", code: 200, table: "routes", want: []string{"/route/" + receipts.Route}, rows: 1, rowsOf: `class="lease_revoked"`},
		{path: "/route/" + receipts.Route, code: 200, table: "leases", want: []string{"generation 3, owner cron1", "<b>revoked</b>", "/grant/rt1", "/grant/rt2",
			"from cron2 generation 2", "/seq/" + itoa(at["route_renewed"]), "/seq/" + itoa(at["route_lapsed"]), "/seq/" + itoa(at["route_revoked"])}, rows: 3},
		{path: "/route/nope", code: 404, want: []string{"no route"}, rows: -1},
		{path: "/grant/rt1", code: 200, table: "chain", want: []string{`href="/route/` + receipts.Route + `"`, "generation 1 (cron1's lease): released", "ended_after_attempt"}, rows: -1},
		{path: "/grant/rt2", code: 200, table: "chain", want: []string{"<b>contested</b>", "late: effect seq", "(route_lapsed, seq"}, rows: -1},
		{path: "/metrics", code: 200, want: []string{"writ_auditor_projection_lag 3"}, rows: -1},
	} {
		code, body := get(t, ts, c.path)
		if code != c.code {
			t.Errorf("%s: status %d, want %d\n%s", c.path, code, c.code, body)
			continue
		}
		text := body
		if c.table != "" {
			text = section(body, c.table)
			if text == "" {
				t.Errorf("%s: no table %s", c.path, c.table)
				continue
			}
		}
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q", c.path, w)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(body, w) {
				t.Errorf("%s shows %q", c.path, w)
			}
		}
		if c.rows >= 0 {
			n := strings.Count(text, "<tr") - 1
			if c.rowsOf != "" && strings.Count(text, "<tr "+c.rowsOf) != n {
				t.Errorf("%s: %d rows, not all %s:\n%s", c.path, n, c.rowsOf, text)
			}
			if n != c.rows {
				t.Errorf("%s: %d rows in %s, want %d:\n%s", c.path, n, c.table, c.rows, text)
			}
		}
	}
}

// TestBreakGlassViews: while the scenario's break-glass case for w5 runs,
// w5's pages show the payloads (the target, keys and the approval note)
// under a banner and each view is recorded; other workers' pages and the
// same pages after the case has expired show digests only.
func TestBreakGlassViews(t *testing.T) {
	ts, m := serverAt(t, 0)
	var target string
	for _, b := range m.Raw() {
		e, _ := events.Decode(b)
		if e.Kind == events.KindPermit && e.GrantID == "g7" {
			target = e.Target
		}
	}
	if target == "" {
		t.Fatal("g7's permit has no target: the test proves nothing")
	}
	for _, c := range []struct {
		path     string
		payloads bool
	}{
		{"/grant/g7", true},
		{"/worker/w5", true},
		{"/review/" + fsm.ReviewID("g6"), true},
		{"/grant/g1", false}, // w1's
		{"/worker/w1", false},
	} {
		code, body := get(t, ts, c.path)
		if code != 200 {
			t.Fatalf("%s: %d", c.path, code)
		}
		if got := strings.Contains(body, target) && strings.Contains(body, `id="glass"`); got != c.payloads {
			t.Errorf("%s: payloads shown %v, want %v", c.path, got, c.payloads)
		}
	}
	_, body := get(t, ts, "/worker/w5")
	if !strings.Contains(body, "owner said yes") {
		t.Error("the approval note is not shown under the case")
	}
	_, body = get(t, ts, "/breakglass")
	views := section(body, "views")
	if n := strings.Count(views, "<tr") - 1; n != 4 || !strings.Contains(views, "/grant/g7") || strings.Contains(views, "/grant/g1") {
		t.Errorf("recorded views (%d):\n%s", n, views)
	}
	if !strings.Contains(section(body, "cases"), "inc-1") || !strings.Contains(section(body, "cases"), "open") {
		t.Errorf("cases:\n%s", section(body, "cases"))
	}

	after, _ := serverAt(t, time.Hour)
	if _, body := get(t, after, "/grant/g7"); strings.Contains(body, target) || strings.Contains(body, `id="glass"`) {
		t.Error("payloads shown after the case expired")
	}
}

// receiptsAt is the every-kind scenario's sequence numbers by name.
func receiptsAt(t *testing.T) map[string]uint64 {
	_, at := receipts.EveryKind(t)
	return at
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestPagesFollowOlderLinks: following a listing's "older" links from its
// first page visits every row of the unpaged listing exactly once, in
// order, and the last page has no link.
func TestPagesFollowOlderLinks(t *testing.T) {
	whole, _ := server(t)
	paged, _ := serverPaged(t, time.Hour, 2)
	seqs := func(body, table string) []string {
		var out []string
		for _, row := range strings.Split(section(body, table), "<tr class=")[1:] {
			i := strings.Index(row, `<a href="/seq/`)
			j := strings.Index(row[i+len(`<a href="/seq/`):], `"`)
			out = append(out, row[i+len(`<a href="/seq/`):][:j])
		}
		return out
	}
	for _, c := range []struct{ path, table string }{
		{"/refusals", "rows"},
		{"/refusals?lane=coordinator", "rows"},
		{"/worker/w5", "timeline"},
		{"/worker/w7?kind=review_opened", "timeline"},
	} {
		code, body := get(t, whole, c.path)
		if code != 200 {
			t.Fatalf("%s: status %d", c.path, code)
		}
		want := seqs(body, c.table)
		if len(want) < 3 || strings.Contains(body, `id="older"`) {
			t.Fatalf("%s unpaged: %d rows (want at least 3 and no older link)", c.path, len(want))
		}
		var got []string
		for path, pages := c.path, 0; path != ""; pages++ {
			if pages > len(want) {
				t.Fatalf("%s: more pages than rows", c.path)
			}
			code, body := get(t, paged, path)
			if code != 200 {
				t.Fatalf("%s: status %d\n%s", path, code, body)
			}
			rows := seqs(body, c.table)
			if len(rows) > 2 {
				t.Fatalf("%s: %d rows on a page of 2", path, len(rows))
			}
			got = append(got, rows...)
			path = ""
			if i := strings.Index(body, `id="older" href="`); i >= 0 {
				rest := body[i+len(`id="older" href="`):]
				path = strings.ReplaceAll(rest[:strings.Index(rest, `"`)], "&amp;", "&")
			} else if len(rows) == 2 && len(got) < len(want) {
				t.Fatalf("%s: a full page with rows left and no older link", path)
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: pages give seqs %v, unpaged %v", c.path, got, want)
		}
	}
	if code, body := get(t, paged, "/refusals?before=x"); code != 400 || !strings.Contains(body, "not a receipt sequence number") {
		t.Errorf("before=x: status %d", code)
	}
}
