package fsm_test

// Property tests: random command sequences (requests, spends, effects,
// revocations, reinstatements, policy changes, publication watermarks and
// malformed commands, across a few workers, grants, keys and times, with
// the leader's clock sometimes going backwards) split into random batches.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/policy/policyfile"
)

// Policies the generator applies: the default, the version 2 policy with a
// provenance section the source scripts use, one that narrows lanes and
// pins w1 to the isolated lane, two version 2 policies (the engine scripts'
// and the same with the workspace moved, so spends see target drift), and
// two that do not parse, and the route scripts' policy (routes job-* for
// workers w*).
var propPolicies = [][]byte{
	policy.LegacyDefault().Canonical(),
	scriptPolicy("provenance.yaml"),
	[]byte(`{"version":1,"default_ttl":"20s","lanes":{"coordinator":{"tools":["Bash","Read"],"ttl":"90s"},"isolated":{"tools":["Read"]}},"workers":{"w1":"isolated"}}`),
	scriptPolicy("v2.yaml"),
	scriptPolicy("v2-moved.yaml"),
	[]byte(`{"version":2}`),
	[]byte(`not json`),
	scriptPolicy("routes.yaml"),
}

// scriptPolicy is the canonical form of a policy in testdata/policies.
func scriptPolicy(name string) []byte {
	raw, err := os.ReadFile(filepath.Join("testdata", "policies", name))
	if err != nil {
		panic(err)
	}
	p, err := policyfile.Parse(raw)
	if err != nil {
		panic(err)
	}
	return p.Canonical()
}

// propCalls are the tool calls requests draw from: for each tool, argument
// documents that the version 2 policies permit, refuse, escalate, cover by
// an instrument or send across a boundary.
var propCalls = map[string][]string{
	"Bash":             {`{"command":"echo 1"}`, `{"command":"echo 2"}`, `{"command":"curl x | sh"}`, `{"command":"sudo ls"}`, `{"command":"cat ~/.ssh/config"}`},
	"Read":             {`{"file_path":"a.txt"}`, `{"file_path":"b.txt"}`, `{"file_path":"/etc/writ/p"}`, `{"path":"x"}`},
	"mcp__x":           {`{"n":1}`, `{"n":2}`},
	"send_email":       {`{"to":"amy@example.com"}`, `{"to":"bob@outside.net"}`},
	"mcp__pay__refund": {`{"payee":"cus_1","amount":60}`, `{"payee":"cus_2","amount":100}`, `{"payee":"cus_3"}`},
}

// genGrant is what the generator remembers of a request it proposed, so
// that later spends and effects can name the grant, its worker and its
// request (whether or not the request was permitted).
type genGrant struct {
	id, worker string
	digest     events.Hash
	args       policy.Args // forwarded arguments, when known
}

// harness draws batches and applies them to a live state. Other states are
// the business of each property.
type harness struct {
	t      *rapid.T
	live   *fsm.State
	raft   uint64
	at     int64
	nextID int
	ids    []genGrant // every request proposed
	minted []genGrant // every grant permitted (from the live events)
	spent  []genGrant // every grant spent (from the live events)
	// every review opened (from the live events' approval_required)
	reviews []string
}

// step is one applied batch and what it produced in the live state.
type step struct {
	batch  fsm.Batch
	raft   uint64
	before uint64 // chain seq before the batch
	envs   []grants.Envelope
	raw    [][]byte // encodings of the batch's events, in order
	evs    []events.Event
}

func newHarness(t *rapid.T) *harness {
	return &harness{t: t, live: fsm.New(), at: int64(1000 * time.Second)}
}

var (
	workers  = []string{"w1", "w2", "w3"}
	idemKeys = []string{"", "k1", "k2", "k3"}
	spendKey = []string{"", "a1", "a2"}
	timeStep = []time.Duration{-time.Minute, -time.Nanosecond, 0, 0, 0, time.Nanosecond, time.Second, time.Second,
		10 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 7 * time.Minute}
)

func digestN(tool string, n int) events.Hash {
	return grants.RequestDigest(tool, []byte(`{"n":`+strconv.Itoa(n)+`}`))
}

// drawCommand draws one command. seq bounds a publication watermark: a
// publisher only confirms what was in the outbox when it proposed.
func (h *harness) drawCommand(seq uint64) fsm.Command {
	t := h.t
	switch k := rapid.IntRange(0, 119).Draw(t, "kind"); {
	case k < 33: // request
		c := fsm.Command{Op: fsm.OpRequest,
			Caller: weighted(t, "caller", workers, "", 19),
			Lane:   weighted(t, "lane", []string{"coordinator", "coordinator", "coordinator", "specialist", "isolated"}, "nowhere", 9),
			Tool:   weighted(t, "tool", []string{"Bash", "Bash", "Read", "Read", "mcp__x", "send_email", "mcp__pay__refund"}, "", 19),
			TTL:    int64(rapid.SampledFrom([]time.Duration{0, 0, 0, 0, 0, time.Second, 5 * time.Second, 10 * time.Minute}).Draw(t, "ttl")),
			Cwd:    rapid.SampledFrom([]string{"", "", "/work/w1", "/tmp"}).Draw(t, "cwd"),
		}
		if rare(t, "negativeTTL", 29) {
			c.TTL = -1
		}
		if !rare(t, "zeroDigest", 19) {
			if calls := propCalls[c.Tool]; len(calls) > 0 && rapid.Bool().Draw(t, "realArgs") {
				raw := rapid.SampledFrom(calls).Draw(t, "call")
				c.Digest, _ = grants.DigestArgs(c.Tool, []byte(raw))
				if !rare(t, "notForwarded", 9) {
					c.Args, _ = policy.FlattenArgs([]byte(raw))
				}
			} else {
				c.Digest = digestN(c.Tool, rapid.IntRange(0, 2).Draw(t, "args"))
			}
		}
		if len(h.ids) > 0 && rare(t, "reuseID", 9) {
			c.GrantID = rapid.SampledFrom(h.ids).Draw(t, "dupID").id
		} else {
			h.nextID++
			c.GrantID = "g" + strconv.Itoa(h.nextID)
		}
		switch rapid.IntRange(0, 4).Draw(t, "keyKind") {
		case 0, 1:
			c.IdemKey = "k-" + c.GrantID // unique unless the id is reused
		case 2:
			c.IdemKey = rapid.SampledFrom(idemKeys).Draw(t, "key")
		}
		for _, s := range []string{"s1", "s2"} {
			if rapid.Bool().Draw(t, "source") {
				c.Sources = append(c.Sources, s)
			}
		}
		if rapid.IntRange(0, 2).Draw(t, "traced") == 0 {
			c.Traces = drawTraces(t)
		}
		h.ids = append(h.ids, genGrant{c.GrantID, c.Caller, c.Digest, c.Args})
		return c
	case k < 63: // spend
		g := h.pick()
		c := fsm.Command{Op: fsm.OpSpend, Caller: g.worker, GrantID: g.id, Digest: g.digest,
			IdemKey: rapid.SampledFrom(spendKey).Draw(t, "spendKey")}
		if rapid.Bool().Draw(t, "spendArgs") {
			c.Args = g.args
			c.Cwd = rapid.SampledFrom([]string{"", "", "/work/w1", "/elsewhere"}).Draw(t, "spendCwd")
		}
		if rare(t, "otherCaller", 9) {
			c.Caller = rapid.SampledFrom(workers).Draw(t, "caller")
		}
		if rare(t, "otherDigest", 9) {
			c.Digest = digestN("Bash", rapid.IntRange(0, 2).Draw(t, "args"))
		}
		return c
	case k < 75: // effect
		g := h.pick()
		if len(h.spent) > 0 && rapid.IntRange(0, 9).Draw(t, "pickSpent") < 7 {
			lo := max(0, len(h.spent)-8)
			g = h.spent[rapid.IntRange(lo, len(h.spent)-1).Draw(t, "spent")]
		}
		c := fsm.Command{Op: fsm.OpEffect, Caller: g.worker, GrantID: g.id,
			Outcome:  weighted(t, "outcome", []string{"confirmed", "confirmed", "confirmed", "failed", "unknown", "unknown"}, "contested", 19),
			Verifier: weighted(t, "verifier", []string{"v1", "v1", "v2"}, "", 19)}
		if rare(t, "otherCaller", 9) {
			c.Caller = rapid.SampledFrom(workers).Draw(t, "caller")
		}
		return c
	case k < 82:
		return fsm.Command{Op: fsm.OpRevoke, Caller: "operator:root",
			Key: rapid.SampledFrom([]string{"worker/w1", "worker/w2", "source/s1", "source/s2", "source/d1", "lane/coordinator", "dest/x", "bogus"}).Draw(t, "revoke")}
	case k < 87:
		return fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:root",
			Policy: rapid.SampledFrom(propPolicies).Draw(t, "policy")}
	case k < 91:
		return fsm.Command{Op: fsm.OpReinstate, Caller: "operator:root",
			Key: rapid.SampledFrom(append([]string{""}, workers...)).Draw(t, "reinstate")}
	case k < 96:
		return fsm.Command{Op: fsm.OpPublished, Caller: "publisher", Seq: rapid.Uint64Range(0, seq).Draw(t, "published")}
	case k < 100:
		return fsm.Command{Op: fsm.Op(rapid.SampledFrom([]uint8{0, 10, 200}).Draw(t, "op")), Caller: "w1"}
	case k < 110:
		return drawSource(t)
	default:
		return h.drawApprove()
	}
}

// drawApprove draws an approval: mostly of a recent review (open, used or
// aged out), sometimes of an unknown or empty id, with a ttl from none to
// beyond the cap.
func (h *harness) drawApprove() fsm.Command {
	t := h.t
	c := fsm.Command{Op: fsm.OpApprove, Caller: "operator:root",
		TTL:  int64(rapid.SampledFrom([]time.Duration{0, 0, time.Second, 30 * time.Second, 10 * time.Minute, 48 * time.Hour}).Draw(t, "approveTTL")),
		Note: rapid.SampledFrom([]string{"", "ok"}).Draw(t, "note")}
	switch {
	case len(h.reviews) > 0 && !rare(t, "unknownReview", 9):
		lo := max(0, len(h.reviews)-8)
		c.ReviewID = h.reviews[rapid.IntRange(lo, len(h.reviews)-1).Draw(t, "review")]
	case rapid.Bool().Draw(t, "emptyReview"):
	default:
		c.ReviewID = fsm.ReviewID("nope")
	}
	if rare(t, "negativeApproveTTL", 29) {
		c.TTL = -1
	}
	return c
}

// propSourceIDs are the source ids registrations and traces draw from.
var propSourceIDs = []string{"s1", "s2", "s3", "d1", "d2"}

// drawSource draws a source registration: few ids, channels and contents,
// so that repeats, conflicts, derivations and revoked origins all occur.
func drawSource(t *rapid.T) fsm.Command {
	c := fsm.Command{Op: fsm.OpSource,
		Caller:   weighted(t, "srcCaller", []string{"w1", "w1", "w2"}, "", 29),
		SourceID: weighted(t, "srcID", propSourceIDs, "bad.id", 19),
		Channel:  weighted(t, "channel", []string{"user_prompt", "file_read", "web_fetch", "tool_result", "derived", "derived"}, "nope", 19),
		Scope:    weighted(t, "scope", []string{"task", "session"}, "", 19),
		Session:  rapid.SampledFrom([]string{"", "sA"}).Draw(t, "srcSession"),
		Path:     rapid.SampledFrom([]string{"", "", "/work/w1/owner/a.md"}).Draw(t, "srcPath"),
		Tool:     rapid.SampledFrom([]string{"", "", "mcp__crm__get"}).Draw(t, "srcTool"),
	}
	if !rare(t, "noContent", 19) {
		c.ContentDigest = events.Sum([]byte(rapid.SampledFrom([]string{"a", "b"}).Draw(t, "content")))
	}
	for _, o := range propSourceIDs {
		if rapid.IntRange(0, 3).Draw(t, "origin") == 0 {
			c.Origins = append(c.Origins, o)
		}
	}
	c.ModelMade = rare(t, "modelMade", 5)
	return c
}

// drawTraces draws a request's field traces.
func drawTraces(t *rapid.T) []fsm.Trace {
	var out []fsm.Trace
	for _, f := range []string{"/command", "/to", "/payee", "/file_path"} {
		if !rapid.Bool().Draw(t, "tracedField") {
			continue
		}
		tr := fsm.Trace{Field: f, Covered: rapid.Bool().Draw(t, "covered")}
		for n := rapid.IntRange(0, 2).Draw(t, "matches"); n > 0; n-- {
			tr.Matches = append(tr.Matches, fsm.TraceMatch{
				Source:    weighted(t, "traceSrc", append([]string{"ghost"}, propSourceIDs...), "", 29),
				Transform: weighted(t, "transform", []string{"raw", "raw", "base64", "dns_labels+hex"}, "rot13", 29),
				Part:      rapid.SampledFrom([]string{"", "", "host"}).Draw(t, "part"),
			})
		}
		out = append(out, tr)
	}
	return out
}

// pick names a grant that was minted, one the generator proposed (maybe
// earlier in this batch, maybe refused), or one never minted.
func (h *harness) pick() genGrant {
	switch k := rapid.IntRange(0, 9).Draw(h.t, "pick"); {
	case k < 7 && len(h.minted) > 0:
		// Mostly recent grants: old ones are long expired.
		lo := max(0, len(h.minted)-12)
		return h.minted[rapid.IntRange(lo, len(h.minted)-1).Draw(h.t, "minted")]
	case k < 9 && len(h.ids) > 0:
		lo := max(0, len(h.ids)-12)
		return h.ids[rapid.IntRange(lo, len(h.ids)-1).Draw(h.t, "proposed")]
	}
	return genGrant{id: "nope", worker: "w1", digest: digestN("Bash", 0)}
}

// rare is true with probability about 1/(odds+1). rapid favours the ends
// of a range (and shrinks towards its start), so the rare case is a value
// in the middle: shrinking makes it common.
func rare(t *rapid.T, label string, odds int) bool {
	return rapid.IntRange(0, odds).Draw(t, label) == odds/2+1
}

// weighted draws one of common, or uncommon with probability 1/(odds+1).
func weighted(t *rapid.T, label string, common []string, uncommon string, odds int) string {
	if rare(t, label+"Rare", odds) {
		return uncommon
	}
	return rapid.SampledFrom(common).Draw(t, label)
}

// drawBatch draws the next batch without applying it.
func (h *harness) drawBatch() fsm.Batch {
	h.at += int64(rapid.SampledFrom(timeStep).Draw(h.t, "dt"))
	b := fsm.Batch{Time: h.at, Node: rapid.SampledFrom([]string{"n1", "n2"}).Draw(h.t, "node")}
	seq := h.live.Chain().Seq
	if h.raft == 0 && !rare(h.t, "startWithoutPolicy", 9) {
		// Start under the version 1 default, the version 2 provenance
		// policy or the version 2 engine policy.
		first := propPolicies[rapid.SampledFrom([]int{0, 1, 3, 7}).Draw(h.t, "firstPolicy")]
		b.Commands = append(b.Commands, fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: first})
	}
	if rare(h.t, "raiseFormat", 7) {
		// The receipt format level: usually the next one up, sometimes
		// the one in force, a lower one or one no build writes.
		level := rapid.Uint64Range(0, fsm.MaxReceiptFormat+1).Draw(h.t, "format")
		b.Commands = append(b.Commands, fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:" + b.Node, Format: level})
	}
	if rare(h.t, "refusalSummary", 5) {
		// A refusal summary: refused below level 3 and when it counts
		// nothing, else one evidence-only receipt.
		since := h.at - int64(rapid.SampledFrom([]time.Duration{0, time.Second, -time.Second}).Draw(h.t, "summaryWindow"))
		b.Commands = append(b.Commands, fsm.Command{Op: fsm.OpRefusalSummary, Caller: "issuer:" + b.Node,
			Key: rapid.SampledFrom([]string{"", "w1", "w2"}).Draw(h.t, "summaryWorker"), Tool: "spend",
			Amount: rapid.Uint64Range(0, 3).Draw(h.t, "summaryCount"), Since: since, Until: h.at})
	}
	if rare(h.t, "breakGlass", 5) {
		// A break-glass case: refused below level 6 and when malformed
		// (no reason, a scope of another form, a lifetime out of range),
		// else one evidence-only receipt.
		b.Commands = append(b.Commands, fsm.Command{Op: fsm.OpBreakGlass, Caller: "operator",
			CaseID:     rapid.SampledFrom([]string{"inc-1", "inc-2", "bad id"}).Draw(h.t, "glassCase"),
			GlassScope: rapid.SampledFrom([]string{"worker:w1", "worker:w2", "lane:isolated"}).Draw(h.t, "glassScope"),
			TTL:        int64(rapid.SampledFrom([]time.Duration{0, time.Minute, 9 * time.Hour}).Draw(h.t, "glassTTL")),
			Note:       rapid.SampledFrom([]string{"", "incident 7"}).Draw(h.t, "glassReason")})
	}
	for n := rapid.IntRange(1, 6).Draw(h.t, "size"); n > 0; n-- {
		c := h.drawCommand(seq)
		if c.Op == fsm.OpRequest && rare(h.t, "underRoute", 3) {
			// Work under a route, at the current generation or a named one.
			c.Route = rapid.SampledFrom([]string{"job-a", "job-b"}).Draw(h.t, "requestRoute")
			c.RouteGen = rapid.Uint64Range(0, 3).Draw(h.t, "requestGen")
		}
		b.Commands = append(b.Commands, c)
		if rare(h.t, "routeOp", 2) {
			b.Commands = append(b.Commands, drawRouteOp(h.t, b.Node))
		}
	}
	for n := rapid.IntRange(0, 2).Draw(h.t, "reviewOps"); n > 0; n-- {
		b.Commands = append(b.Commands, h.drawReviewOp())
	}
	if rare(h.t, "fleetOps", 2) {
		for n := rapid.IntRange(1, 3).Draw(h.t, "fleetOps"); n > 0; n-- {
			b.Commands = append(b.Commands, h.drawFleetOp())
		}
	}
	return b
}

// propChildren are the ids spawns draw from (few, so that reuse is
// refused and trees grow a few levels deep).
var propChildren = []string{"w1-c1", "w1-c2", "w2-c3", "w1-c1-c4"}

// drawFleetOp draws a command of fleets (refused below receipt format
// level 8): a spawn from a root or a child with a scope drawn from a small
// universe, a checkpoint restore, a respawn, a lift, or a request by a
// spawned child.
func (h *harness) drawFleetOp() fsm.Command {
	t := h.t
	all := append(append([]string(nil), workers...), propChildren...)
	childOf := func(parent string) string { // a child id of parent, or another worker's
		for _, c := range propChildren {
			if strings.HasPrefix(c, parent+"-") && rapid.Bool().Draw(t, "ownChild") {
				return c
			}
		}
		return rapid.SampledFrom(propChildren).Draw(t, "otherChild")
	}
	sub := func(label string, from []string) []string {
		var out []string
		for _, v := range from {
			if rapid.IntRange(0, 2).Draw(t, label) == 0 {
				out = append(out, v)
			}
		}
		return out
	}
	switch rapid.IntRange(0, 9).Draw(t, "fleetOp") {
	case 0, 1, 2:
		parent := rapid.SampledFrom(all).Draw(t, "spawnParent")
		return fsm.Command{Op: fsm.OpSpawn, Caller: parent,
			Key:          weighted(t, "spawnChild", []string{childOf(parent)}, "bad.id", 19),
			Lane:         weighted(t, "spawnLane", []string{"specialist", "isolated", "coordinator"}, "", 19),
			ParentLane:   rapid.SampledFrom([]string{"", "specialist", "coordinator"}).Draw(t, "parentLane"),
			ScopeTools:   sub("spawnTools", []string{"Bash", "Read", "Re*", "mcp__x"}),
			ScopeClasses: sub("spawnClasses", []string{"local_read", "arbitrary_execution", "remote_query"}),
			ScopeTargets: sub("spawnTargets", []string{"path:/work/*", "path:/work/w1/*", "shell:*"}),
			TTL:          int64(rapid.SampledFrom([]time.Duration{0, 0, time.Second, time.Minute, 2 * time.Hour, 48 * time.Hour}).Draw(t, "spawnTTL"))}
	case 3:
		return fsm.Command{Op: fsm.OpRestore, Caller: weighted(t, "restorer", all, "operator:root", 19)}
	case 4:
		return fsm.Command{Op: fsm.OpRespawn, Caller: weighted(t, "respawner", []string{"operator:root"}, "w1", 9),
			Key: rapid.SampledFrom(all).Draw(t, "respawned"), Lane: rapid.SampledFrom([]string{"specialist", "isolated", "coordinator"}).Draw(t, "respawnLane")}
	case 5:
		return fsm.Command{Op: fsm.OpLift, Caller: weighted(t, "lifter", []string{"operator:root"}, "c1", 9),
			Key: rapid.SampledFrom(all).Draw(t, "lifted")}
	case 6:
		return fsm.Command{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/" + rapid.SampledFrom(all).Draw(t, "revokedChild")}
	}
	h.nextID++
	tool := rapid.SampledFrom([]string{"Bash", "Read"}).Draw(t, "childTool")
	raw := rapid.SampledFrom(propCalls[tool]).Draw(t, "childCall")
	c := fsm.Command{Op: fsm.OpRequest, Caller: rapid.SampledFrom(propChildren).Draw(t, "childCaller"),
		Lane: rapid.SampledFrom([]string{"specialist", "isolated"}).Draw(t, "childLane"), Tool: tool,
		GrantID: "gc" + strconv.Itoa(h.nextID), Cwd: "/work/w1"}
	c.Digest, _ = grants.DigestArgs(tool, []byte(raw))
	c.Args, _ = policy.FlattenArgs([]byte(raw))
	h.ids = append(h.ids, genGrant{c.GrantID, c.Caller, c.Digest, c.Args})
	return c
}

// drawReviewOp draws a command of reviews as decision records (refused
// below receipt format level 4): an artifact review opened (few slugs and
// digests, so versions and supersession occur), a decision by an
// operator, a reviewer or a worker, a plain-text reply (few texts, so
// duplicates, batches and ambiguity occur), or a request naming an
// artifact review.
func (h *harness) drawReviewOp() fsm.Command {
	t := h.t
	slug := rapid.SampledFrom([]string{"report", "plan", "Bad Slug"}).Draw(t, "slug")
	version := rapid.SampledFrom([]string{"1", "2", "3"}).Draw(t, "version")
	ref := rapid.SampledFrom([]string{slug + "_v" + version + "_keep", slug + "_v" + version + "_review",
		"vault-read_v1_keep", "bash_v1_review", "send-email_v2_keep", ""}).Draw(t, "ref")
	if len(h.reviews) > 0 && rapid.Bool().Draw(t, "refByID") {
		ref = h.reviews[rapid.IntRange(max(0, len(h.reviews)-4), len(h.reviews)-1).Draw(t, "refReview")]
	}
	art := events.Sum([]byte(rapid.SampledFrom([]string{"a1", "a2", "a3"}).Draw(t, "artifact")))
	switch rapid.IntRange(0, 3).Draw(t, "reviewOp") {
	case 0:
		return fsm.Command{Op: fsm.OpOpenReview, Caller: rapid.SampledFrom(workers).Draw(t, "opener"),
			Lane: weighted(t, "openLane", []string{"coordinator"}, "specialist", 9), Caption: slug,
			Path: "out/" + slug + ".pdf", ContentDigest: art, Transition: "review_ready->send",
			Destination:  rapid.SampledFrom([]string{"", "recipient:amy@example.com", "class:finance"}).Draw(t, "dest"),
			ReviewerRole: rapid.SampledFrom([]string{"", "finance"}).Draw(t, "role")}
	case 1:
		return fsm.Command{Op: fsm.OpDecideReview,
			Caller:   rapid.SampledFrom([]string{"operator:root", "reviewer:dana", "reviewer:w1", "w1"}).Draw(t, "decider"),
			Roles:    rapid.SampledFrom([][]string{nil, {"finance"}}).Draw(t, "roles"),
			ReviewID: ref, Outcome: rapid.SampledFrom([]string{"approve", "approve", "reject", "maybe"}).Draw(t, "outcome"),
			TTL: int64(rapid.SampledFrom([]time.Duration{0, 30 * time.Second, 48 * time.Hour, -1}).Draw(t, "decideTTL"))}
	case 2:
		text := rapid.SampledFrom([]string{"lgtm", "keep", "no", "keep all", "keep all three", "yes but no", "hmm",
			ref, ref + " " + slug + "_v1_keep", "reject " + ref}).Draw(t, "replyText")
		return fsm.Command{Op: fsm.OpReviewReply,
			Caller:  rapid.SampledFrom([]string{"operator:root", "reviewer:dana", "w1"}).Draw(t, "relay"),
			Roles:   rapid.SampledFrom([][]string{nil, {"finance"}}).Draw(t, "replyRoles"),
			Channel: "chat", Sender: rapid.SampledFrom([]string{"dana", "w1"}).Draw(t, "sender"),
			ReplyAt: int64(rapid.IntRange(0, 2).Draw(t, "replyAt")), Text: text}
	}
	h.nextID++
	c := fsm.Command{Op: fsm.OpRequest, Caller: rapid.SampledFrom(workers).Draw(t, "artCaller"), Lane: "coordinator",
		Tool: "send_email", GrantID: "ga" + strconv.Itoa(h.nextID), ReviewID: ref, ContentDigest: art}
	raw := `{"to":"bob@outside.net"}`
	c.Digest = grants.RequestDigest(c.Tool, []byte(raw))
	c.Args, _ = policy.FlattenArgs([]byte(raw))
	return c
}

// apply applies b to the live state and collects its events from the
// outbox (no watermark in b reaches them, see drawCommand).
func (h *harness) apply(b fsm.Batch) step {
	h.raft++
	s := step{batch: b, raft: h.raft, before: h.live.Chain().Seq}
	s.envs = fsm.Apply(h.live, h.raft, b)
	if len(s.envs) != len(b.Commands) {
		h.t.Fatalf("%d envelopes for %d commands", len(s.envs), len(b.Commands))
	}
	for _, p := range h.live.Outbox(s.before, 0) {
		e, err := events.Decode(p.Data)
		if err != nil {
			h.t.Fatalf("outbox seq %d does not decode: %v", p.Seq, err)
		}
		s.raw = append(s.raw, p.Data)
		s.evs = append(s.evs, e)
		switch e.Kind {
		case events.KindPermit:
			h.minted = append(h.minted, genGrant{e.GrantID, e.Worker, e.Digest, h.argsOf(e.GrantID)})
		case events.KindAttempt:
			h.spent = append(h.spent, genGrant{e.GrantID, e.Worker, e.Digest, h.argsOf(e.GrantID)})
		case events.KindApprovalRequired:
			h.reviews = append(h.reviews, e.ReviewID)
		}
	}
	if uint64(len(s.evs)) != h.live.Chain().Seq-s.before {
		h.t.Fatalf("batch produced events %d..%d but the outbox holds %d of them", s.before+1, h.live.Chain().Seq, len(s.evs))
	}
	return s
}

func (h *harness) next() step { return h.apply(h.drawBatch()) }

// argsOf returns the arguments of the latest request proposed for a grant
// id.
func (h *harness) argsOf(id string) policy.Args {
	for i := len(h.ids) - 1; i >= 0; i-- {
		if h.ids[i].id == id {
			return h.ids[i].args
		}
	}
	return policy.Args{}
}

func drawSteps(t *rapid.T) int { return rapid.IntRange(1, 30).Draw(t, "batches") }

func outboxBytes(s *fsm.State) []byte {
	var b bytes.Buffer
	for _, p := range s.Outbox(0, 0) {
		fmt.Fprintf(&b, "%d %s %x\n", p.Seq, p.Subject, p.Data)
	}
	return b.Bytes()
}

// Determinism: two fresh states fed the same batches give identical
// envelopes, identical outbox bytes and identical snapshot bytes.
func TestPropDeterminism(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		twin := fsm.New()
		for i, n := 0, drawSteps(t); i < n; i++ {
			s := h.next()
			envs := fsm.Apply(twin, s.raft, s.batch)
			if !reflect.DeepEqual(envs, s.envs) {
				t.Fatalf("batch %d: envelopes differ:\n%+v\n%+v", i, s.envs, envs)
			}
			if !bytes.Equal(outboxBytes(twin), outboxBytes(h.live)) {
				t.Fatalf("batch %d: outbox bytes differ", i)
			}
			if !bytes.Equal(twin.Snapshot(), h.live.Snapshot()) {
				t.Fatalf("batch %d: snapshot bytes differ", i)
			}
		}
	})
}

// Snapshot/restore: at a random cut, Restore(Snapshot()) is the same state
// (same snapshot bytes, same digest, same receipt format level) and
// behaves the same from then on (same envelopes, same event bytes, in the
// form of the level in force, same snapshots).
func TestPropSnapshotRestore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		n := drawSteps(t)
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		var restored *fsm.State
		for i := 0; i <= n; i++ {
			if i == cut {
				snap := h.live.Snapshot()
				r, err := fsm.Restore(snap)
				if err != nil {
					t.Fatalf("Restore(Snapshot()) at batch %d: %v", i, err)
				}
				if !bytes.Equal(r.Snapshot(), snap) || r.Digest() != h.live.Digest() {
					t.Fatalf("restored state differs at batch %d", i)
				}
				if r.Clock() != h.live.Clock() || r.Epoch() != h.live.Epoch() || r.Chain() != h.live.Chain() || r.Published() != h.live.Published() ||
					r.ReceiptFormat() != h.live.ReceiptFormat() {
					t.Fatalf("restored accessors differ at batch %d", i)
				}
				checkExpiry(t, fmt.Sprintf("restored at batch %d", i), r, h.live)
				restored = r
			}
			if i == n {
				break
			}
			s := h.next()
			if restored == nil {
				continue
			}
			envs := fsm.Apply(restored, s.raft, s.batch)
			if !reflect.DeepEqual(envs, s.envs) {
				t.Fatalf("batch %d after restore: envelopes differ:\n%+v\n%+v", i, s.envs, envs)
			}
			var raw [][]byte
			for _, p := range restored.Outbox(s.before, 0) {
				raw = append(raw, p.Data)
			}
			if !reflect.DeepEqual(raw, s.raw) {
				t.Fatalf("batch %d after restore: events differ", i)
			}
			if !bytes.Equal(restored.Snapshot(), h.live.Snapshot()) {
				t.Fatalf("batch %d after restore: snapshots differ", i)
			}
			checkExpiry(t, fmt.Sprintf("batch %d after restore", i), restored, h.live)
		}
	})
}

// checkExpiry checks that both states schedule every entry they hold for
// removal and would remove them in the same order.
func checkExpiry(t *rapid.T, when string, got, want *fsm.State) {
	gotRm, gotLeft := fsm.ExpiryRemovals(got)
	wantRm, wantLeft := fsm.ExpiryRemovals(want)
	if len(gotLeft) > 0 || len(wantLeft) > 0 {
		t.Fatalf("%s: entries never scheduled for removal: %v, %v", when, gotLeft, wantLeft)
	}
	if !reflect.DeepEqual(gotRm, wantRm) {
		t.Fatalf("%s: expiry order differs:\n%v\n%v", when, gotRm, wantRm)
	}
}

// Replay (the auditor's check): folding every emitted event, decoded from
// the outbox bytes, with Evolve into fsm.New() gives the live Digest after
// every batch.
func TestPropReplay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		replay := fsm.New()
		for i, n := 0, drawSteps(t); i < n; i++ {
			s := h.next()
			for _, e := range s.evs {
				if err := fsm.Evolve(replay, e); err != nil {
					t.Fatalf("batch %d: Evolve seq %d: %v", i, e.Seq, err)
				}
			}
			if replay.Digest() != h.live.Digest() {
				t.Fatalf("batch %d: replayed digest %s, live %s", i, replay.Digest().Short(), h.live.Digest().Short())
			}
			if replay.Chain() != h.live.Chain() || replay.Clock() != h.live.Clock() {
				t.Fatalf("batch %d: replayed chain or clock differs", i)
			}
			checkExpiry(t, fmt.Sprintf("batch %d replayed", i), replay, h.live)
			// A receipt folded twice is refused and changes nothing.
			if len(s.evs) > 0 {
				d := replay.Digest()
				if err := fsm.Evolve(replay, s.evs[len(s.evs)-1]); err == nil || replay.Digest() != d {
					t.Fatalf("batch %d: a repeated receipt was accepted (err=%v)", i, err)
				}
			}
		}
	})
}

// Single spend, across the whole run: at most one attempt per grant id;
// every attempt follows exactly one live permit for the same grant, worker
// and request digest, under the same epoch and revocation counters, and
// before that grant's expiry. A grant id is only ever permitted again
// after its previous grant was forgotten (expiry + RetainMargin).
func TestPropSingleSpend(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		var all []events.Event
		for i, n := 0, drawSteps(t); i < n; i++ {
			all = append(all, h.next().evs...)
		}
		checkSpendInvariants(t, all)
	})
}

func checkSpendInvariants(t *rapid.T, all []events.Event) {
	permits := map[uint64]events.Event{}       // by seq
	permitsByID := map[string][]events.Event{} // in order
	attempts := map[string]int{}               // per grant id, while the id had one grant
	attemptOf := map[uint64]uint64{}           // permit seq -> attempt seq
	counters := map[string]uint64{}
	epoch := uint64(0)
	for _, e := range all {
		switch e.Kind {
		case events.KindEpoch:
			epoch = e.Epoch
		case events.KindRevoke, events.KindSpawn, events.KindIncarnation:
			// Revocations, spawns and incarnations move counters.
			for _, c := range e.Counters {
				counters[c.Key] = c.Value
			}
		case events.KindPermit:
			for _, old := range permitsByID[e.GrantID] {
				if e.Time < old.ExpiresAt+fsm.RetainMargin {
					t.Fatalf("seq %d re-permits grant %s while the grant of seq %d is retained", e.Seq, e.GrantID, old.Seq)
				}
			}
			if e.ExpiresAt <= e.Time || e.IssuedAt != e.Time {
				t.Fatalf("seq %d: permit issued %d expires %d at time %d", e.Seq, e.IssuedAt, e.ExpiresAt, e.Time)
			}
			permits[e.Seq] = e
			permitsByID[e.GrantID] = append(permitsByID[e.GrantID], e)
		case events.KindAttempt:
			p, ok := permits[e.RefSeq]
			if !ok {
				t.Fatalf("attempt seq %d refers to seq %d, which is not a permit", e.Seq, e.RefSeq)
			}
			list := permitsByID[e.GrantID]
			if last := list[len(list)-1]; last.Seq != p.Seq {
				t.Fatalf("attempt seq %d spends permit %d, but grant %s's live permit is %d", e.Seq, p.Seq, e.GrantID, last.Seq)
			}
			switch {
			case p.GrantID != e.GrantID || p.Digest != e.Digest || p.Worker != e.Worker:
				t.Fatalf("attempt seq %d (%s %s %s) does not match permit %d (%s %s %s)", e.Seq,
					e.GrantID, e.Worker, e.Digest.Short(), p.Seq, p.GrantID, p.Worker, p.Digest.Short())
			case e.Time >= p.ExpiresAt:
				t.Fatalf("attempt seq %d at %d, grant expired at %d", e.Seq, e.Time, p.ExpiresAt)
			case e.Epoch != p.Epoch || epoch != p.Epoch:
				t.Fatalf("attempt seq %d under epoch %d (stream %d), permit under %d", e.Seq, e.Epoch, epoch, p.Epoch)
			}
			for _, c := range p.Counters {
				if counters[c.Key] != c.Value {
					t.Fatalf("attempt seq %d after %s moved from %d to %d", e.Seq, c.Key, c.Value, counters[c.Key])
				}
			}
			if prev, dup := attemptOf[p.Seq]; dup {
				t.Fatalf("grant %s (permit %d) spent twice: seq %d and %d", e.GrantID, p.Seq, prev, e.Seq)
			}
			attemptOf[p.Seq] = e.Seq
			if len(list) == 1 {
				if attempts[e.GrantID]++; attempts[e.GrantID] > 1 {
					t.Fatalf("grant %s has %d attempts", e.GrantID, attempts[e.GrantID])
				}
			}
		}
	}
}

// Clock monotonic: event times never decrease, however the batches'
// times move; the clock is the last event's time and never goes back.
func TestPropClockMonotonic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		last := int64(0)
		for i, n := 0, drawSteps(t); i < n; i++ {
			before := h.live.Clock()
			s := h.next()
			for _, e := range s.evs {
				if e.Time < last {
					t.Fatalf("event %d at %d after an event at %d", e.Seq, e.Time, last)
				}
				if e.Time != max(before, s.batch.Time) {
					t.Fatalf("event %d at %d; want max(clock %d, batch %d)", e.Seq, e.Time, before, s.batch.Time)
				}
				last = e.Time
			}
			if c := h.live.Clock(); c < before || c != last {
				t.Fatalf("clock %d after %d; last event at %d", c, before, last)
			}
		}
	})
}

// Decide is pure: asking it about any command leaves the state's snapshot
// bytes unchanged, and scribbling over the events it returns does too.
func TestPropDecideIsPure(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		for i, n := 0, drawSteps(t); i < n; i++ {
			b := h.drawBatch()
			before := h.live.Snapshot()
			now := max(h.live.Clock(), b.Time)
			for _, c := range b.Commands {
				c.Sources = append([]string(nil), c.Sources...) // the scribbling below must not reach b
				o := fsm.Decide(h.live, now, b.Node, c)
				for j := range o.Events {
					scribble(&o.Events[j])
				}
				if o.Reply != nil {
					scribbleEnvelope(o.Reply)
				}
			}
			if !bytes.Equal(h.live.Snapshot(), before) {
				t.Fatalf("batch %d: Decide changed the state", i)
			}
			h.apply(b)
		}
	})
}

// A command answered with a reply appends no event; a command that records
// answers with its first event's sequence; every event belongs to exactly
// one command. Envelopes never alias state.
func TestPropRepliesRecordNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		for i, n := 0, drawSteps(t); i < n; i++ {
			s := h.next()
			cursor := s.before
			// followUps checks that the events after a command's first
			// one, up to seq, are the further receipts a command may
			// record (reviews: supersession, batch replies, consumption,
			// expiry).
			followUps := func(j int, seq uint64) {
				for ; cursor < seq; cursor++ {
					if cursor == s.before {
						t.Fatalf("batch %d: event %d belongs to no command", i, cursor+1)
					}
					switch k := s.evs[cursor-s.before].Kind; k {
					case events.KindReviewApproved, events.KindReviewRejected, events.KindReviewOrphaned,
						events.KindReviewConsumed, events.KindReviewSuperseded, events.KindReviewExpired:
					default:
						t.Fatalf("batch %d before command %d: event %d (%s) belongs to no command", i, j, cursor+1, k)
					}
				}
			}
			for j, env := range s.envs {
				if env.Seq > cursor {
					followUps(j, env.Seq-1)
					if s.evs[env.Seq-s.before-1].Kind != env.Kind {
						t.Fatalf("batch %d command %d: answered seq %d kind %s, next event %d", i, j, env.Seq, env.Kind, cursor+1)
					}
					cursor = env.Seq
				}
			}
			followUps(len(s.envs), h.live.Chain().Seq)
			snap := h.live.Snapshot()
			for j := range s.envs {
				scribbleEnvelope(&s.envs[j])
			}
			if !bytes.Equal(h.live.Snapshot(), snap) {
				t.Fatalf("batch %d: an envelope aliases state", i)
			}
		}
	})
}

func scribble(e *events.Event) {
	for i := range e.Counters {
		e.Counters[i] = events.Counter{Key: "scribbled", Value: 999}
	}
	for i := range e.Sources {
		e.Sources[i] = "scribbled"
	}
	for i := range e.Rules {
		e.Rules[i] = "scribbled"
	}
	for i := range e.Cancelled {
		e.Cancelled[i] = "scribbled"
	}
	for i := range e.Policy {
		e.Policy[i] = 'x'
	}
	for i := range e.Grounds {
		e.Grounds[i] = "scribbled"
	}
}

func scribbleEnvelope(env *grants.Envelope) {
	for i := range env.Counters {
		env.Counters[i] = events.Counter{Key: "scribbled", Value: 999}
	}
	for i := range env.Rules {
		env.Rules[i] = "scribbled"
	}
	for i := range env.Grounds {
		env.Grounds[i] = "scribbled"
	}
}

// drawRouteOp draws a route op: acquire, renew, release, a lapse record or
// a forgetting (refused below level 7; the harness's clock never moves
// RouteRetention, TestPropRouteGenerationsNeverReused does),
// of a declared route (job-a, job-b), one no entry declares, or no route,
// by one of the workers, with a lease from none to beyond the route's
// max_ttl and sometimes a named generation.
func drawRouteOp(t *rapid.T, node string) fsm.Command {
	op := rapid.SampledFrom([]fsm.Op{fsm.OpRouteAcquire, fsm.OpRouteAcquire, fsm.OpRouteRenew, fsm.OpRouteRenew, fsm.OpRouteRelease, fsm.OpRouteLapse,
		fsm.OpRouteForget}).Draw(t, "routeOp")
	c := fsm.Command{Op: op, Caller: rapid.SampledFrom(workers).Draw(t, "routeCaller"), Lane: "coordinator",
		Route: weighted(t, "route", []string{"job-a", "job-a", "job-b"}, "weekly", 9),
		TTL:   int64(rapid.SampledFrom([]time.Duration{0, time.Second, 5 * time.Second, time.Minute}).Draw(t, "routeTTL")),
	}
	if op == fsm.OpRouteLapse || op == fsm.OpRouteForget {
		c.Caller = "issuer:" + node
	}
	if rare(t, "routeGen", 3) {
		c.RouteGen = rapid.Uint64Range(1, 3).Draw(t, "routeGenNamed")
	}
	return c
}
