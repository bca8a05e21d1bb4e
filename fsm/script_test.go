package fsm_test

// Data-driven scenario tests. Each file in testdata/scripts is one scenario:
// a script, a line "----", and the transcript the script must produce. Run
// `go test ./fsm -run TestScripts -rewrite` to regenerate the transcripts
// after an intended change, and review the diff.
//
// # Script language
//
// One command per line. Blank lines and lines starting with '#' are
// ignored; a token starting with '#' ends a line (except in `policy <json>`,
// which takes the rest of the line verbatim). Values written {...} or [...]
// may contain spaces; "..." is a quoted string.
//
//	policy default                 OpSetPolicy with policy.LegacyDefault()
//	policy recommended             OpSetPolicy with policy.Recommended()
//	policy @<name>                 OpSetPolicy with testdata/policies/<name> (YAML
//	                               or JSON), in canonical form when it parses,
//	                               else as converted (so that the state machine
//	                               refuses it)
//	policy <json>                  OpSetPolicy with this document (may be invalid)
//	at <time>                      batch time for the following entries: 1000s,
//	                               1500ms, 7ns, 16m40s, a bare integer (ns), or
//	                               +<duration> relative to the previous `at`
//	node <id>                      node id stamped on following entries (default n1)
//	request <worker> lane=L tool=T [args=<json>] [key=K] [id=G] [ttl=D]
//	        [sources=s1,s2] [session=S] [label=L] [amount=N] [bytes=N]
//	        [cwd=P] [resolved=P] [noargs=1]
//	                               OpRequest; the digest is H(T, canonical args),
//	                               or zero when args= is absent; the arguments
//	                               are forwarded flattened, as the leader does,
//	                               unless noargs=1
//	        [traces=<field>[*]:<src>[/<transform>[/<part>]],...;...]
//	                               traces: one field trace per ';'-separated
//	                               item, '*' after the field marks it covered,
//	                               '!' after a match marks it whole (the source
//	                               holds the entire raw value), transform
//	                               defaults to raw; a match may end in
//	                               @<pointer>[!]: the result field it names,
//	                               '!' when the value equals it whole
//	source <worker> id=S channel=C [scope=task|session] [content=X]
//	        [path=P] [tool=T] [origins=a,b] [model_made=1] [session=S]
//	                               OpSource; the content digest is H(X), X
//	                               defaulting to the id; scope defaults to task
//	spend <worker> <grant> [args=<json>] [tool=T] [key=K] [cwd=P]
//	        [resolved=P] [noargs=1]
//	                               OpSpend; tool defaults to the tool of the
//	                               script's request that named this grant id
//	effect <worker> <grant> <outcome> [verifier=V]
//	grantspend ...                 OpGrantSpend, with the options of request
//	effectsource <worker> <grant> <outcome> [verifier=V] id=S channel=C
//	        [options of source]    OpEffectSource
//	revoke <scope/id> [by=<caller>]        OpRevoke (caller defaults to operator:root)
//	reinstate <worker> [by=<caller>]       OpReinstate
//	approve <review> [ttl=D] [note=N] [by=<caller>]
//	                               OpApprove (caller defaults to
//	                               operator:root); <review> is a review id,
//	                               or @<grant id> for fsm.ReviewID(<grant id>)
//	format <n>                     OpRaiseFormat to level n
//	open <worker> caption=S artifact=X path=P transition=A->B
//	        [lane=L] [recipient=R | class=C] [role=R] [session=S]
//	                               OpOpenReview (lane defaults to
//	                               coordinator); the artifact digest is H(X)
//	decide <ref> approve|reject [by=<caller>] [roles=a,b] [ttl=D] [note=N]
//	                               OpDecideReview (caller defaults to
//	                               operator:root); <ref> as for approve, or a
//	                               caption or keep token
//	reply text=T [channel=C] [sender=S] [at=N] [by=<caller>] [roles=a,b]
//	                               OpReviewReply (channel chat, sender
//	                               alice, at 1, caller operator:root)
//	request ... [review=REF] [artifact=X]
//	                               a request naming an artifact review, with
//	                               the artifact's digest H(X) as it is now
//	raise <level>                  OpRaiseFormat (caller issuer:n1)
//	route acquire|renew|release|lapse|forget <worker> <route> [lane=L] [ttl=D] [gen=N]
//	                               OpRouteAcquire, OpRouteRenew, OpRouteRelease,
//	                               OpRouteLapse or OpRouteForget (for lapse and
//	                               forget, <worker> is the proposer)
//	request ... [route=R] [gen=N]  a request bound to a route's lease
//	published <seq>                OpPublished
//	op <n> [by=<caller>]           a command with a raw (possibly unknown) op
//	batch {                        the commands up to the matching line "}" form
//	...                            one log entry; every other command is its
//	}                              own log entry (raft index 1, 2, ...)
//	show grant <id>                print a live grant, or "absent" (no entry)
//	show state                     print the state's counts (no entry)
//	show usage                     print the effect-ledger, preauthorization
//	                               and quota-window counts (no entry)
//	show preauth <id>              print a preauthorization's consumption
//	show reviews                   print the open reviews and approvals counts
//	show review <review>           print an open review, or "absent"
//	show records                   print every retained review record
//	show source <id>               print a registered source, or "absent"
//	show routes                    print every route's lease at the clock
//	show fleet                     print every spawned or respawned worker
//	spawn <parent> <child> lane=L [tools=a,b] [classes=a,b] [targets=a,b]
//	        [ttl=D] [parent_lane=L]
//	                               OpSpawn
//	restore <worker>               OpRestore (a checkpoint restore)
//	respawn <worker> lane=L [by=<caller>] [note=N]
//	                               OpRespawn (caller defaults to operator:root)
//	lift <worker> [by=<caller>] [note=N]
//	                               OpLift (caller defaults to operator:root)
//
// # Transcript
//
// Every command line is echoed as "> line". A command that reaches the
// state machine is followed by its envelope on one line (decision, reason,
// missing, recovery, grant, seq, kind, outcome, review, expires, and the
// detail of an answer that recorded no event; empty fields are left out)
// and then one indented line per event it emitted:
//
//	  #<seq> <kind> t=<time> raft=<index> grant=... worker=... reason=... ...
//
// Times print as whole seconds, milliseconds or nanoseconds. Digests print
// as their first 8 hex digits.
//
// Besides the transcript, every script checks: envelopes and events of the
// real state equal those of a witness state that is fed the same entries
// without `published` commands (publication bookkeeping never touches
// authority, so the digests stay equal too); a command answered without an
// event appends nothing; and at the end, folding every event with Evolve
// from fsm.New() gives the live Digest, and Restore(Snapshot()) gives the
// same snapshot bytes and Digest.

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/policy/policyfile"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/scripts")

const scriptSep = "----"

func TestScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scripts", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/scripts")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			script, want, found := strings.Cut(string(raw), "\n"+scriptSep+"\n")
			if !found {
				if !*rewrite {
					t.Fatalf("%s: no %q line separating script and expected output", file, scriptSep)
				}
				script = strings.TrimSuffix(string(raw), "\n"+scriptSep)
			}
			got := runScript(t, file, script)
			if *rewrite {
				out := strings.TrimRight(script, "\n") + "\n" + scriptSep + "\n" + got
				if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Errorf("%s: transcript differs (run with -rewrite to accept):\n%s", file, lineDiff(want, got))
			}
		})
	}
}

// scriptRunner holds a script's real state, its witness and what the
// script has named so far.
type scriptRunner struct {
	t       *testing.T
	file    string
	line    int
	real    *fsm.State
	witness *fsm.State
	raft    uint64
	at      int64
	node    string
	tools   map[string]string // grant id -> tool of the request that named it
	out     strings.Builder
}

func runScript(t *testing.T, file, script string) string {
	r := &scriptRunner{t: t, file: file, real: fsm.New(), witness: fsm.New(), node: "n1", tools: map[string]string{}}
	lines := strings.Split(script, "\n")
	for i := 0; i < len(lines); i++ {
		r.line = i + 1
		text := strings.TrimSpace(lines[i])
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		toks := tokenize(text)
		if len(toks) == 0 {
			continue
		}
		echo := strings.Join(toks, " ")
		if toks[0] == "policy" && (len(toks) < 2 || toks[1] != "default") {
			echo = text
		}
		fmt.Fprintf(&r.out, "> %s\n", echo)
		switch toks[0] {
		case "at":
			r.need(toks, 2)
			r.at = r.parseTime(toks[1])
		case "node":
			r.need(toks, 2)
			r.node = toks[1]
		case "show":
			r.show(toks)
		case "batch":
			if len(toks) != 2 || toks[1] != "{" {
				r.fatalf("want `batch {`")
			}
			var cmds []fsm.Command
			var texts []string
			for i++; ; i++ {
				if i >= len(lines) {
					r.fatalf("batch not closed")
				}
				r.line = i + 1
				inner := strings.TrimSpace(lines[i])
				if inner == "" || strings.HasPrefix(inner, "#") {
					continue
				}
				if inner == "}" {
					break
				}
				cmds = append(cmds, r.command(inner, tokenize(inner)))
				texts = append(texts, inner)
			}
			r.apply(cmds, texts)
			r.out.WriteString("> }\n")
		default:
			r.apply([]fsm.Command{r.command(text, toks)}, nil)
		}
	}
	r.finalChecks()
	return r.out.String()
}

func (r *scriptRunner) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s:%d: %s", r.file, r.line, fmt.Sprintf(format, args...))
}

func (r *scriptRunner) need(toks []string, n int) {
	r.t.Helper()
	if len(toks) < n {
		r.fatalf("%s needs %d arguments", toks[0], n-1)
	}
}

// command parses one command line into a Command.
func (r *scriptRunner) command(text string, toks []string) fsm.Command {
	pos, kv := splitArgs(toks[1:])
	arg := func(i int) string {
		if i >= len(pos) {
			r.fatalf("%s: missing argument %d", toks[0], i+1)
		}
		return pos[i]
	}
	known := func(keys ...string) {
		for k := range kv {
			ok := false
			for _, want := range keys {
				ok = ok || k == want
			}
			if !ok {
				r.fatalf("%s: unknown option %s=", toks[0], k)
			}
		}
	}
	switch toks[0] {
	case "policy":
		doc := []byte(strings.TrimSpace(strings.TrimPrefix(text, "policy")))
		switch {
		case len(toks) > 1 && toks[1] == "default":
			doc = policy.LegacyDefault().Canonical()
		case len(toks) > 1 && toks[1] == "recommended":
			doc = policy.Recommended().Canonical()
		case len(toks) > 1 && strings.HasPrefix(toks[1], "@"):
			doc = r.policyFile(toks[1][1:])
		}
		return fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: doc}
	case "request", "grantspend":
		known("lane", "tool", "args", "key", "id", "ttl", "sources", "session", "label", "amount", "bytes", "cwd", "resolved", "noargs", "traces", "review", "artifact", "route", "gen")
		op := fsm.OpRequest
		if toks[0] == "grantspend" {
			op = fsm.OpGrantSpend
		}
		c := fsm.Command{Op: op, Caller: arg(0), Lane: kv["lane"], Tool: kv["tool"],
			IdemKey: kv["key"], GrantID: kv["id"], Session: kv["session"],
			TargetLabel: kv["label"], Cwd: kv["cwd"], Resolved: kv["resolved"], ReviewID: kv["review"], Route: kv["route"]}
		if a, ok := kv["artifact"]; ok {
			c.ContentDigest = events.Sum([]byte(a))
		}
		if v, ok := kv["gen"]; ok {
			c.RouteGen = r.uint(v)
		}
		if a, ok := kv["args"]; ok {
			c.Digest = r.digest(c.Tool, a)
			if kv["noargs"] == "" {
				c.Args = r.flatten(a)
			}
		}
		if v, ok := kv["amount"]; ok {
			c.Amount, c.HasAmount = r.uint(v), true
		}
		if v, ok := kv["bytes"]; ok {
			c.Bytes = r.uint(v)
		}
		if d, ok := kv["ttl"]; ok {
			v, err := time.ParseDuration(d)
			if err != nil {
				r.fatalf("ttl: %v", err)
			}
			c.TTL = int64(v)
		}
		if s, ok := kv["sources"]; ok {
			c.Sources = strings.Split(s, ",")
		}
		if s, ok := kv["traces"]; ok {
			c.Traces = r.traces(s)
		}
		if c.GrantID != "" {
			if _, seen := r.tools[c.GrantID]; !seen {
				r.tools[c.GrantID] = c.Tool
			}
		}
		return c
	case "spend":
		known("args", "tool", "key", "cwd", "resolved", "noargs")
		c := fsm.Command{Op: fsm.OpSpend, Caller: arg(0), GrantID: arg(1), IdemKey: kv["key"], Cwd: kv["cwd"], Resolved: kv["resolved"]}
		tool, ok := kv["tool"]
		if !ok {
			tool = r.tools[c.GrantID]
		}
		if a, ok := kv["args"]; ok {
			c.Digest = r.digest(tool, a)
			if kv["noargs"] == "" {
				c.Args = r.flatten(a)
			}
		}
		return c
	case "source":
		known("id", "channel", "scope", "content", "path", "tool", "origins", "model_made", "session")
		c := fsm.Command{Op: fsm.OpSource, Caller: arg(0), SourceID: kv["id"], Channel: kv["channel"],
			Scope: orDefault(kv["scope"], "task"), Path: kv["path"], Tool: kv["tool"], Session: kv["session"],
			ModelMade: kv["model_made"] == "1"}
		c.ContentDigest = events.Sum([]byte(orDefault(kv["content"], c.SourceID)))
		if o, ok := kv["origins"]; ok {
			c.Origins = strings.Split(o, ",")
		}
		return c
	case "effect":
		known("verifier")
		return fsm.Command{Op: fsm.OpEffect, Caller: arg(0), GrantID: arg(1), Outcome: arg(2), Verifier: kv["verifier"]}
	case "effectsource":
		known("verifier", "id", "channel", "scope", "content", "path", "tool", "origins", "model_made", "session")
		c := fsm.Command{Op: fsm.OpEffectSource, Caller: arg(0), GrantID: arg(1), Outcome: arg(2), Verifier: kv["verifier"],
			SourceID: kv["id"], Channel: kv["channel"], Scope: orDefault(kv["scope"], "task"), Path: kv["path"],
			Tool: kv["tool"], Session: kv["session"], ModelMade: kv["model_made"] == "1"}
		c.ContentDigest = events.Sum([]byte(orDefault(kv["content"], c.SourceID)))
		if o, ok := kv["origins"]; ok {
			c.Origins = strings.Split(o, ",")
		}
		return c
	case "revoke":
		known("by")
		return fsm.Command{Op: fsm.OpRevoke, Caller: orDefault(kv["by"], "operator:root"), Key: arg(0)}
	case "reinstate":
		known("by")
		key := ""
		if len(pos) > 0 {
			key = pos[0]
		}
		return fsm.Command{Op: fsm.OpReinstate, Caller: orDefault(kv["by"], "operator:root"), Key: key}
	case "approve":
		known("ttl", "note", "by")
		c := fsm.Command{Op: fsm.OpApprove, Caller: orDefault(kv["by"], "operator:root"), Note: kv["note"]}
		if len(pos) > 0 {
			c.ReviewID = reviewArg(pos[0])
		}
		if d, ok := kv["ttl"]; ok {
			v, err := time.ParseDuration(d)
			if err != nil {
				r.fatalf("ttl: %v", err)
			}
			c.TTL = int64(v)
		}
		return c
	case "format":
		return fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: r.uint(arg(0))}
	case "open":
		known("caption", "artifact", "path", "transition", "lane", "recipient", "class", "role", "session")
		c := fsm.Command{Op: fsm.OpOpenReview, Caller: arg(0), Lane: orDefault(kv["lane"], "coordinator"),
			Session: kv["session"], Caption: kv["caption"], Path: kv["path"], Transition: kv["transition"],
			ReviewerRole: kv["role"]}
		if a, ok := kv["artifact"]; ok {
			c.ContentDigest = events.Sum([]byte(a))
		}
		if v, ok := kv["recipient"]; ok {
			c.Destination = "recipient:" + v
		}
		if v, ok := kv["class"]; ok {
			c.Destination = "class:" + v
		}
		return c
	case "decide":
		known("by", "roles", "ttl", "note")
		c := fsm.Command{Op: fsm.OpDecideReview, Caller: orDefault(kv["by"], "operator:root"), Note: kv["note"],
			ReviewID: reviewArg(arg(0)), Outcome: arg(1)}
		if v, ok := kv["roles"]; ok {
			c.Roles = strings.Split(v, ",")
		}
		if d, ok := kv["ttl"]; ok {
			v, err := time.ParseDuration(d)
			if err != nil {
				r.fatalf("ttl: %v", err)
			}
			c.TTL = int64(v)
		}
		return c
	case "raise":
		return fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: r.uint(arg(0))}
	case "route":
		known("lane", "ttl", "gen")
		ops := map[string]fsm.Op{"acquire": fsm.OpRouteAcquire, "renew": fsm.OpRouteRenew, "release": fsm.OpRouteRelease,
			"lapse": fsm.OpRouteLapse, "forget": fsm.OpRouteForget}
		op, ok := ops[arg(0)]
		if !ok {
			r.fatalf("route: want acquire, renew, release, lapse or forget, got %q", arg(0))
		}
		c := fsm.Command{Op: op, Caller: arg(1), Route: arg(2), Lane: kv["lane"]}
		if v, ok := kv["gen"]; ok {
			c.RouteGen = r.uint(v)
		}
		if d, ok := kv["ttl"]; ok {
			v, err := time.ParseDuration(d)
			if err != nil {
				r.fatalf("ttl: %v", err)
			}
			c.TTL = int64(v)
		}
		return c
	case "reply":
		known("text", "channel", "sender", "at", "by", "roles")
		c := fsm.Command{Op: fsm.OpReviewReply, Caller: orDefault(kv["by"], "operator:root"), Text: kv["text"],
			Channel: orDefault(kv["channel"], "chat"), Sender: orDefault(kv["sender"], "alice")}
		c.ReplyAt = int64(r.uint(orDefault(kv["at"], "1")))
		if v, ok := kv["roles"]; ok {
			c.Roles = strings.Split(v, ",")
		}
		return c
	case "spawn":
		known("lane", "tools", "classes", "targets", "ttl", "parent_lane")
		c := fsm.Command{Op: fsm.OpSpawn, Caller: arg(0), Key: arg(1), Lane: kv["lane"], ParentLane: kv["parent_lane"]}
		split := func(k string) []string {
			if v, ok := kv[k]; ok {
				return strings.Split(v, ",")
			}
			return nil
		}
		c.ScopeTools, c.ScopeClasses, c.ScopeTargets = split("tools"), split("classes"), split("targets")
		if d, ok := kv["ttl"]; ok {
			v, err := time.ParseDuration(d)
			if err != nil {
				r.fatalf("ttl: %v", err)
			}
			c.TTL = int64(v)
		}
		return c
	case "restore":
		return fsm.Command{Op: fsm.OpRestore, Caller: arg(0)}
	case "respawn":
		known("lane", "by", "note")
		return fsm.Command{Op: fsm.OpRespawn, Caller: orDefault(kv["by"], "operator:root"), Key: arg(0), Lane: kv["lane"], Note: kv["note"]}
	case "lift":
		known("by", "note")
		return fsm.Command{Op: fsm.OpLift, Caller: orDefault(kv["by"], "operator:root"), Key: arg(0), Note: kv["note"]}
	case "published":
		n, err := strconv.ParseUint(arg(0), 10, 64)
		if err != nil {
			r.fatalf("published: %v", err)
		}
		return fsm.Command{Op: fsm.OpPublished, Caller: "publisher", Seq: n}
	case "op":
		known("by")
		n, err := strconv.ParseUint(arg(0), 10, 8)
		if err != nil {
			r.fatalf("op: %v", err)
		}
		return fsm.Command{Op: fsm.Op(n), Caller: orDefault(kv["by"], "operator:root")}
	}
	r.fatalf("unknown command %q", toks[0])
	return fsm.Command{}
}

// policyFile reads testdata/policies/<name>: its canonical form when it
// parses, else the document as converted to JSON.
func (r *scriptRunner) policyFile(name string) []byte {
	raw, err := os.ReadFile(filepath.Join("testdata", "policies", name))
	if err != nil {
		r.fatalf("policy: %v", err)
	}
	if p, err := policyfile.Parse(raw); err == nil {
		return p.Canonical()
	}
	j, err := policyfile.ToJSON(raw)
	if err != nil {
		return raw
	}
	return j
}

// traces parses the traces= option (see the script language).
func (r *scriptRunner) traces(spec string) []fsm.Trace {
	var out []fsm.Trace
	for _, item := range strings.Split(spec, ";") {
		field, matches, ok := strings.Cut(item, ":")
		if !ok {
			r.fatalf("traces: %q has no ':'", item)
		}
		t := fsm.Trace{Field: strings.TrimSuffix(field, "*"), Covered: strings.HasSuffix(field, "*")}
		for _, m := range strings.Split(matches, ",") {
			if m == "" {
				continue
			}
			m, ptr, hasPtr := strings.Cut(m, "@")
			whole := strings.HasSuffix(m, "!")
			parts := strings.SplitN(strings.TrimSuffix(m, "!"), "/", 3)
			tm := fsm.TraceMatch{Source: parts[0], Transform: "raw", Whole: whole}
			if hasPtr {
				tm.Field, tm.FieldWhole = strings.TrimSuffix(ptr, "!"), strings.HasSuffix(ptr, "!")
			}
			if len(parts) > 1 {
				tm.Transform = parts[1]
			}
			if len(parts) > 2 {
				tm.Part = parts[2]
			}
			t.Matches = append(t.Matches, tm)
		}
		out = append(out, t)
	}
	return out
}

func (r *scriptRunner) flatten(args string) policy.Args {
	a, err := policy.FlattenArgs([]byte(args))
	if err != nil {
		r.fatalf("args %s: %v", args, err)
	}
	return a
}

func (r *scriptRunner) uint(s string) uint64 {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		r.fatalf("%q: %v", s, err)
	}
	return v
}

func (r *scriptRunner) digest(tool, args string) events.Hash {
	d, err := grants.DigestArgs(tool, []byte(args))
	if err != nil {
		r.fatalf("args %s: %v", args, err)
	}
	return d
}

func (r *scriptRunner) parseTime(s string) int64 {
	rel := strings.HasPrefix(s, "+")
	s = strings.TrimPrefix(s, "+")
	var v int64
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		v = n
	} else {
		d, err := time.ParseDuration(s)
		if err != nil {
			r.fatalf("time %q: %v", s, err)
		}
		v = int64(d)
	}
	if rel {
		return r.at + v
	}
	return v
}

// apply runs one log entry through the real state and the witness and
// prints each command's envelope and events. texts are the inner lines of a
// batch (echoed before each command), nil for a single command.
func (r *scriptRunner) apply(cmds []fsm.Command, texts []string) {
	r.t.Helper()
	r.raft++
	b := fsm.Batch{Time: r.at, Node: r.node, Commands: cmds}
	wb := fsm.Batch{Time: r.at, Node: r.node}
	for _, c := range cmds {
		if c.Op != fsm.OpPublished {
			wb.Commands = append(wb.Commands, c)
		}
	}
	before := r.real.Chain().Seq
	envs := fsm.Apply(r.real, r.raft, b)
	wenvs := fsm.Apply(r.witness, r.raft, wb)
	after := r.real.Chain().Seq
	if len(envs) != len(cmds) {
		r.fatalf("%d envelopes for %d commands", len(envs), len(cmds))
	}
	if r.witness.Chain() != r.real.Chain() || r.witness.Digest() != r.real.Digest() {
		r.fatalf("published commands changed authority: witness chain/digest differ from the real state")
	}
	// The witness never trims, so its outbox holds every event.
	evs := map[uint64]events.Event{}
	for _, p := range r.witness.Outbox(before, 0) {
		e, err := events.Decode(p.Data)
		if err != nil {
			r.fatalf("outbox seq %d: %v", p.Seq, err)
		}
		if e.Seq != p.Seq || p.Subject != events.Subject(e.Kind) {
			r.fatalf("outbox entry %d carries event %d on %s", p.Seq, e.Seq, p.Subject)
		}
		evs[e.Seq] = e
	}
	// Attribute events to commands: a command that recorded events answers
	// with the sequence of its first one; replies name an older sequence.
	cursor := before
	wi := 0
	for i, c := range cmds {
		if texts != nil {
			fmt.Fprintf(&r.out, "> %s\n", strings.Join(tokenize(texts[i]), " "))
		}
		env := envs[i]
		if c.Op != fsm.OpPublished {
			if !equalEnvelope(env, wenvs[wi]) {
				r.fatalf("command %d: real envelope %+v, witness %+v", i, env, wenvs[wi])
			}
			wi++
		}
		line := formatEnvelope(env)
		first, recorded := firstSeq(c, env, cursor, evs)
		if !recorded {
			// Answered without an event: the detail is shown nowhere else.
			r.out.WriteString(strings.Join(appendKV([]string{line}, "detail", env.Detail), " ") + "\n")
			continue
		}
		r.out.WriteString(line + "\n")
		if first != cursor+1 {
			r.fatalf("command %d answered with seq %d, next event is %d", i, first, cursor+1)
		}
		end := after
		for k, next := range envs[i+1:] {
			if f, ok := firstSeq(cmds[i+1+k], next, before, evs); ok && f > first {
				end = f - 1
				break
			}
		}
		for seq := first; seq <= end; seq++ {
			e, ok := evs[seq]
			if !ok {
				r.fatalf("event %d missing from the outbox", seq)
			}
			r.out.WriteString("  " + formatEvent(e) + "\n")
		}
		cursor = end
	}
	if cursor != after {
		r.fatalf("events %d..%d belong to no command", cursor+1, after)
	}
}

// firstSeq returns the sequence of the first event command c recorded in
// an entry that began after sequence before, given its answer env. A
// command's answer names its first event, except a grant-and-spend's (the
// attempt after its permit) and an effect-and-source's whose effect was a
// retry (the source's). Events up to before belong to earlier commands.
func firstSeq(c fsm.Command, env grants.Envelope, before uint64, evs map[uint64]events.Event) (uint64, bool) {
	switch c.Op {
	case fsm.OpGrantSpend:
		if env.Seq <= before {
			return 0, false
		}
		if p, ok := evs[env.Seq-1]; ok && env.Kind == events.KindAttempt && env.Seq-1 > before &&
			p.Kind == events.KindPermit && p.GrantID == env.GrantID {
			return env.Seq - 1, true
		}
	case fsm.OpEffectSource:
		if env.Seq <= before && env.Source != nil && env.Source.Seq > before {
			return env.Source.Seq, true
		}
	}
	return env.Seq, env.Seq > before
}

func equalEnvelope(a, b grants.Envelope) bool {
	if (a.Source == nil) != (b.Source == nil) || a.Source != nil && !equalEnvelope(*a.Source, *b.Source) {
		return false
	}
	a.Source, b.Source = nil, nil
	return fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b)
}

func (r *scriptRunner) show(toks []string) {
	r.need(toks, 2)
	switch toks[1] {
	case "grant":
		r.need(toks, 3)
		g, ok := r.real.Grant(toks[2])
		if !ok {
			fmt.Fprintf(&r.out, "grant %s absent\n", toks[2])
			return
		}
		line := []string{"grant " + g.ID, "status=" + g.Status.String(), "worker=" + g.Worker,
			"epoch=" + strconv.FormatUint(g.Epoch, 10), "expires=" + fmtTime(g.ExpiresAt)}
		line = appendKV(line, "outcome", g.Outcome)
		line = appendKV(line, "verifier", g.Verifier)
		line = appendUint(line, "attempt", g.AttemptSeq)
		line = appendUint(line, "effect", g.EffectSeq)
		line = appendUint(line, "revoked", g.RevokedSeq)
		r.out.WriteString(strings.Join(line, " ") + "\n")
	case "state":
		st := r.real.Stats()
		fmt.Fprintf(&r.out, "state clock=%s epoch=%d grants=%d permitted=%d spent=%d closed=%d revoked=%d idem=%d counters=%d barred=%d seq=%d published=%d outbox=%d\n",
			fmtTime(st.Clock), st.Epoch, st.Grants, st.Permitted, st.Spent, st.Closed, st.Revoked,
			st.Idem, st.Counters, st.Barred, st.Seq, st.Published, st.Outbox)
		if ob := r.real.Outbox(0, 0); len(ob) > 0 {
			fmt.Fprintf(&r.out, "outbox %d..%d\n", ob[0].Seq, ob[len(ob)-1].Seq)
		}
	case "usage":
		st := r.real.Stats()
		fmt.Fprintf(&r.out, "usage ledger=%d preauths=%d quotas=%d\n", st.Ledger, st.Preauths, st.Quotas)
	case "source":
		r.need(toks, 3)
		src, ok := r.real.Source(toks[2])
		if !ok {
			fmt.Fprintf(&r.out, "source %s absent\n", toks[2])
			return
		}
		line := []string{"source " + src.ID, "owner=" + src.Owner, "channel=" + src.Channel, "scope=" + src.Scope,
			"authority=" + src.Authority.String(), "registered=" + fmtTime(src.RegisteredAt), "expires=" + fmtTime(src.ExpiresAt),
			"seq=" + strconv.FormatUint(src.Seq, 10)}
		line = appendKV(line, "path", src.Path)
		line = appendKV(line, "tool", src.Tool)
		if len(src.Origins) > 0 {
			line = append(line, "origins="+strings.Join(src.Origins, ","))
		}
		if src.ModelMade {
			line = append(line, "model_made")
		}
		line = append(line, "counters="+fmtCounters(src.Counters))
		fmt.Fprintf(&r.out, "%s\n", strings.Join(line, " "))
		fmt.Fprintf(&r.out, "sources %d\n", r.real.Stats().Sources)
	case "routes":
		for _, in := range r.real.Routes(r.real.Clock()) {
			line := []string{"route " + in.Route, "gen=" + strconv.FormatUint(in.Gen, 10), "owner=" + in.Owner}
			if in.Live {
				line = append(line, "live", "expires="+fmtTime(in.Expires), "left="+fmtTime(in.Left))
			} else {
				line = append(line, "ended="+in.Ended, "at="+fmtTime(in.EndedAt))
			}
			r.out.WriteString(strings.Join(line, " ") + "\n")
		}
		st := r.real.Stats()
		fmt.Fprintf(&r.out, "routes %d live=%d\n", st.Routes, st.Leases)
		if f := r.real.RouteFloor(); f > 0 {
			fmt.Fprintf(&r.out, "generation high-water mark %d\n", f)
		}
		if fr := r.real.ForgettableRoutes(r.real.Clock()); len(fr) > 0 {
			fmt.Fprintf(&r.out, "forgettable %s\n", strings.Join(fr, ","))
		}
	case "fleet":
		for _, m := range r.real.Fleet() {
			line := []string{"worker " + m.Worker, "lane=" + m.Lane, "incarnation=" + strconv.FormatUint(m.Incarnation, 10)}
			if m.Parent != "" {
				line = append(line, "parent="+m.Parent)
			}
			if m.ExpiresAt != 0 {
				line = append(line, "expires="+fmtTime(m.ExpiresAt))
			}
			for _, l := range []struct {
				k string
				v []string
			}{{"tools", m.Tools}, {"classes", m.Classes}, {"targets", m.Targets}} {
				if l.v != nil {
					line = append(line, l.k+"="+strings.Join(l.v, ","))
				}
			}
			if m.Blocked {
				line = append(line, "blocked")
			}
			if m.Revoked {
				line = append(line, "revoked")
			}
			r.out.WriteString(strings.Join(line, " ") + "\n")
		}
	case "reviews":
		st := r.real.Stats()
		fmt.Fprintf(&r.out, "reviews open=%d approvals=%d\n", st.Reviews, st.Approvals)
	case "review":
		r.need(toks, 3)
		rv, ok := r.real.Review(reviewArg(toks[2]))
		if !ok {
			fmt.Fprintf(&r.out, "review %s absent\n", reviewArg(toks[2]))
			return
		}
		fmt.Fprintf(&r.out, "review %s worker=%s lane=%s tool=%s digest=%s reason=%s seq=%d until=%s\n",
			rv.ID, rv.Worker, rv.Lane, rv.Tool, rv.Digest.String()[:8], rv.Reason, rv.Seq, fmtTime(rv.Until))
	case "records":
		for _, rv := range r.real.Records() {
			line := []string{"record " + rv.Caption, "id=" + rv.ID, "status=" + rv.Status, "worker=" + rv.Worker,
				"seq=" + strconv.FormatUint(rv.Seq, 10), "until=" + fmtTime(rv.Until)}
			line = appendKV(line, "tool", rv.Tool)
			line = appendKV(line, "transition", rv.Transition)
			line = appendKV(line, "role", rv.Role)
			line = appendKV(line, "decider", rv.Decider)
			if rv.ApprovedUntil != 0 {
				line = append(line, "approved_until="+fmtTime(rv.ApprovedUntil), "approved_epoch="+strconv.FormatUint(rv.ApprovedEpoch, 10))
			}
			r.out.WriteString(strings.Join(line, " ") + "\n")
		}
		fmt.Fprintf(&r.out, "records %d open %d\n", len(r.real.Records()), len(r.real.Reviews()))
	case "preauth":
		r.need(toks, 3)
		uses, amount := r.real.PreauthUsed(toks[2], r.real.Clock())
		fmt.Fprintf(&r.out, "preauth %s uses=%d amount=%d\n", toks[2], uses, amount)
	default:
		r.fatalf("show what? %q", toks[1])
	}
}

// finalChecks replays the witness's events and round-trips the snapshot.
func (r *scriptRunner) finalChecks() {
	r.t.Helper()
	replay := fsm.New()
	for _, p := range r.witness.Outbox(0, 0) {
		e, err := events.Decode(p.Data)
		if err != nil {
			r.fatalf("final replay: %v", err)
		}
		if err := fsm.Evolve(replay, e); err != nil {
			r.fatalf("final replay: %v", err)
		}
	}
	if replay.Digest() != r.real.Digest() {
		r.fatalf("replaying the receipts gives digest %s, live state has %s", replay.Digest().Short(), r.real.Digest().Short())
	}
	snap := r.real.Snapshot()
	restored, err := fsm.Restore(snap)
	if err != nil {
		r.fatalf("restore: %v", err)
	}
	if !bytes.Equal(restored.Snapshot(), snap) || restored.Digest() != r.real.Digest() {
		r.fatalf("Restore(Snapshot()) is not the same state")
	}
}

func formatEnvelope(env grants.Envelope) string {
	f := []string{string(env.Decision)}
	f = appendKV(f, "reason", string(env.Reason))
	f = appendKV(f, "missing", env.Missing)
	f = appendKV(f, "recovery", string(env.Recovery))
	f = appendKV(f, "grant", env.GrantID)
	f = appendUint(f, "seq", env.Seq)
	if env.Kind != 0 {
		f = append(f, "kind="+env.Kind.String())
	}
	f = appendKV(f, "outcome", env.Outcome)
	f = appendKV(f, "review", env.ReviewID)
	f = appendKV(f, "caption", env.Caption)
	if env.ExpiresAt != 0 {
		f = append(f, "expires="+fmtTime(env.ExpiresAt))
	}
	f = appendKV(f, "authority", env.Authority)
	f = appendKV(f, "route", env.Route)
	f = appendUint(f, "gen", env.RouteGen)
	f = appendKV(f, "owner", env.Owner)
	if len(env.Grounds) > 0 {
		f = append(f, fmt.Sprintf("grounds=%d", len(env.Grounds)))
	}
	if env.Source != nil {
		f = append(f, "source=["+formatEnvelope(*env.Source)+"]")
	}
	return strings.Join(f, " ")
}

func formatEvent(e events.Event) string {
	if e.SourceID != "" {
		// A source registration shows its descriptor where transcripts
		// have always shown it (sources=<id>,<origins>, target=path:<p>,
		// a model_made ground), which is how events written before the
		// source fields carried it: both forms of one registration give
		// one transcript.
		id, origins, path, modelMade := e.SourceDescriptor()
		e.Sources = append([]string{id}, origins...)
		if path != "" {
			e.Target = events.SourcePathPrefix + path
		}
		if modelMade {
			e.Grounds = append(slices.Clone(e.Grounds), events.GroundModelMade)
		}
	}
	f := []string{fmt.Sprintf("#%d %s t=%s raft=%d", e.Seq, e.Kind, fmtTime(e.Time), e.RaftIndex)}
	f = appendKV(f, "grant", e.GrantID)
	f = appendKV(f, "worker", e.Worker)
	if e.Actor != e.Worker {
		f = appendKV(f, "actor", e.Actor)
	}
	f = appendKV(f, "lane", e.Lane)
	f = appendKV(f, "session", e.Session)
	f = appendKV(f, "tool", e.Tool)
	if !e.Digest.IsZero() {
		f = append(f, "digest="+e.Digest.String()[:8])
	}
	f = appendUint(f, "epoch", e.Epoch)
	f = appendKV(f, "decision", e.Decision)
	f = appendKV(f, "reason", e.Reason)
	f = appendKV(f, "missing", e.Missing)
	f = appendKV(f, "recovery", e.Recovery)
	f = appendKV(f, "key", e.IdemKey)
	f = appendKV(f, "outcome", e.Outcome)
	f = appendKV(f, "verifier", e.Verifier)
	f = appendUint(f, "ref", e.RefSeq)
	if e.ExpiresAt != 0 {
		f = append(f, "expires="+fmtTime(e.ExpiresAt))
	}
	if len(e.Counters) > 0 {
		f = append(f, "counters="+fmtCounters(e.Counters))
	}
	if e.Cancelled != nil {
		f = append(f, "cancelled="+strings.Join(e.Cancelled, ","))
	}
	if e.Sources != nil {
		f = append(f, "sources="+strings.Join(e.Sources, ","))
	}
	if e.Rules != nil {
		f = append(f, "rules="+strings.Join(e.Rules, ","))
	}
	if !e.PolicyDigest.IsZero() {
		f = append(f, "policy="+e.PolicyDigest.String()[:8])
	}
	f = appendKV(f, "review", e.ReviewID)
	f = appendKV(f, "surface", e.Surface)
	f = appendKV(f, "op", e.Operation)
	f = appendKV(f, "class", e.Consequence)
	f = appendKV(f, "target", shortTarget(e.Target))
	f = appendKV(f, "label", e.TargetLabel)
	f = appendKV(f, "cwd", e.Cwd)
	f = appendKV(f, "resolved", e.Resolved)
	f = appendKV(f, "instrument", e.Instrument)
	f = appendKV(f, "left", e.InstrumentLeft)
	f = appendUint(f, "amount", e.Amount)
	f = appendUint(f, "bytes", e.Bytes)
	f = appendKV(f, "ledger", shortTarget(e.LedgerKey))
	f = appendKV(f, "channel", e.Channel)
	f = appendKV(f, "scope", e.Scope)
	f = appendKV(f, "authority", e.Authority)
	if !e.ContentDigest.IsZero() {
		f = append(f, "content="+e.ContentDigest.String()[:8])
	}
	if e.Caption != "" {
		f = append(f, "caption="+fsm.Caption(e.Caption, e.ArtifactVersion))
	}
	f = appendKV(f, "path", e.ArtifactPath)
	if !e.ArtifactDigest.IsZero() {
		f = append(f, "artifact="+e.ArtifactDigest.String()[:8])
	}
	f = appendKV(f, "transition", e.Transition)
	f = appendKV(f, "dest", e.Destination)
	f = appendKV(f, "role", e.ReviewerRole)
	if e.ReplyText != "" {
		f = append(f, fmt.Sprintf("reply=%s/%s@%d:%q", e.ReplyChannel, e.ReplySender, e.ReplyAt, e.ReplyText))
	}
	if e.Candidates != nil {
		f = append(f, "candidates="+strings.Join(e.Candidates, ","))
	}
	f = appendKV(f, "route", e.Route)
	f = appendUint(f, "gen", e.RouteGen)
	f = appendKV(f, "prev", e.PrevOwner)
	f = appendUint(f, "prevgen", e.PrevGen)
	if e.Routes != nil {
		f = append(f, "routes="+strings.Join(e.Routes, ","))
	}
	if e.RouteStale {
		f = append(f, "route_stale")
	}
	f = appendKV(f, "parent", e.Parent)
	f = appendKV(f, "parent_lane", e.ParentLane)
	f = appendUint(f, "incarnation", e.Incarnation)
	for _, l := range []struct {
		k string
		v []string
	}{{"scope_tools", e.ScopeTools}, {"scope_classes", e.ScopeClasses}, {"scope_targets", e.ScopeTargets}, {"workers", e.Workers}, {"reviews", e.Reviews}} {
		if l.v != nil {
			f = append(f, l.k+"="+strings.Join(l.v, ","))
		}
	}
	if e.Blocked {
		f = append(f, "blocked")
	}
	f = appendKV(f, "detail", e.Detail)
	out := strings.Join(f, " ")
	for _, g := range e.Grounds {
		out += "\n    ground: " + g
	}
	return out
}

func fmtCounters(cs []events.Counter) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Key + ":" + strconv.FormatUint(c.Value, 10)
	}
	return strings.Join(parts, ",")
}

// shortTarget abbreviates the SHA-256 inside a shell target or ledger key
// to 8 hex digits.
func shortTarget(s string) string {
	if i := strings.Index(s, "sha256:"); i >= 0 && len(s) >= i+7+64 {
		return s[:i+7+8] + s[i+7+64:]
	}
	return s
}

func appendKV(f []string, k, v string) []string {
	if v == "" {
		return f
	}
	if strings.ContainsAny(v, " \"\t") {
		v = strconv.Quote(v)
	}
	return append(f, k+"="+v)
}

func appendUint(f []string, k string, v uint64) []string {
	if v == 0 {
		return f
	}
	return append(f, k+"="+strconv.FormatUint(v, 10))
}

// fmtTime prints unix nanoseconds in the largest exact unit.
func fmtTime(ns int64) string {
	switch {
	case ns%int64(time.Second) == 0:
		return strconv.FormatInt(ns/int64(time.Second), 10) + "s"
	case ns%int64(time.Millisecond) == 0:
		return strconv.FormatInt(ns/int64(time.Millisecond), 10) + "ms"
	}
	return strconv.FormatInt(ns, 10) + "ns"
}

// tokenize splits a line at spaces, keeping {...}, [...] and "..." values
// whole, and stops at a token that starts with '#'.
func tokenize(line string) []string {
	var toks []string
	var cur strings.Builder
	depth, inStr, esc := 0, false, false
	flush := func() {
		if cur.Len() > 0 {
			toks = append(toks, cur.String())
			cur.Reset()
		}
	}
	for _, ch := range line {
		switch {
		case inStr:
			cur.WriteRune(ch)
			switch {
			case esc:
				esc = false
			case ch == '\\':
				esc = true
			case ch == '"':
				inStr = false
			}
			continue
		case ch == '"':
			inStr = true
		case ch == '{' || ch == '[':
			depth++
		case ch == '}' || ch == ']':
			depth--
		case (ch == ' ' || ch == '\t') && depth <= 0:
			flush()
			continue
		case ch == '#' && depth <= 0 && cur.Len() == 0:
			return toks
		}
		cur.WriteRune(ch)
	}
	flush()
	return toks
}

// splitArgs separates positional arguments from key=value options. A
// quoted value is unquoted.
func splitArgs(toks []string) (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for _, t := range toks {
		k, v, ok := strings.Cut(t, "=")
		if !ok || strings.ContainsAny(k, "{[\"") {
			if uq, err := strconv.Unquote(t); err == nil && strings.HasPrefix(t, "\"") {
				t = uq
			}
			pos = append(pos, t)
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil && strings.HasPrefix(v, "\"") {
			v = uq
		}
		kv[k] = v
	}
	return pos, kv
}

// reviewArg reads a review argument: @<grant id> names the review of that
// grant's request.
func reviewArg(s string) string {
	if g, ok := strings.CutPrefix(s, "@"); ok {
		return fsm.ReviewID(g)
	}
	return s
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// lineDiff shows the first differing lines of two transcripts.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl == gl {
			continue
		}
		fmt.Fprintf(&b, "line %d:\n  want: %s\n   got: %s\n", i+1, wl, gl)
		if shown++; shown >= 8 {
			b.WriteString("  ...\n")
			break
		}
	}
	return b.String()
}
