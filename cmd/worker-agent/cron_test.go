package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/audit"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// cronPolicy declares job-* routes for workers w1 and w2, with leases of at
// most 2s, under which they may read.
const cronPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"file_read","tools":["Read"],"operation":"read","consequence":"local_read","target":{"field":"file_path","canon":"path"}},
  {"id":"vault","tools":["vault_read"],"operation":"read","consequence":"credential_use","target":{"field":"name","canon":"digest"}}],
 "review":{"classes":["credential_use"]},
 "routes":[{"name":"job-*","workers":["w1","w2"],"max_ttl":"2s","consequences":["local_read","credential_use"]}]}`

// cronIssuer starts an issuer under cronPolicy and waits until the leader
// has raised the receipt format to the route level.
func cronIssuer(t *testing.T) (*testenv.Single, *nats.Conn) {
	t.Helper()
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc, err := nats.Connect(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if e, err := client.New(nc, "").SetPolicy(ctx, json.RawMessage(cronPolicy)); err != nil || e.Decision != grants.Permit {
		t.Fatalf("set policy: %+v %v", e, err)
	}
	testenv.WaitFor(t, 10*time.Second, "the route receipt format", func() bool {
		return env.Service.Status().ReceiptFormatLevel >= fsm.ReceiptFormatRoutes
	})
	return env, nc
}

// jobScript is a cron job: ask for a grant for one read under the route
// (WRIT_ROUTE and WRIT_ROUTE_GEN come from worker-agent cron) and spend
// it, appending both answers to $OUT.
const jobScript = `set -u
args='{"file_path":"/work/'"$WRIT_WORKER"'/notes.md"}'
out=$("$WA" request --lane coordinator --tool Read --args "$args")
echo "request $WRIT_ROUTE_GEN $out" >> "$OUT"
grant=$(printf '%s' "$out" | sed -n 's/.*"grant_id":"\([^"]*\)".*/\1/p')
[ -n "$grant" ] && echo "spend $WRIT_ROUTE_GEN $("$WA" spend "$grant" --args "$args")" >> "$OUT"
sleep 0.3
`

// checkRouteStream runs the auditor over the issuer's receipts (which
// fails on a second live owner, a generation that does not increase or an
// attempt after its generation ended) and checks that each generation of
// route has exactly one owner and every attempt bound to a generation was
// made by that generation's owner. It returns the owners by generation and
// the attempts.
func checkRouteStream(t *testing.T, env *testenv.Single, route string) (map[uint64]string, []events.Event) {
	t.Helper()
	// The state digest the issuer reports with its sequence: the workers
	// (and the leader's lapse records) may add receipts meanwhile, so the
	// auditor's fold is compared at that sequence.
	st := env.Service.Status()
	want, err := events.ParseHash(st.StateDigest)
	if err != nil {
		t.Fatal(err)
	}
	evs := receipts(t, env)
	v := audit.NewVerifier(audit.Options{})
	for _, e := range evs {
		if err := v.AddEvent(e); err != nil {
			t.Fatalf("auditor: %v", err)
		}
		if e.Seq == st.Seq {
			if err := v.CheckDigest(want); err != nil {
				t.Fatal(err)
			}
		}
	}
	owners := map[uint64]string{}
	var attempts []events.Event
	for _, e := range evs {
		if e.Route != route {
			continue
		}
		switch e.Kind {
		case events.KindRouteAcquired, events.KindRouteTaken:
			if prev, ok := owners[e.RouteGen]; ok {
				t.Fatalf("generation %d acquired twice (%s, then %s)", e.RouteGen, prev, e.Worker)
			}
			owners[e.RouteGen] = e.Worker
		case events.KindAttempt:
			if owners[e.RouteGen] != e.Worker {
				t.Fatalf("attempt by %s under generation %d, owned by %q", e.Worker, e.RouteGen, owners[e.RouteGen])
			}
			attempts = append(attempts, e)
		}
	}
	return owners, attempts
}

// TestCronWorkersRaceForOneRoute: two worker-agent cron processes run the
// same job under one route every 1.2s with 1s leases, so each lease lapses
// between runs and both race for the next. For about 12s: the auditor
// finds no second live owner, no non-increasing generation and no attempt
// after its generation ended; every generation has one owner, and every
// attempt was made by its generation's owner.
func TestCronWorkersRaceForOneRoute(t *testing.T) {
	wa := builtBinary(t) // built before any deadline starts
	env, _ := cronIssuer(t)
	dir := t.TempDir()
	var procs []*exec.Cmd
	for _, w := range []string{"w1", "w2"} {
		out := filepath.Join(dir, w+".log")
		cmd := exec.Command(wa, "cron", "--worker", w, "--lane", "coordinator", "--route", "job-race",
			"--every", "1200ms", "--ttl", "1s", "--grace", "500ms", "--", "sh", "-c", jobScript)
		cmd.Env = binEnv(dir, "WRIT_NATS_URL="+env.URL, "WA="+wa, "OUT="+out)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("%s stderr:\n%s", w, stderr.String())
			}
		})
	}
	// Run until both workers have owned the route, or 12s.
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		owners, _ := checkRouteStream(t, env, "job-race")
		seen := map[string]bool{}
		for _, w := range owners {
			seen[w] = true
		}
		if len(seen) == 2 && len(owners) >= 4 {
			break
		}
	}
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	owners, attempts := checkRouteStream(t, env, "job-race")
	if len(owners) < 2 || len(attempts) < 2 {
		t.Fatalf("%d generations, %d attempts: the workers did not take turns", len(owners), len(attempts))
	}
	t.Logf("%d generations %v, %d attempts", len(owners), owners, len(attempts))
}

// TestCronStaleWorkerIsFenced: a cron worker (w1) holds a route with a 1s
// lease and its job has a grant minted under generation 1; the worker and
// its job are stopped (SIGSTOP) past the lease, and w2 takes the route
// over (generation 2). The job, continued, spends the grant it was minted
// before the pause and asks for and spends a new one: both spends are
// refused owner_stale naming both generations. The cron worker, continued,
// finds its renewal refused, stops the job (SIGTERM) and exits 12.
func TestCronStaleWorkerIsFenced(t *testing.T) {
	wa := builtBinary(t)
	env, nc := cronIssuer(t)
	dir := t.TempDir()
	script := `set -u
trap 'touch "$DIR/terminated"; exit 143' TERM
args='{"file_path":"/work/w1/notes.md"}'
out=$("$WA" request --lane coordinator --tool Read --args "$args")
pre=$(printf '%s' "$out" | sed -n 's/.*"grant_id":"\([^"]*\)".*/\1/p')
echo $$ > "$DIR/child.pid"
touch "$DIR/ready"
while [ ! -f "$DIR/go" ]; do sleep 0.05; done
"$WA" spend "$pre" --args "$args" > "$DIR/spend_pre.json" 2>/dev/null
out=$("$WA" request --lane coordinator --tool Read --args "$args")
echo "$out" > "$DIR/request_new.json"
grant=$(printf '%s' "$out" | sed -n 's/.*"grant_id":"\([^"]*\)".*/\1/p')
if [ -n "$grant" ]; then "$WA" spend "$grant" --args "$args" > "$DIR/spend_new.json" 2>/dev/null; fi
touch "$DIR/spent"
while :; do sleep 0.05; done
`
	cmd := exec.Command(wa, "cron", "--worker", "w1", "--lane", "coordinator", "--route", "job-stale",
		"--once", "--ttl", "1s", "--grace", "2s", "--", "sh", "-c", script)
	cmd.Env = binEnv(dir, "WRIT_NATS_URL="+env.URL, "WA="+wa, "DIR="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("cron stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	})
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	testenv.WaitFor(t, 15*time.Second, "the job to hold a grant under generation 1", func() bool { return exists("ready") })
	raw, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	// Pause the worker and its job past the lease.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(child, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	w2 := client.New(nc, "w2")
	var taken grants.Envelope
	testenv.WaitFor(t, 10*time.Second, "w2 to take the route over", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		taken, err = w2.Route(ctx, api.RouteRequest{Action: api.RouteAcquire, Route: "job-stale", Lane: "coordinator", TTLMillis: 2000})
		return err == nil && taken.Decision == grants.Permit
	})
	if taken.Kind != events.KindRouteTaken || taken.RouteGen != 2 || taken.PrevOwner != "w1" || taken.PrevGen != 1 {
		t.Fatalf("take-over: %+v", taken)
	}
	// The job goes on first: both its spends are fenced.
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(child, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 15*time.Second, "the continued job's spends", func() bool { return exists("spent") })
	for _, name := range []string{"spend_pre.json", "spend_new.json", "request_new.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			if name == "spend_new.json" {
				continue // the request itself was refused (checked below)
			}
			t.Fatalf("%s: %v", name, err)
		}
		e, err := grants.DecodeEnvelope(bytes.TrimSpace(b))
		if err != nil {
			t.Fatalf("%s: %v: %s", name, err, b)
		}
		if e.Reason != grants.ReasonOwnerStale || e.Recovery != grants.RecoverReacquireOwnership ||
			!strings.Contains(e.Detail, "generation 1") || !strings.Contains(e.Detail, "generation 2") {
			t.Fatalf("%s: want owner_stale naming generations 1 and 2, got %+v", name, e)
		}
	}
	// Then the worker: its renewal is refused, it stops the job and exits 12.
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != ExitLeaseLost {
			t.Fatalf("cron exit: %v, want exit %d", err, ExitLeaseLost)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("cron did not exit after losing its lease")
	}
	if !exists("terminated") {
		t.Fatal("the job was not sent SIGTERM")
	}
	if !strings.Contains(stderr.String(), "lease lost") {
		t.Fatalf("cron stderr does not say the lease was lost: %s", stderr.String())
	}
	if _, attempts := checkRouteStream(t, env, "job-stale"); len(attempts) != 0 {
		t.Fatalf("attempts under job-stale: %+v", attempts)
	}
}

// TestCronJobNeedingReviewDoesNotWait: a cron job whose call needs a
// review is answered approval_required at once (its worker-agent request
// exits 11, a review is opened for an operator), and worker-agent cron
// --once exits with the job's code, well within the lease, and releases
// the lease: nothing waits for a person.
func TestCronJobNeedingReviewDoesNotWait(t *testing.T) {
	wa := builtBinary(t)
	env, nc := cronIssuer(t)
	dir := t.TempDir()
	script := `"$WA" request --lane coordinator --tool vault_read --args '{"name":"db-password"}' > "$DIR/held.json"`
	cmd := exec.Command(wa, "cron", "--worker", "w1", "--lane", "coordinator", "--route", "job-review", "--once", "--", "sh", "-c", script)
	cmd.Env = binEnv(dir, "WRIT_NATS_URL="+env.URL, "WA="+wa, "DIR="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitApproval {
		t.Fatalf("cron exit: %v, want %d; stderr:\n%s", err, ExitApproval, stderr.String())
	}
	if took > 10*time.Second {
		t.Fatalf("cron took %s", took)
	}
	b, err := os.ReadFile(filepath.Join(dir, "held.json"))
	if err != nil {
		t.Fatal(err)
	}
	held, err := grants.DecodeEnvelope(bytes.TrimSpace(b))
	if err != nil || held.Decision != grants.ApprovalRequired || held.ReviewID == "" {
		t.Fatalf("held answer: %+v %v", held, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rs, err := client.New(nc, "").Reviews(ctx, held.ReviewID)
	if err != nil || len(rs.Reviews) != 1 || rs.Reviews[0].State != "open" {
		t.Fatalf("the review is not open for an operator: %+v %v", rs, err)
	}
	// The --once run released its lease.
	st, err := client.New(nc, "w2").Route(ctx, api.RouteRequest{Action: api.RouteStatus, Route: "job-review"})
	if err != nil || st.Owner != "w1" || !strings.Contains(st.Detail, "released") {
		t.Fatalf("route status after the run: %+v %v", st, err)
	}
}
