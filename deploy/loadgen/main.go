// Command writ-load is the demo worker of deploy/compose.yaml and the load of
// `make cluster-test`: it mints grants and spends every one of them twice,
// at the same time, through two independent clients — two NATS connections
// that prefer opposite ends of the server list and use different
// idempotency keys — so that exactly one spend may win. It is built into the
// writ image as /writ-load (the image has no shell to script a loop in).
//
// Each grant i (worker w<1+i%workers>) is started at i*spread/grants: a
// grant request, then the two spends, then an effect from the winner. Every
// call is retried with its own idempotency key until the issuer answers or
// --deadline passes, exactly as an agent runtime must do after "issuer
// unavailable".
//
// Output, one line per fact, for scripts to count:
//
//	GRANT <grant_id> <seq> <worker> <i>
//	ACK <grant_id> <seq> <worker> <side> <idempotency_key>   (an acknowledged spend: attempt receipt seq)
//	REFUSED <grant_id> <seq> <reason> <worker> <side>
//	UNKNOWN <grant_id> <worker> <side> <error>              (no answer before --deadline)
//	EFFECT <grant_id> <seq> <outcome>
//	FAIL <what>                                              (an expectation that did not hold)
//	writ-load: run=.. grants=N minted=.. ok=.. already_spent=.. refused=.. unknown=.. double=.. effects=.. slow=.. max_wait=.. elapsed=..
//
// slow counts the calls that took over a second to answer (they waited
// through a failover or an outage) and max_wait is the longest.
//
// Exit codes: 0 every grant was minted and spent exactly once, its second
// spend refused as already_spent; 1 otherwise (FAIL lines say why); 2 usage.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/natsbus"
)

type config struct {
	urls       []string
	secretsDir string
	caFile     string
	workers    int
	grants     int
	spread     time.Duration
	deadline   time.Duration
	lane, tool string
	run        string
	effects    bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c config
	fs := flag.NewFlagSet("writ-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	urls := fs.String("nats-url", envOr("WRIT_NATS_URL", "nats://n1:4222,nats://n2:4222,nats://n3:4222"), "NATS URLs, comma separated (env WRIT_NATS_URL)")
	fs.StringVar(&c.secretsDir, "secrets-dir", envOr("WRIT_SECRETS_DIR", "/run/writ"), "directory holding <worker>.pw password files (env WRIT_SECRETS_DIR)")
	fs.StringVar(&c.caFile, "nats-ca", os.Getenv("WRIT_NATS_CA"), "CA certificate of a TLS NATS server (env WRIT_NATS_CA)")
	fs.IntVar(&c.workers, "workers", 4, "workers w1..wN to spread the grants over")
	fs.IntVar(&c.grants, "grants", 20, "grants to mint, each spent twice")
	fs.DurationVar(&c.spread, "spread", 10*time.Second, "start the grants evenly over this long")
	fs.DurationVar(&c.deadline, "deadline", 2*time.Minute, "how long one call keeps retrying before its outcome is UNKNOWN")
	fs.StringVar(&c.lane, "lane", "coordinator", "lane to request in")
	fs.StringVar(&c.tool, "tool", "Bash", "tool to request")
	fs.StringVar(&c.run, "run", "", "run id in idempotency keys and arguments (default: random)")
	fs.BoolVar(&c.effects, "effects", true, "the winning client reports a confirmed effect")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, u := range strings.Split(*urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			c.urls = append(c.urls, u)
		}
	}
	if len(c.urls) == 0 || c.workers < 1 || c.grants < 1 || c.spread < 0 || c.deadline <= 0 {
		fmt.Fprintln(stderr, "writ-load: need --nats-url, --workers >= 1, --grants >= 1, --spread >= 0, --deadline > 0")
		return 2
	}
	if c.run == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		c.run = hex.EncodeToString(b)
	}
	ok, err := load(ctx, c, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "writ-load:", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// out serializes lines from many goroutines.
type out struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *out) line(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, format+"\n", args...)
}

// side is one of a worker's two independent clients.
type side struct {
	name string // A or B
	cl   *client.Client
}

// dial connects worker w with the servers in the given order. PingInterval
// is short so a connection to a node that was cut off from the network is
// noticed in seconds, not minutes, and the client moves to another server.
func dial(ctx context.Context, c config, w, sideName string, urls []string) (*nats.Conn, error) {
	pw, err := os.ReadFile(filepath.Join(c.secretsDir, w+".pw"))
	if err != nil {
		return nil, fmt.Errorf("worker %s: %w", w, err)
	}
	opts := append(natsbus.ClientOptions(w, strings.TrimSpace(string(pw))),
		nats.Name("writ-load-"+w+"-"+sideName),
		nats.DontRandomize(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.PingInterval(time.Second),
		nats.MaxPingsOutstanding(3),
		nats.Timeout(2*time.Second),
	)
	if c.caFile != "" {
		opts = append(opts, nats.RootCAs(c.caFile))
	}
	deadline := time.Now().Add(c.deadline)
	for {
		nc, err := nats.Connect(strings.Join(urls, ","), opts...)
		if err == nil {
			return nc, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("worker %s side %s: connecting to %s: %w", w, sideName, strings.Join(urls, ","), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func load(ctx context.Context, c config, stdout, stderr io.Writer) (bool, error) {
	o := &out{w: stdout}
	start := time.Now()
	reversed := make([]string, len(c.urls))
	for i, u := range c.urls {
		reversed[len(c.urls)-1-i] = u
	}
	sides := make(map[string][2]side, c.workers)
	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for k := 1; k <= c.workers; k++ {
		w := fmt.Sprintf("w%d", k)
		var pair [2]side
		for j, order := range [][]string{c.urls, reversed} {
			name := string(rune('A' + j))
			nc, err := dial(ctx, c, w, name, order)
			if err != nil {
				return false, err
			}
			conns = append(conns, nc)
			pair[j] = side{name: name, cl: client.New(nc, w)}
		}
		sides[w] = pair
	}
	fmt.Fprintf(stderr, "writ-load: run %s: %d grants over %d workers, spread %s, servers %s\n",
		c.run, c.grants, c.workers, c.spread, strings.Join(c.urls, ","))

	var (
		mu      sync.Mutex
		st      stats
		wg      sync.WaitGroup
		failure []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failure = append(failure, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	for i := 0; i < c.grants; i++ {
		at := start.Add(time.Duration(i) * c.spread / time.Duration(c.grants))
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Until(at)):
		}
		w := fmt.Sprintf("w%d", 1+i%c.workers)
		wg.Add(1)
		go func(i int, w string) {
			defer wg.Done()
			r := oneGrant(ctx, c, o, i, w, sides[w])
			mu.Lock()
			st.add(r)
			mu.Unlock()
			if r.problem != "" {
				fail("grant %d (%s): %s", i, r.grantID, r.problem)
			}
		}(i, w)
	}
	wg.Wait()
	for _, f := range failure {
		o.line("FAIL %s", f)
	}
	o.line("writ-load: run=%s grants=%d minted=%d ok=%d already_spent=%d refused=%d unknown=%d double=%d effects=%d slow=%d max_wait=%s elapsed=%s",
		c.run, c.grants, st.minted, st.ok, st.alreadySpent, st.refused, st.unknown, st.double, st.effects,
		st.slow, st.maxWait.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return len(failure) == 0, nil
}

type result struct {
	grantID                            string
	minted                             bool
	ok, alreadySpent, refused, unknown int
	effect                             bool
	problem                            string
	slow                               int
	maxWait                            time.Duration
}

// took records how long one call waited for its answer.
func (r *result) took(d time.Duration) {
	if d > time.Second {
		r.slow++
	}
	r.maxWait = max(r.maxWait, d)
}

type stats struct {
	minted, ok, alreadySpent, refused, unknown, double, effects int
	slow                                                        int
	maxWait                                                     time.Duration
}

func (s *stats) add(r result) {
	if r.minted {
		s.minted++
	}
	s.ok += r.ok
	s.alreadySpent += r.alreadySpent
	s.refused += r.refused
	s.unknown += r.unknown
	if r.ok > 1 {
		s.double++
	}
	if r.effect {
		s.effects++
	}
	s.slow += r.slow
	s.maxWait = max(s.maxWait, r.maxWait)
}

func oneGrant(ctx context.Context, c config, o *out, i int, w string, pair [2]side) result {
	var r result
	args, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("echo writ-load %s %d", c.run, i)})
	gctx, cancel := context.WithTimeout(ctx, c.deadline)
	t0 := time.Now()
	env, err := pair[i%2].cl.Grant(gctx, api.GrantRequest{
		Lane: c.lane, Session: "load-" + c.run, Tool: c.tool, Args: args,
		IdempotencyKey: fmt.Sprintf("load-%s-grant-%d", c.run, i),
	})
	cancel()
	r.took(time.Since(t0))
	if err != nil {
		o.line("UNKNOWN - %s grant %v", w, oneLine(err))
		r.problem = "grant request: " + oneLine(err)
		return r
	}
	if env.Decision != grants.Permit || env.GrantID == "" {
		r.problem = fmt.Sprintf("grant request answered %s %s (%s)", env.Decision, env.Reason, env.Detail)
		return r
	}
	r.grantID, r.minted = env.GrantID, true
	o.line("GRANT %s %d %s %d", env.GrantID, env.Seq, w, i)

	type answer struct {
		env  grants.Envelope
		err  error
		took time.Duration
	}
	var answers [2]answer
	var wg sync.WaitGroup
	for j := range pair {
		wg.Add(1)
		go func(j int) {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, c.deadline)
			defer cancel()
			key := fmt.Sprintf("load-%s-spend-%d-%s", c.run, i, pair[j].name)
			t0 := time.Now()
			e, err := pair[j].cl.Spend(sctx, api.SpendRequest{GrantID: r.grantID, Args: args, IdempotencyKey: key})
			answers[j] = answer{e, err, time.Since(t0)}
			switch {
			case err != nil:
				o.line("UNKNOWN %s %s %s %s", r.grantID, w, pair[j].name, oneLine(err))
			case e.Decision == grants.Permit:
				o.line("ACK %s %d %s %s %s", r.grantID, e.Seq, w, pair[j].name, key)
			default:
				o.line("REFUSED %s %d %s %s %s", r.grantID, e.Seq, e.Reason, w, pair[j].name)
			}
		}(j)
	}
	wg.Wait()
	winner := -1
	for j, a := range answers {
		r.took(a.took)
		switch {
		case a.err != nil:
			r.unknown++
		case a.env.Decision == grants.Permit:
			r.ok++
			winner = j
		case a.env.Reason == grants.ReasonAlreadySpent:
			r.alreadySpent++
		default:
			r.refused++
		}
	}
	switch {
	case r.ok > 1:
		r.problem = "DOUBLE SPEND: both clients were told ok"
		return r
	case r.unknown > 0:
		r.problem = fmt.Sprintf("%d spend(s) got no answer within %s", r.unknown, c.deadline)
		return r
	case r.ok == 0:
		r.problem = "neither spend was acknowledged"
		return r
	case r.alreadySpent != 1:
		r.problem = "the losing spend was refused for another reason than already_spent"
		return r
	}
	if !c.effects {
		return r
	}
	ectx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	t0 = time.Now()
	e, err := pair[winner].cl.Effect(ectx, api.EffectRequest{GrantID: r.grantID, Outcome: "confirmed", Verifier: "writ-load"})
	r.took(time.Since(t0))
	switch {
	case err != nil:
		r.problem = "effect: " + oneLine(err)
	case e.Decision != grants.Permit:
		r.problem = fmt.Sprintf("effect refused: %s", e.Reason)
	default:
		r.effect = true
		o.line("EFFECT %s %d %s", r.grantID, e.Seq, e.Outcome)
	}
	return r
}

func oneLine(err error) string {
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
