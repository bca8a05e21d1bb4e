// Package web is the auditor's read-only web view of a projection
// (audit/projection): server-rendered HTML, no scripts.
//
// Pages:
//
//	/                    fleet: projection head and checks, workers, lanes,
//	                     live grants, routes, reviews waiting for a person,
//	                     replies bound to no review
//	/worker/{id}         a worker's timeline (filters: kind, reason, since)
//	/grant/{id}          the chain of a grant (the explain view)
//	/seq/{n}             the chain behind one receipt
//	/review/{ref}        a review's decision record (by id, caption or keep
//	                     token): what it covers, who decided it and how,
//	                     every receipt of it and the grant that used it
//	/route/{name}        a route's leases: every generation, its owner,
//	                     renewals, how it ended and the grants bound to it
//	/refusals            denials, refused spends and effects, and calls
//	                     held for approval (filters: worker, lane, kind,
//	                     reason, since)
//	/effects             contested and unverified effects, and effect
//	                     receipts that did not count
//	/breakglass          break-glass cases and the pages shown under them
//	/metrics             Prometheus metrics (when a registry is given)
//
// The view reads only the projection. It shows identifiers, kinds,
// reasons and digests; targets and idempotency keys only as digests,
// approval notes and policy documents not at all. A person's reply that
// decided a review (or bound to none) is shown verbatim: it is the
// decision itself, as the approving actor is. While a break-glass
// case (a break_glass receipt) runs for a worker, that worker's timeline
// and the chains of its grants also show their receipts' payloads, under
// a banner, and every such page view is recorded in the projection file
// before the page is sent (/breakglass lists them).
package web

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/writ-dev/writ/audit/projection"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/telemetry"
)

//go:embed templates/*.html
var templateFS embed.FS

// StreamInfo is what the server knows of the stream it projects.
type StreamInfo struct {
	// LastSeq is the stream's last sequence when last seen (0: unknown).
	LastSeq uint64
	// Following says whether the projection is being kept up to date.
	Following bool
	// Err is the last error reading the stream, if any.
	Err string
}

// Config configures a Server.
type Config struct {
	DB *projection.DB
	// Stream reports the stream's state; nil when the server only reads
	// a file.
	Stream func() StreamInfo
	// Metrics is served at /metrics when not nil.
	Metrics *prometheus.Registry
	// Now is the wall clock (for --since durations); time.Now when nil.
	Now func() time.Time
	// PageSize is how many rows a page of receipts or refusals shows
	// before its "older" link (0: DefaultPageSize).
	PageSize int
}

// DefaultPageSize is the page size when Config.PageSize is 0.
const DefaultPageSize = 200

// Server serves the pages.
type Server struct {
	cfg  Config
	tmpl map[string]*template.Template
	mux  *http.ServeMux
}

var funcs = template.FuncMap{
	"ts": func(t int64) string {
		if t == 0 {
			return "-"
		}
		return time.Unix(0, t).UTC().Format("2006-01-02 15:04:05.000")
	},
	"short": func(h events.Hash) string { return h.Short() },
	"dash": func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	},
	"kv": func(m map[string]string) []string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([]string, len(keys))
		for i, k := range keys {
			v := m[k]
			if strings.HasSuffix(k, "digest") && len(v) > 16 {
				v = v[:16]
			}
			out[i] = k + "=" + v
		}
		return out
	},
	"path": url.PathEscape,
	"payload": func(m map[uint64]map[string]string, seq uint64) []string {
		p := m[seq]
		keys := make([]string, 0, len(p))
		for k := range p {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = k + "=" + strconv.Quote(p[k])
		}
		return out
	},
}

// New builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.DB == nil {
		return nil, errors.New("web: a projection is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.PageSize == 0:
		cfg.PageSize = DefaultPageSize
	case cfg.PageSize < 0:
		return nil, fmt.Errorf("web: PageSize %d: want a positive number of rows (0 for %d)", cfg.PageSize, DefaultPageSize)
	}
	s := &Server{cfg: cfg, tmpl: map[string]*template.Template{}, mux: http.NewServeMux()}
	for _, page := range []string{"fleet", "worker", "chain", "refusals", "effects", "breakglass", "route"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", page, err)
		}
		s.tmpl[page] = t
	}
	s.mux.HandleFunc("GET /{$}", s.fleet)
	s.mux.HandleFunc("GET /worker/{id}", s.worker)
	s.mux.HandleFunc("GET /grant/{id}", s.chain("grant:"))
	s.mux.HandleFunc("GET /seq/{id}", s.chain("seq:"))
	s.mux.HandleFunc("GET /review/{id}", s.chain("review:"))
	s.mux.HandleFunc("GET /route/{name}", s.route)
	s.mux.HandleFunc("GET /refusals", s.refusals)
	s.mux.HandleFunc("GET /effects", s.effects)
	s.mux.HandleFunc("GET /breakglass", s.breakGlass)
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", telemetry.Handler(cfg.Metrics))
	}
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	s.mux.ServeHTTP(w, r)
}

// page is what every template gets.
type page struct {
	// Glass is the break-glass case this page's payloads are shown
	// under, or nil (digests only).
	Glass  *projection.Case
	Title  string
	Status projection.Status
	Stream StreamInfo
	Lag    uint64
	Checks string
	Data   any
}

func (s *Server) render(w http.ResponseWriter, name, title string, data any) {
	s.renderGlass(w, name, title, data, nil)
}

func (s *Server) renderGlass(w http.ResponseWriter, name, title string, data any, glass *projection.Case) {
	st, err := s.cfg.DB.Status()
	if err != nil {
		http.Error(w, "reading the projection: "+err.Error(), http.StatusInternalServerError)
		return
	}
	p := page{Title: title, Status: st, Data: data, Checks: Checks(st), Glass: glass}
	if s.cfg.Stream != nil {
		p.Stream = s.cfg.Stream()
		if p.Stream.LastSeq > st.Seq {
			p.Lag = p.Stream.LastSeq - st.Seq
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.tmpl[name].Execute(w, p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// Checks describes a projection's verification status in one line.
func Checks(st projection.Status) string {
	switch {
	case st.Violation != nil:
		return "FAILED: " + st.Violation.Error()
	case st.Seq == 0:
		return "no receipts yet"
	case st.VerifiedFrom <= 1:
		return fmt.Sprintf("ok: chain and invariants checked from seq 1 to %d", st.Seq)
	case st.VerifiedFrom > st.Seq:
		return "nothing checked by this run (run 'auditor verify' for the whole stream)"
	}
	return fmt.Sprintf("ok from seq %d to %d (earlier receipts checked by earlier runs; 'auditor verify' checks the whole stream)", st.VerifiedFrom, st.Seq)
}

type laneCount struct {
	Lane    string
	Workers int
}

type fleetData struct {
	Workers    []projection.Worker
	Lanes      []laneCount
	LiveGrants []projection.Grant
	LiveTotal  int
	Reviews    []projection.Review
	Orphans    []projection.Orphan
	Routes     []routeRow
}

// routeRow is a route as the fleet page lists it: its current lease's
// state at the projection's last receipt.
type routeRow struct {
	projection.Route
	State string // live, released, lapsed or revoked
}

func routeState(r *projection.Route, now int64) string {
	if n := len(r.Leases); n > 0 {
		if end, _ := r.Leases[n-1].Ended(now); end != "" {
			return end
		}
	}
	return "live"
}

func (s *Server) fleet(w http.ResponseWriter, r *http.Request) {
	st, err := s.cfg.DB.Status()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ws, err := s.cfg.DB.Workers()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	lanes := map[string]int{}
	for _, wk := range ws {
		lanes[wk.Lane]++
	}
	d := fleetData{Workers: ws}
	for l, n := range lanes {
		d.Lanes = append(d.Lanes, laneCount{l, n})
	}
	sort.Slice(d.Lanes, func(i, j int) bool { return d.Lanes[i].Lane < d.Lanes[j].Lane })
	live, err := s.cfg.DB.GrantsIn(projection.SetOpen, func(g *projection.Grant) bool { return g.ExpiresAt > st.Time })
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	d.LiveTotal = len(live)
	d.LiveGrants = live[:min(len(live), 100)]
	d.Reviews, err = s.cfg.DB.Reviews(func(rv *projection.Review) bool { return rv.Open() })
	if err == nil {
		d.Orphans, err = s.cfg.DB.Orphans()
	}
	var routes []projection.Route
	if err == nil {
		routes, err = s.cfg.DB.Routes()
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for i := range routes {
		d.Routes = append(d.Routes, routeRow{routes[i], routeState(&routes[i], st.Time)})
	}
	s.render(w, "fleet", "Fleet", d)
}

// leaseRow is one lease of a route page, with how it stands at the
// projection's last receipt ("" while live).
type leaseRow struct {
	projection.Lease
	State   string
	EndedAt int64
}

type routeData struct {
	Route  *projection.Route
	State  string
	Leases []leaseRow
	Err    string
}

// route shows one route's record: every generation's lease.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	st, err := s.cfg.DB.Status()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var d routeData
	rt, err := s.cfg.DB.Route(name)
	switch {
	case errors.Is(err, projection.ErrNotFound):
		w.WriteHeader(http.StatusNotFound)
		d.Err = fmt.Sprintf("no route %q in the projection (at seq %d)", name, st.Seq)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	default:
		d.Route, d.State = &rt, routeState(&rt, st.Time)
		for _, l := range rt.Leases {
			row := leaseRow{Lease: l}
			row.State, row.EndedAt = l.Ended(st.Time)
			d.Leases = append(d.Leases, row)
		}
	}
	s.render(w, "route", "Route "+name, d)
}

// filterForm is the filter form's values, echoed back into it.
type filterForm struct {
	Worker, Lane, Kind, Reason, Since string
	Err                               string
	// Older is the link to the next page (the rows before this page's
	// oldest), set when this page is full.
	Older string
}

// older returns the link to the page after one whose oldest row has
// sequence number last: the same query with before=last.
func older(r *http.Request, last uint64) string {
	q := r.URL.Query()
	q.Set("before", strconv.FormatUint(last, 10))
	return r.URL.Path + "?" + q.Encode()
}

func (s *Server) parseFilter(r *http.Request) (projection.Filter, filterForm) {
	q := r.URL.Query()
	ff := filterForm{Worker: q.Get("worker"), Lane: q.Get("lane"), Kind: q.Get("kind"), Reason: q.Get("reason"), Since: q.Get("since")}
	f := projection.Filter{Worker: ff.Worker, Lane: ff.Lane, Reason: ff.Reason, Limit: s.cfg.PageSize}
	if b := q.Get("before"); b != "" {
		n, err := strconv.ParseUint(b, 10, 64)
		if err != nil || n == 0 {
			ff.Err = fmt.Sprintf("before %q is not a receipt sequence number (a positive integer)", b)
		}
		f.Before = n
	}
	if ff.Kind != "" {
		k, ok := events.KindFromString(ff.Kind)
		if !ok {
			ff.Err = fmt.Sprintf("kind %q is not a receipt kind", ff.Kind)
		}
		f.Kind = k
	}
	if ff.Since != "" {
		if d, err := time.ParseDuration(ff.Since); err == nil && d > 0 {
			f.Since = s.cfg.Now().Add(-d).UnixNano()
		} else if t, err := time.Parse(time.RFC3339Nano, ff.Since); err == nil {
			f.Since = t.UnixNano()
		} else {
			ff.Err = fmt.Sprintf("since %q is neither a duration (1h) nor an RFC 3339 time", ff.Since)
		}
	}
	return f, ff
}

type workerData struct {
	ID       string
	Worker   *projection.Worker
	Events   []events.Event
	Form     filterForm
	Payloads map[uint64]map[string]string // under a break-glass case only
}

// payload is what a receipt carries that pages show only under a
// break-glass case: the target, the idempotency key, the note or reason,
// the working directory and the resolved path.
func payload(e *events.Event) map[string]string {
	m := map[string]string{}
	for k, v := range map[string]string{"target": e.Target, "idempotency_key": e.IdemKey, "detail": e.Detail,
		"cwd": e.Cwd, "resolved": e.Resolved, "target_label": e.TargetLabel} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// openGlass returns the break-glass case that opens worker's payloads now,
// after recording this page view under it; nil when no case runs (or the
// view could not be recorded: then the page shows digests only).
func (s *Server) openGlass(r *http.Request, worker string) *projection.Case {
	if worker == "" {
		return nil
	}
	now := s.cfg.Now()
	c, ok, err := s.cfg.DB.ActiveCase(worker, now.UnixNano())
	if err != nil || !ok {
		return nil
	}
	if err := s.cfg.DB.RecordView(projection.View{Time: now.UnixNano(), CaseID: c.ID, Worker: worker,
		Path: r.URL.RequestURI(), Remote: r.RemoteAddr}); err != nil {
		return nil
	}
	return &c
}

func (s *Server) worker(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f, ff := s.parseFilter(r)
	f.Worker, f.Lane = id, ""
	ff.Worker = id
	d := workerData{ID: id, Form: ff}
	ws, err := s.cfg.DB.Workers()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for i := range ws {
		if ws[i].ID == id {
			d.Worker = &ws[i]
		}
	}
	if d.Worker == nil {
		w.WriteHeader(http.StatusNotFound)
	}
	if ff.Err == "" {
		d.Events, err = s.cfg.DB.Timeline(f)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if len(d.Events) == f.Limit {
			d.Form.Older = older(r, d.Events[len(d.Events)-1].Seq)
		}
	}
	glass := s.openGlass(r, id)
	if glass != nil {
		d.Payloads = map[uint64]map[string]string{}
		for i := range d.Events {
			if p := payload(&d.Events[i]); len(p) > 0 {
				d.Payloads[d.Events[i].Seq] = p
			}
		}
	}
	s.renderGlass(w, "worker", "Worker "+id, d, glass)
}

type chainData struct {
	X        *projection.Explanation
	Err      string
	Payloads map[uint64]map[string]string // under a break-glass case only
}

// chainWorker is the worker whose side effect an explanation is about.
func chainWorker(x *projection.Explanation) string {
	switch {
	case x == nil:
		return ""
	case x.Grant != nil:
		return x.Grant.Worker
	case x.Decision != nil:
		return x.Decision.Fields["worker"]
	case x.Event != nil:
		return x.Event.Fields["worker"]
	}
	return ""
}

// chainSeqs are the receipts an explanation shows.
func chainSeqs(x *projection.Explanation) []uint64 {
	var out []uint64
	for _, st := range []*projection.Step{x.Decision, x.Epoch, x.Approval, x.Consumed, x.Attempt, x.Event} {
		if st != nil {
			out = append(out, st.Seq)
		}
	}
	for _, list := range [][]projection.Step{x.Sources, x.ReviewSteps, x.Effects, x.Refusals, x.Later} {
		for _, st := range list {
			if st.Seq != 0 {
				out = append(out, st.Seq)
			}
		}
	}
	return out
}

func (s *Server) chain(prefix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		x, err := s.cfg.DB.ExplainArg(prefix + r.PathValue("id"))
		d := chainData{X: x}
		if err != nil {
			d.Err = err.Error()
			if errors.Is(err, projection.ErrNotFound) {
				w.WriteHeader(http.StatusNotFound)
			} else {
				w.WriteHeader(http.StatusBadRequest)
			}
		}
		glass := s.openGlass(r, chainWorker(x))
		if glass != nil {
			d.Payloads = map[uint64]map[string]string{}
			for _, seq := range chainSeqs(x) {
				if e, err := s.cfg.DB.Event(seq); err == nil && e.Worker == glass.Worker {
					if p := payload(&e); len(p) > 0 {
						d.Payloads[seq] = p
					}
				}
			}
		}
		s.renderGlass(w, "chain", strings.TrimSuffix(prefix, ":")+" "+r.PathValue("id"), d, glass)
	}
}

type glassData struct {
	Cases []projection.Case
	Views []projection.View
	Now   int64
}

// breakGlass lists the break-glass cases and the pages shown under them.
func (s *Server) breakGlass(w http.ResponseWriter, r *http.Request) {
	var d glassData
	var err1, err2 error
	d.Cases, err1 = s.cfg.DB.Cases()
	d.Views, err2 = s.cfg.DB.Views(500)
	if err := errors.Join(err1, err2); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	d.Now = s.cfg.Now().UnixNano()
	s.render(w, "breakglass", "Break-glass cases", d)
}

type refusalsData struct {
	Rows  []projection.Row
	Form  filterForm
	Kinds []string
}

func (s *Server) refusals(w http.ResponseWriter, r *http.Request) {
	f, ff := s.parseFilter(r)
	d := refusalsData{Form: ff}
	for _, k := range []events.Kind{events.KindDeny, events.KindApprovalRequired, events.KindSpendRefused, events.KindEffectRefused, events.KindRefusalSummary} {
		d.Kinds = append(d.Kinds, k.String())
	}
	if ff.Err != "" {
		w.WriteHeader(http.StatusBadRequest)
	} else {
		var err error
		d.Rows, err = s.cfg.DB.Refusals(f)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if len(d.Rows) == f.Limit {
			d.Form.Older = older(r, d.Rows[len(d.Rows)-1].Seq)
		}
	}
	s.render(w, "refusals", "Refusals and held calls", d)
}

type effectsData struct {
	Contested  []projection.Grant
	Unverified []projection.Grant
	Anomalous  []projection.Grant
}

func (s *Server) effects(w http.ResponseWriter, r *http.Request) {
	var d effectsData
	var err1, err2, err3 error
	d.Contested, err1 = s.cfg.DB.GrantsIn(projection.SetContested, nil)
	d.Unverified, err2 = s.cfg.DB.GrantsIn(projection.SetOpen, func(g *projection.Grant) bool { return g.Closure() == projection.ClosureUnverified })
	d.Anomalous, err3 = s.cfg.DB.GrantsIn(projection.SetAnomalous, nil)
	if err := errors.Join(err1, err2, err3); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.render(w, "effects", "Contested and unverified effects", d)
}
