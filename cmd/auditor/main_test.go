package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/writ-dev/writ/audit"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// result is what one in-process run produced.
type result struct {
	err            error
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err := run(ctx, args, &out, &errb)
	return result{err: err, code: exitCode(err), stdout: out.String(), stderr: errb.String()}
}

// cleanEnv makes sure the environment does not supply flags.
func cleanEnv(t *testing.T) {
	for _, k := range []string{"WRIT_NATS_URL", "NATS_URL", "WRIT_NATS_USER", "WRIT_NATS_PASSWORD_FILE", "WRIT_NATS_CA"} {
		t.Setenv(k, "")
	}
}

// startJetStream runs an embedded nats-server with JetStream for the test.
func startJetStream(t *testing.T) string { return testenv.StartNATS(t, true).ClientURL() }

// bus is a connection that creates and fills the receipt stream the way
// the issuer does.
type bus struct {
	t  *testing.T
	js jetstream.JetStream
}

func newBus(t *testing.T, url string) *bus {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: events.StreamName, Subjects: []string{events.SubjectAll}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardNew, DenyDelete: true, DenyPurge: true,
		Duplicates: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &bus{t: t, js: js}
}

// publish appends encoded events with Nats-Msg-Id = seq and the expected
// last sequence seq-1, as the issuer's publisher does.
func (b *bus) publish(raw ...[]byte) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, data := range raw {
		e, err := events.Decode(data)
		seq, kind := e.Seq, e.Kind
		if err != nil {
			// A tampered message: take its place in the stream from
			// the stream itself.
			info, ierr := b.js.Stream(ctx, events.StreamName)
			if ierr != nil {
				b.t.Fatal(ierr)
			}
			seq, kind = info.CachedInfo().State.LastSeq+1, events.KindAttempt
		}
		ack, err := b.js.Publish(ctx, events.Subject(kind), data,
			jetstream.WithMsgID(strconv.FormatUint(seq, 10)), jetstream.WithExpectLastSequence(seq-1))
		if err != nil {
			b.t.Fatalf("publish seq %d: %v", seq, err)
		}
		if ack.Sequence != seq {
			b.t.Fatalf("seq %d stored at stream seq %d", seq, ack.Sequence)
		}
	}
}

const t0 = int64(1_750_000_000_000_000_000)

// issuer drives the real state machine with commands, the way an issuer
// does, and hands out the receipts it produced.
type issuer struct {
	s     *fsm.State
	now   int64
	index uint64
	sent  uint64 // receipts already handed out
}

func newIssuer() *issuer {
	is := &issuer{s: fsm.New(), now: t0}
	is.apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:alice", Policy: policy.LegacyDefault().Canonical()})
	return is
}

func (is *issuer) apply(cmds ...fsm.Command) {
	is.index++
	fsm.Apply(is.s, is.index, fsm.Batch{Time: is.now, Node: "n1", Commands: cmds})
	is.now += int64(time.Second)
}

// scenario runs n rounds of grant, spend and effect for a few workers, with
// refusals, a revocation and a policy change mixed in.
func (is *issuer) scenario(n int) {
	for i := range n {
		w := fmt.Sprintf("w%d", i%3)
		id := fmt.Sprintf("g%d", i)
		d := events.Sum([]byte(id))
		is.apply(fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: "isolated", Tool: "Read", GrantID: id, Digest: d, IdemKey: "k-" + id})
		switch i % 5 {
		case 0: // spent and confirmed
			is.apply(fsm.Command{Op: fsm.OpSpend, Caller: w, GrantID: id, Digest: d, IdemKey: "s-" + id})
			is.apply(fsm.Command{Op: fsm.OpEffect, Caller: w, GrantID: id, Outcome: "confirmed", Verifier: "fs"})
		case 1: // spent, a second spend refused, no effect yet
			is.apply(fsm.Command{Op: fsm.OpSpend, Caller: w, GrantID: id, Digest: d, IdemKey: "s-" + id})
			is.apply(fsm.Command{Op: fsm.OpSpend, Caller: w, GrantID: id, Digest: d, IdemKey: "again"})
		case 2: // spend with the wrong request refused
			is.apply(fsm.Command{Op: fsm.OpSpend, Caller: w, GrantID: id, Digest: events.Sum([]byte("other")), IdemKey: "s-" + id})
		case 3: // conflicting verifiers
			is.apply(fsm.Command{Op: fsm.OpSpend, Caller: w, GrantID: id, Digest: d, IdemKey: "s-" + id})
			is.apply(fsm.Command{Op: fsm.OpEffect, Caller: w, GrantID: id, Outcome: "confirmed", Verifier: "fs"})
			is.apply(fsm.Command{Op: fsm.OpEffect, Caller: w, GrantID: id, Outcome: "failed", Verifier: "http"})
		case 4: // denied tool
			is.apply(fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: "isolated", Tool: "Bash", GrantID: id + "b", Digest: d, IdemKey: "kb-" + id})
		}
		if i%7 == 6 {
			is.apply(fsm.Command{Op: fsm.OpRevoke, Caller: "operator:alice", Key: "worker/" + w})
			is.apply(fsm.Command{Op: fsm.OpReinstate, Caller: "operator:alice", Key: w})
		}
	}
}

// receipts returns the receipts produced since the last call.
func (is *issuer) receipts() [][]byte {
	var out [][]byte
	for _, p := range is.s.Outbox(is.sent, 0) {
		out = append(out, p.Data)
	}
	is.sent = is.s.Chain().Seq
	return out
}

// verifyJSON runs verify --json and decodes its report.
func verifyJSON(t *testing.T, url string, extra ...string) (result, verifyReport) {
	t.Helper()
	r := runCLI(t, append([]string{"verify", "--json", "--nats-url", url}, extra...)...)
	var rep verifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("verify --json printed %q (stderr %q): %v", r.stdout, r.stderr, err)
	}
	return r, rep
}

func TestVerify(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	is := newIssuer()
	is.scenario(30)
	raw := is.receipts()
	b.publish(raw...)
	n := uint64(len(raw))

	r, rep := verifyJSON(t, url)
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	var generic map[string]any
	_ = json.Unmarshal([]byte(r.stdout), &generic)
	for _, k := range []string{"events", "last_seq", "head", "projection_digest", "kinds", "permitted", "spent", "closed", "contested", "unresolved", "violation", "ok"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("JSON report has no %q: %s", k, r.stdout)
		}
	}
	if !rep.OK || rep.Violation != nil || rep.Events != n || rep.LastSeq != n || rep.StreamLastSeq != n {
		t.Fatalf("report %+v", rep)
	}
	if rep.Head != is.s.Chain().Head || rep.Projection != is.s.Digest() {
		t.Fatalf("head %s projection %s; issuer head %s digest %s", rep.Head, rep.Projection, is.s.Chain().Head, is.s.Digest())
	}
	if rep.Permitted != 30 || rep.Spent != 18 || rep.Closed["confirmed"] != 6 || rep.Contested != 6 || rep.Unresolved != 6 ||
		rep.Kinds["deny"] != 6 || rep.Kinds["spend_refused"] != 12 || rep.Kinds["revoke"] != 4 {
		t.Errorf("counts: %s", r.stdout)
	}

	// The digest the issuer reports must match.
	if r := runCLI(t, "verify", "--nats-url", url, "--expect-digest", is.s.Digest().String()); r.code != ExitOK {
		t.Fatalf("--expect-digest (right): exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	r, rep = verifyJSON(t, url, "--expect-digest", events.Sum([]byte("x")).String())
	if r.code != ExitViolation || rep.Violation == nil || rep.Violation.Code != audit.CodeStateDigestMismatch || rep.Violation.Seq != n {
		t.Fatalf("--expect-digest (wrong): exit %d, %s", r.code, r.stdout)
	}

	// Human summary.
	r = runCLI(t, "verify", "--nats-url", url)
	for _, want := range []string{"result", "ok", is.s.Digest().String(), fmt.Sprintf("seq 1..%d", n), "contested=6"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("human summary lacks %q:\n%s", want, r.stdout)
		}
	}

	// A partial check from the middle finds nothing either.
	r, rep = verifyJSON(t, url, "--from", strconv.FormatUint(n/2, 10))
	if r.code != ExitOK || rep.FirstSeq != n/2 || rep.Events != n-n/2+1 || !rep.Projection.IsZero() {
		t.Fatalf("--from %d: exit %d %s %s", n/2, r.code, r.stdout, r.stderr)
	}

	// Progress lines, forced.
	old := progressEvery
	progressEvery = 10
	t.Cleanup(func() { progressEvery = old })
	r = runCLI(t, "verify", "--nats-url", url, "--progress")
	if r.code != ExitOK || !strings.Contains(r.stderr, fmt.Sprintf("verified 10 of %d events", n)) {
		t.Errorf("progress: exit %d, stderr %q", r.code, r.stderr)
	}

	// Now a tampered receipt: the next event with one bit flipped.
	is.apply(fsm.Command{Op: fsm.OpRequest, Caller: "w1", Lane: "isolated", Tool: "Read", GrantID: "late", Digest: events.Sum([]byte("late")), IdemKey: "late"})
	next := is.receipts()
	bad := bytes.Clone(next[0])
	bad[len(bad)/2] ^= 0x04
	b.publish(bad)
	r, rep = verifyJSON(t, url)
	if r.code != ExitViolation || rep.OK || rep.Violation == nil || rep.Violation.Seq != n+1 || rep.Violation.Code != audit.CodeDecode {
		t.Fatalf("tampered: exit %d, report %s", r.code, r.stdout)
	}
	if rep.Events != n || rep.LastSeq != n || rep.StreamLastSeq != n+1 {
		t.Errorf("tampered: summary should stop before the violation: %+v", rep)
	}
	if want := fmt.Sprintf("auditor: violation at seq %d: decode: ", n+1); !strings.HasPrefix(r.stderr, want) {
		t.Errorf("stderr %q, want prefix %q", r.stderr, want)
	}
}

func TestVerifyNamesDoubleAttempt(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	is := newIssuer()
	d := events.Sum([]byte("args"))
	is.apply(fsm.Command{Op: fsm.OpRequest, Caller: "w1", Lane: "isolated", Tool: "Read", GrantID: "g1", Digest: d, IdemKey: "k1"})
	is.apply(fsm.Command{Op: fsm.OpSpend, Caller: "w1", GrantID: "g1", Digest: d, IdemKey: "s1"})
	raw := is.receipts()
	b.publish(raw...)
	// A forged second attempt, correctly chained: only the invariant
	// check can catch it.
	attempt, err := events.Decode(raw[len(raw)-1])
	if err != nil {
		t.Fatal(err)
	}
	chain := is.s.Chain()
	attempt.Time += int64(time.Second)
	b.publish(chain.Append(&attempt, nil))

	r := runCLI(t, "verify", "--nats-url", url)
	want := "auditor: violation at seq 4: double_attempt: grant g1 already attempted at seq 3\n"
	if r.code != ExitViolation || r.stderr != want {
		t.Fatalf("exit %d, stderr %q, want %q", r.code, r.stderr, want)
	}
	if !strings.Contains(r.stdout, "FAILED: violation at seq 4: double_attempt") {
		t.Errorf("summary does not name the violation:\n%s", r.stdout)
	}
}

func TestTail(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	is := newIssuer()
	is.scenario(5)
	raw := is.receipts()
	b.publish(raw...)
	n := len(raw)

	r := runCLI(t, "tail", "--from", "3", "--json", "--nats-url", url)
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != n-2 {
		t.Fatalf("tail --from 3 printed %d lines, want %d:\n%s", len(lines), n-2, r.stdout)
	}
	for i, line := range lines {
		e, _ := events.Decode(raw[i+2])
		want, _ := json.Marshal(e)
		if line != string(want) {
			t.Fatalf("line %d:\n got %s\nwant %s", i, line, want)
		}
	}

	// Human format: seq, time, kind, grant, worker, reason/outcome.
	r = runCLI(t, "tail", "--nats-url", url)
	lines = strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != ExitOK || len(lines) != n {
		t.Fatalf("tail: exit %d, %d lines", r.code, len(lines))
	}
	wantLines := map[int]string{
		0: "1 2025-06-15T15:06:40Z epoch - - epoch=1 policy=",
		1: "2 2025-06-15T15:06:41Z permit g0 w0 -",
		2: "3 2025-06-15T15:06:42Z attempt g0 w0 -",
		3: "4 2025-06-15T15:06:43Z effect g0 w0 confirmed by fs",
	}
	for i, want := range wantLines {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], want)
		}
	}
	if !strings.Contains(r.stdout, " spend_refused g1 w1 already_spent\n") || !strings.Contains(r.stdout, " deny - w1 denied_by_policy tool=Bash\n") {
		t.Errorf("refusals not shown with their reason:\n%s", r.stdout)
	}

	// Past the end: nothing, successfully.
	if r := runCLI(t, "tail", "--from", "1000", "--nats-url", url); r.code != ExitOK || r.stdout != "" {
		t.Errorf("tail past the end: exit %d, %q", r.code, r.stdout)
	}
}

type syncBuffer = testenv.SyncBuffer

func TestTailFollow(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	is := newIssuer()
	is.scenario(2)
	first := is.receipts()
	b.publish(first...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"tail", "--follow", "--json", "--nats-url", url}, &out, &errb) }()

	waitLines := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(out.String(), "\n") < n {
			if time.Now().After(deadline) {
				t.Fatalf("tail --follow printed %d lines, want %d:\n%s\nstderr: %s", strings.Count(out.String(), "\n"), n, out.String(), errb.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitLines(len(first))
	is.scenario(3)
	more := is.receipts()
	b.publish(more...)
	waitLines(len(first) + len(more))
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("tail --follow ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("tail --follow did not stop when its context ended")
	}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	seq := uint64(0)
	for sc.Scan() {
		var e struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Seq != seq+1 {
			t.Fatalf("line %q after seq %d", sc.Text(), seq)
		}
		seq = e.Seq
	}
	if seq != is.s.Chain().Seq {
		t.Fatalf("followed up to seq %d, issuer at %d", seq, is.s.Chain().Seq)
	}
}

// TestTailFollowIdle: following a stream with nothing new is not a stall.
func TestTailFollowIdle(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	newBus(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err := run(ctx, []string{"tail", "--follow", "--timeout", "100ms", "--nats-url", url}, &out, &errb)
	if err != nil || out.Len() != 0 {
		t.Fatalf("idle tail --follow: %v, stdout %q, stderr %q", err, out.String(), errb.String())
	}
}

func TestTailReportsUndecodable(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	is := newIssuer()
	is.scenario(1)
	raw := is.receipts()
	bad := bytes.Clone(raw[1])
	bad[3] ^= 0x80
	b.publish(raw[0], bad)
	r := runCLI(t, "tail", "--nats-url", url)
	if r.code != ExitViolation || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stderr, "seq 2: cannot decode") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestEmptyStream(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	newBus(t, url)
	r, rep := verifyJSON(t, url)
	if r.code != ExitOK || rep.Events != 0 || !rep.OK {
		t.Fatalf("empty stream: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "tail", "--nats-url", url); r.code != ExitOK || r.stdout != "" {
		t.Fatalf("tail of an empty stream: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestUnavailable(t *testing.T) {
	cleanEnv(t)
	// Nothing listens on this port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + l.Addr().String()
	l.Close()
	for _, args := range [][]string{{"verify"}, {"tail"}} {
		r := runCLI(t, append(args, "--nats-url", dead, "--timeout", "1s")...)
		if r.code != ExitUnavailable || !strings.Contains(r.stderr, "cannot connect") || !strings.Contains(r.stderr, "WRIT_NATS_URL") {
			t.Errorf("%v against a dead URL: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}

	// A server without the receipt stream.
	url := startJetStream(t)
	r := runCLI(t, "verify", "--nats-url", url)
	if r.code != ExitUnavailable || !strings.Contains(r.stderr, "no receipt stream WRIT_EVENTS") || !strings.Contains(r.stderr, "issuer serve --dev") {
		t.Errorf("no stream: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestUsage(t *testing.T) {
	cleanEnv(t)
	url := "nats://127.0.0.1:1" // never dialled: usage errors come first
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "a command is required"},
		{[]string{"bogus"}, "unknown command"},
		{[]string{"verify", "--bogus"}, "unknown flag"},
		{[]string{"verify", "extra"}, "unexpected argument"},
		{[]string{"verify", "--expect-digest", "abc"}, "--expect-digest"},
		{[]string{"verify", "--from", "5", "--expect-digest", strings.Repeat("ab", 32)}, "needs the whole stream"},
		{[]string{"verify", "--from", "0"}, "--from"},
		{[]string{"tail", "--from", "x"}, "invalid argument"},
		{[]string{"tail", "--from", "0"}, "--from"},
	} {
		r := runCLI(t, append(tc.args, "--nats-url", url)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "--help") {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestHelp(t *testing.T) {
	cleanEnv(t)
	r := runCLI(t, "--help")
	if r.code != ExitOK || !strings.Contains(r.stdout, "Exit codes") || !strings.Contains(r.stdout, "verify") {
		t.Errorf("--help: exit %d\n%s", r.code, r.stdout)
	}
	r = runCLI(t, "verify", "--help")
	for _, c := range audit.Codes {
		if !strings.Contains(r.stdout, c.Code) {
			t.Errorf("verify --help does not explain %s", c.Code)
		}
	}
	r = runCLI(t, "tail", "--help")
	if r.code != ExitOK || !strings.Contains(r.stdout, "--follow") || !strings.Contains(r.stdout, "SEQ TIME KIND GRANT WORKER DETAIL") {
		t.Errorf("tail --help: exit %d\n%s", r.code, r.stdout)
	}
}

// TestLeastPrivilege runs the auditor as a NATS user with only the
// auditor's permissions (as natsbus.AuditorUser grants them): subscribe to
// writ.evt.> and its own inbox, publish only the JetStream API requests of
// an ordered consumer on the receipt stream.
func TestLeastPrivilege(t *testing.T) {
	cleanEnv(t)
	auditor := &server.User{Username: "aud", Password: "apw", Permissions: &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			"$JS.API.CONSUMER.CREATE." + events.StreamName + ".>",
			"$JS.API.CONSUMER.MSG.NEXT." + events.StreamName + ".>",
			"$JS.API.CONSUMER.DELETE." + events.StreamName + ".>",
			"$JS.API.STREAM.INFO." + events.StreamName,
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{events.SubjectAll, "_INBOX.aud.>"}},
	}}
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Users: []*server.User{{Username: "issuer", Password: "ipw"}, auditor},
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(testenv.SetupTimeout) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	url := s.ClientURL()

	// The issuer side publishes as the all-powerful user.
	nc, err := nats.Connect(url, nats.UserInfo("issuer", "ipw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b := newBus(t, "nats://issuer:ipw@"+strings.TrimPrefix(url, "nats://"))
	is := newIssuer()
	is.scenario(4)
	raw := is.receipts()
	b.publish(raw...)

	pw := t.TempDir() + "/pw"
	if err := os.WriteFile(pw, []byte("apw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	creds := []string{"--nats-url", url, "--nats-user", "aud", "--nats-password-file", pw, "--timeout", "3s"}
	r, rep := verifyJSON(t, url, creds[2:]...)
	if r.code != ExitOK || rep.Events != uint64(len(raw)) || rep.Projection != is.s.Digest() {
		t.Fatalf("verify as auditor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, append([]string{"tail", "--from", "2"}, creds...)...); r.code != ExitOK || strings.Count(r.stdout, "\n") != len(raw)-1 {
		t.Fatalf("tail as auditor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The ordered consumers were deleted, not left to time out.
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Consumers; n != 0 {
		t.Errorf("%d consumers left on the stream", n)
	}
}

// TestServerGoneWhileReading: a read that stops receiving fails with exit
// code 3 instead of hanging.
func TestServerGoneWhileReading(t *testing.T) {
	cleanEnv(t)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(testenv.SetupTimeout) {
		t.Fatal("nats-server did not start")
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	t.Cleanup(stop)
	b := newBus(t, s.ClientURL())
	is := newIssuer()
	is.scenario(3)
	b.publish(is.receipts()...)

	g := &globals{}
	g.conn.URL, g.conn.Timeout = s.ClientURL(), 2*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := openReceipts(ctx, g.conn)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	old := pullBatch
	pullBatch = 2 // so that most messages are still on the server when it goes
	t.Cleanup(func() { pullBatch = old })
	n := 0
	start := time.Now()
	err = r.read(ctx, 1, r.last, func(message) error {
		n++
		if n == 2 {
			stop()
		}
		return nil
	})
	if exitCode(err) != ExitUnavailable || time.Since(start) > 15*time.Second {
		t.Fatalf("after %d messages and %s: %v (exit %d)", n, time.Since(start), err, exitCode(err))
	}
	t.Logf("%d messages, then after %s: %v", n, time.Since(start).Round(time.Millisecond), err)
}
