package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/audit"
	"github.com/writ-dev/writ/audit/projection"
	"github.com/writ-dev/writ/audit/web"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/telemetry"
)

// defaultListen is the web view's default address: loopback only.
const defaultListen = "127.0.0.1:9471"

func newServeCmd(g *globals) *cobra.Command {
	var (
		db      string
		listen  string
		offline bool
	)
	cmd := &cobra.Command{
		Use:   "serve --db PATH [--listen ADDR] [--offline]",
		Short: "Serve a read-only web view of the projection (and /metrics)",
		Long: `serve keeps the projection file --db up to date with ` + events.StreamName + ` (as
'auditor project --follow' does) and serves a read-only web view of it at
http://ADDR/ (default ` + defaultListen + `, loopback only):

  /                fleet: projection head, state digest and checks, stream
                   lag, workers, lanes, live grants, reviews waiting for a
                   person
  /worker/ID       a worker's timeline (filters: kind, reason, since)
  /grant/ID        a grant's chain: decision, epoch, grounds, review and
                   approval, attempt, effects, closure, what would refuse
                   it now (the 'auditor explain' view); /seq/N and
                   /review/ID likewise
  /refusals        denials, refused spends and effects, refusal summaries
                   and calls held for approval, filtered by worker, lane,
                   kind, reason and since
  /effects         contested and unverified effects
  /breakglass      break-glass cases and the pages shown under them
  /metrics         Prometheus metrics: receipts by kind, decisions by
                   decision, lane and consequence, refusals by kind and
                   reason, effects by outcome, verification failures by
                   code, projection and stream sequence and lag

The pages are rendered on the server (no scripts) and read only the
projection. They show ids, kinds, reasons and digests; targets and
idempotency keys only as digests, approval notes and policy documents not
at all — except that while a break-glass case ('auditor breakglass') runs
for a worker, that worker's timeline and grant chains show the payloads
under a banner, and each such page view is recorded in the projection
file first. The view has no authentication: keep it on loopback, or put it
behind a proxy that authenticates.

serve reads the stream with the auditor's subscribe-only NATS user; it
never needs, and must not be given, credentials that can publish. If NATS
is unreachable it keeps serving the file and retries; --offline serves the
file without connecting.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if db == "" {
				return usageErr("--db PATH is required (the projection file; serve creates it if absent)")
			}
			return serveWeb(cmd.Context(), g, db, listen, offline, nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", "", dbHelp)
	f.StringVar(&listen, "listen", defaultListen, "address of the web view and /metrics")
	f.BoolVar(&offline, "offline", false, "serve the file as it is, without reading the stream")
	return cmd
}

// streamState is what the follower shares with the web view.
type streamState struct {
	mu   sync.Mutex
	info web.StreamInfo
}

func (s *streamState) get() web.StreamInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

func (s *streamState) update(fn func(*web.StreamInfo)) {
	s.mu.Lock()
	fn(&s.info)
	s.mu.Unlock()
}

// serveWeb runs the web view until ctx ends. ready, when not nil, gets the
// listener's address once it listens (for tests).
func serveWeb(ctx context.Context, g *globals, path, listen string, offline bool, ready func(addr string)) error {
	d, err := openProjection(path)
	if err != nil {
		return err
	}
	defer d.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	met := telemetry.NewAuditor(reg)
	d.SetObserver(func(e *events.Event, v *audit.Violation) {
		met.Receipt(e)
		if v != nil {
			met.VerificationFailure(v.Code)
		}
	})
	st := &streamState{}
	var stream func() web.StreamInfo
	if !offline {
		stream = st.get
	}
	h, err := web.New(web.Config{DB: d, Stream: stream, Metrics: reg})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return usageErr("--listen %s: %v (pick a free address, e.g. 127.0.0.1:9471)", listen, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()
	fmt.Fprintf(g.stderr, "auditor: serving the projection %s at http://%s/\n", path, ln.Addr())
	if ready != nil {
		ready(ln.Addr().String())
	}

	var wg sync.WaitGroup
	fctx, stopFollow := context.WithCancel(ctx)
	if !offline {
		wg.Add(1)
		go func() {
			defer wg.Done()
			follow(fctx, g, d, st, met)
		}()
	}
	select {
	case <-ctx.Done():
	case err = <-srvErr:
	}
	stopFollow()
	wg.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return unavailableErr(fmt.Errorf("web view: %v", err))
	}
	return nil
}

// follow keeps the projection up to date until ctx ends, reconnecting
// with a growing pause when the stream cannot be read. A receipt the
// projection refuses (another stream, an unknown kind) stops following;
// the page header shows why.
func follow(ctx context.Context, g *globals, d *projection.DB, st *streamState, met *telemetry.Auditor) {
	pause := 500 * time.Millisecond
	for ctx.Err() == nil {
		err := followOnce(ctx, g, d, st, met)
		if ctx.Err() != nil {
			return
		}
		st.update(func(i *web.StreamInfo) { i.Following, i.Err = false, err.Error() })
		var ee *exitError
		if errors.As(err, &ee) && ee.code == ExitViolation {
			fmt.Fprintf(g.stderr, "auditor: stopped following: %v\n", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

func followOnce(ctx context.Context, g *globals, d *projection.DB, st *streamState, met *telemetry.Auditor) error {
	r, err := openReceipts(ctx, g.conn)
	if err != nil {
		return err
	}
	defer r.Close()
	st.update(func(i *web.StreamInfo) { i.LastSeq, i.Following, i.Err = max(i.LastSeq, r.last), true, "" })
	met.Progress(d.Head().Seq, r.last)
	from := d.Head().Seq + 1
	err = r.read(ctx, from, 0, func(m message) error {
		if err := d.Apply(m.data, m.seq); err != nil {
			return &exitError{code: ExitViolation, err: err}
		}
		last := m.seq + m.pending
		if m.pending == 0 || d.Pending() >= 1024 {
			if err := d.Flush(); err != nil {
				return &exitError{code: ExitUnavailable, err: err}
			}
			met.Progress(m.seq, last)
		}
		st.update(func(i *web.StreamInfo) { i.LastSeq = max(i.LastSeq, last) })
		return nil
	})
	if ferr := d.Flush(); err == nil {
		err = ferr
	}
	if err == nil {
		err = errors.New("the stream read ended")
	}
	return err
}
