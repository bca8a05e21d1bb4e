package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

// TestSourceReceipts: tail shows source registrations with the id, the
// channel, the authority the issuer assigned, the origins, the path and
// whether it is model-made, and a refused registration with its reason
// and id, whichever receipt format wrote them; verify folds them into the
// projection and reaches the issuer's digest.
func TestSourceReceipts(t *testing.T) {
	for _, level := range []uint64{fsm.ReceiptFormatLegacy, fsm.ReceiptFormatFacts} {
		t.Run(fmt.Sprintf("format %d", level), func(t *testing.T) { testSourceReceipts(t, level) })
	}
}

func testSourceReceipts(t *testing.T, level uint64) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	is := newIssuer()
	is.apply(fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: level})
	src := func(id, channel string, origins ...string) fsm.Command {
		return fsm.Command{Op: fsm.OpSource, Caller: "w1", SourceID: id, Channel: channel, Scope: "task",
			ContentDigest: events.Sum([]byte(id + channel)), Origins: origins}
	}
	is.apply(src("u1", "user_prompt"))
	is.apply(src("web1", "web_fetch"))
	is.apply(src("d1", "derived", "u1", "web1"))
	page := src("p1", "web_fetch")
	page.Path, page.Tool = "/work/w1/page.html", "WebFetch"
	is.apply(page)
	made := src("m1", "derived", "p1")
	made.ModelMade = true
	is.apply(made)
	is.apply(src("u1", "web_fetch"))
	d := events.Sum([]byte("call"))
	is.apply(fsm.Command{Op: fsm.OpRequest, Caller: "w1", Lane: "isolated", Tool: "Read", GrantID: "g1", Digest: d, IdemKey: "k1",
		Traces: []fsm.Trace{{Field: "/file_path", Covered: true, Matches: []fsm.TraceMatch{{Source: "d1", Transform: "raw"}}}}})
	is.apply(fsm.Command{Op: fsm.OpRevoke, Caller: "operator:alice", Key: "source/web1"})
	is.apply(fsm.Command{Op: fsm.OpSpend, Caller: "w1", GrantID: "g1", Digest: d, IdemKey: "a1"})
	is.apply(src("d2", "derived", "d1"))
	b.publish(is.receipts()...)

	r := runCLI(t, "tail", "--nats-url", url)
	if r.code != ExitOK {
		t.Fatalf("tail: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		" source - w1 source=u1 channel=user_prompt authority=instruction\n",
		" source - w1 source=web1 channel=web_fetch authority=evidence\n",
		" source - w1 source=d1 channel=derived authority=evidence origins=u1,web1\n",
		" source - w1 source=p1 channel=web_fetch authority=evidence path:/work/w1/page.html tool=WebFetch\n",
		" source - w1 source=m1 channel=derived authority=evidence origins=p1 model_made\n",
		" deny - w1 source_conflict source=u1\n",
		" spend_refused g1 w1 source_revoked\n",
		" deny - w1 source_revoked source=d2\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tail lacks %q:\n%s", want, r.stdout)
		}
	}

	packed := 0
	for _, p := range is.s.Outbox(0, 0) {
		if e, err := events.Decode(p.Data); err == nil && e.Kind == events.KindSource && len(e.Sources) > 0 {
			packed++
		}
	}
	if want := map[uint64]int{fsm.ReceiptFormatLegacy: 5, fsm.ReceiptFormatFacts: 0}[level]; packed != want {
		t.Fatalf("level %d wrote %d packed source events, want %d", level, packed, want)
	}
	r, rep := verifyJSON(t, url, "--expect-digest", is.s.Digest().String())
	if r.code != ExitOK || !rep.OK || rep.Kinds["source"] != 5 {
		t.Fatalf("verify: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
}
