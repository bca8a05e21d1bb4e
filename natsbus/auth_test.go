package natsbus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/events"
)

const pw = "s3cret"

// authServer starts a server with one user of each role.
func authServer(t *testing.T) *server.Server {
	t.Helper()
	cfg := testConfig(t, "auth")
	cfg.Users = []User{
		IssuerUser("issuer", pw),
		WorkerUser("w1", pw),
		WorkerUser("w2", pw),
		OperatorUser("op", pw),
		AuditorUser("aud", pw),
	}
	return startServer(t, cfg)
}

// asyncErrors collects a connection's asynchronous errors.
func asyncErrors() (nats.Option, <-chan error) {
	ch := make(chan error, 16)
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case ch <- err:
		default:
		}
	}), ch
}

// expectViolation waits for a permissions violation naming subject.
func expectViolation(t *testing.T, errs <-chan error, subject string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case err := <-errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
			t.Logf("other async error: %v", err)
		case <-timeout:
			t.Fatalf("no permissions violation for %q", subject)
		}
	}
}

// expectNothing asserts sub receives no message within a short wait.
func expectNothing(t *testing.T, sub *nats.Subscription, what string) {
	t.Helper()
	if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("%s got through: %s %q", what, m.Subject, m.Data)
	}
}

func TestWorkerPermissions(t *testing.T) {
	s := authServer(t)
	url := ClientURL(s)
	issuer, _ := connect(t, url, ClientOptions("issuer", pw)...)
	api, err := issuer.SubscribeSync("writ.api.>")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := issuer.SubscribeSync("writ.op.>")
	if err != nil {
		t.Fatal(err)
	}
	responder, err := issuer.Subscribe("writ.api.w1.grant", func(m *nats.Msg) { _ = m.Respond([]byte("granted")) })
	if err != nil {
		t.Fatal(err)
	}
	defer responder.Unsubscribe()
	if err := issuer.Flush(); err != nil {
		t.Fatal(err)
	}

	errOpt, errs := asyncErrors()
	w1, _ := connect(t, url, append(ClientOptions("w1", pw), errOpt)...)

	reply, err := w1.Request("writ.api.w1.grant", []byte("req"), 2*time.Second)
	if err != nil || string(reply.Data) != "granted" {
		t.Fatalf("w1 request on its own subject: %v", err)
	}
	if m, err := api.NextMsg(time.Second); err != nil || m.Subject != "writ.api.w1.grant" {
		t.Fatalf("issuer did not see w1's request: %v", err)
	}

	for _, subj := range []string{"writ.api.w2.grant", "writ.op.revoke", "writ.evt.permit"} {
		if err := w1.Publish(subj, []byte("forged")); err != nil {
			t.Fatal(err)
		}
		expectViolation(t, errs, subj)
	}
	expectNothing(t, api, "w1 publishing as w2")
	expectNothing(t, ops, "w1 publishing an operator command")

	// w1 cannot read other users' replies.
	if _, err := w1.SubscribeSync("_INBOX.>"); err != nil {
		t.Fatal(err)
	}
	expectViolation(t, errs, "_INBOX.>")

	// A worker client without its inbox prefix gets no replies.
	w2, err := nats.Connect(url, nats.UserInfo("w2", pw), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if _, err := w2.Request("writ.api.w2.grant", nil, 300*time.Millisecond); err == nil {
		t.Fatal("request with the default inbox prefix succeeded")
	}

	// Operator: commands only.
	opErrOpt, opErrs := asyncErrors()
	op, _ := connect(t, url, append(ClientOptions("op", pw), opErrOpt)...)
	if err := op.Publish("writ.op.revoke", []byte("g1")); err != nil {
		t.Fatal(err)
	}
	if m, err := ops.NextMsg(time.Second); err != nil || m.Subject != "writ.op.revoke" {
		t.Fatalf("issuer did not see the operator's command: %v", err)
	}
	if err := op.Publish("writ.api.w1.grant", nil); err != nil {
		t.Fatal(err)
	}
	expectViolation(t, opErrs, "writ.api.w1.grant")
}

func TestUnauthenticatedRefused(t *testing.T) {
	s := authServer(t)
	url := ClientURL(s)
	for name, opts := range map[string][]nats.Option{
		"anonymous":      nil,
		"wrong password": {nats.UserInfo("w1", "nope")},
		"unknown user":   {nats.UserInfo("mallory", pw)},
	} {
		nc, err := nats.Connect(url, append(opts, nats.NoReconnect())...)
		if err == nil {
			nc.Close()
			t.Fatalf("%s: connection accepted", name)
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("%s: connect = %v, want authorization violation", name, err)
		}
	}
}

func TestAuditorReadsButCannotPublish(t *testing.T) {
	s := authServer(t)
	url := ClientURL(s)
	ctx := testCtx(t, 20*time.Second)
	_, ijs := connect(t, url, ClientOptions("issuer", pw)...)
	if _, err := EnsureStream(ctx, ijs, 1); err != nil {
		t.Fatal(err)
	}

	errOpt, errs := asyncErrors()
	aud, ajs := connect(t, url, append(ClientOptions("aud", pw), errOpt)...)
	live, err := aud.SubscribeSync(events.SubjectAll)
	if err != nil {
		t.Fatal(err)
	}
	if err := aud.Flush(); err != nil {
		t.Fatal(err)
	}

	p := NewPublisher(ijs)
	if _, err := p.Publish(ctx, eventMsgs(1, 20)); err != nil {
		t.Fatal(err)
	}
	if m, err := live.NextMsg(2 * time.Second); err != nil || string(m.Data) != "event-1" {
		t.Fatalf("auditor's live subscription: %v", err)
	}

	// Ordered consumer over the whole stream.
	st, err := ajs.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatalf("auditor stream info: %v", err)
	}
	if last := st.CachedInfo().State.LastSeq; last != 20 {
		t.Fatalf("auditor sees last seq %d", last)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("auditor ordered consumer: %v", err)
	}
	batch, err := cons.Fetch(20, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatalf("auditor fetch: %v", err)
	}
	var seq uint64
	for m := range batch.Messages() {
		seq++
		meta, err := m.Metadata()
		if err != nil || meta.Sequence.Stream != seq || string(m.Data()) != string(event(seq).Data) {
			t.Fatalf("auditor message %d: %q (%v)", seq, m.Data(), err)
		}
	}
	if batch.Error() != nil || seq != 20 {
		t.Fatalf("auditor read %d messages, err %v", seq, batch.Error())
	}

	// Events are the issuer's alone.
	if err := aud.Publish("writ.evt.permit", []byte("forged")); err != nil {
		t.Fatal(err)
	}
	expectViolation(t, errs, "writ.evt.permit")
	short := testCtx(t, time.Second)
	if _, err := ajs.Publish(short, "writ.evt.permit", []byte("forged"), jetstream.WithRetryAttempts(0)); err == nil {
		t.Fatal("auditor JetStream publish acknowledged")
	}
	expectViolation(t, errs, "writ.evt.permit")
	// Nor can it tamper with the stream through the JetStream API.
	if err := st.DeleteMsg(testCtx(t, time.Second), 1); err == nil {
		t.Fatal("auditor deleted a message")
	}
	if msgs, last := streamMsgs(t, ctx, ijs); msgs != 20 || last != 20 {
		t.Fatalf("stream holds %d messages up to %d after auditor publishes, want 20", msgs, last)
	}
}

// The smallest publish set for an ordered consumer is CONSUMER.CREATE and
// CONSUMER.MSG.NEXT; AuditorUser adds CONSUMER.DELETE (an ordered consumer
// deletes the consumer it replaces, else it lingers until its inactivity
// threshold) and STREAM.INFO (jetstream.JetStream.Stream).
func TestAuditorMinimalSubjects(t *testing.T) {
	create := "$JS.API.CONSUMER.CREATE." + events.StreamName + ".>"
	next := "$JS.API.CONSUMER.MSG.NEXT." + events.StreamName + ".>"
	cfg := testConfig(t, "minimal")
	cfg.Users = []User{
		IssuerUser("issuer", pw),
		{Name: "min", Password: pw, Publish: []string{create, next}, Subscribe: []string{inboxSubjects("min")}},
		{Name: "nonext", Password: pw, Publish: []string{create}, Subscribe: []string{inboxSubjects("nonext")}},
		{Name: "nocreate", Password: pw, Publish: []string{next}, Subscribe: []string{inboxSubjects("nocreate")}},
	}
	s := startServer(t, cfg)
	ctx := testCtx(t, 20*time.Second)
	_, ijs := connect(t, ClientURL(s), ClientOptions("issuer", pw)...)
	if _, err := EnsureStream(ctx, ijs, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPublisher(ijs).Publish(ctx, eventMsgs(1, 20)); err != nil {
		t.Fatal(err)
	}
	read := func(user string) (int, error) {
		quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
		_, js := connect(t, ClientURL(s), append(ClientOptions(user, pw), quiet)...)
		cons, err := js.OrderedConsumer(testCtx(t, time.Second), events.StreamName, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return 0, err
		}
		batch, err := cons.Fetch(20, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return 0, err
		}
		n := 0
		for range batch.Messages() {
			n++
		}
		return n, batch.Error()
	}
	if n, err := read("min"); err != nil || n != 20 {
		t.Fatalf("CREATE+MSG.NEXT: read %d messages, err %v; want 20", n, err)
	}
	// Without MSG.NEXT the fetch silently returns nothing.
	if n, _ := read("nonext"); n != 0 {
		t.Fatalf("without MSG.NEXT: read %d messages", n)
	}
	if _, err := read("nocreate"); err == nil {
		t.Fatal("without CONSUMER.CREATE: ordered consumer created")
	}
}
