package fsm

import (
	"fmt"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/policy"
)

// The raft log entry codec: a batch of commands, one version byte then
// tagged fields (testdata/batch holds a golden entry, kept forever).

// Version of the batch encoding.
const batchVersion = 1

// Limits enforced when decoding a log entry. The provenance limits are
// the request wire format's, declared once in api.
const (
	MaxBatchCommands = 4096
	MaxTraces        = api.MaxTraces        // field traces per grant request
	MaxTraceMatches  = api.MaxTraceMatches  // matches per field trace
	MaxSourceOrigins = api.MaxSourceOrigins // origins of one derived source
)

// Command field tags: append only.
const (
	ctOp       = 1
	ctCaller   = 2
	ctGrantID  = 3
	ctLane     = 4
	ctSession  = 5
	ctTool     = 6
	ctDigest   = 7
	ctIdemKey  = 8
	ctTTL      = 9
	ctSources  = 10
	ctOutcome  = 11
	ctVerifier = 12
	ctKey      = 13
	ctPolicy   = 14
	ctSeq      = 15
	// Added with version 2 policy documents.
	ctArgs        = 16 // 1 when Args.Carried
	ctArg         = 17 // one per argument value (argument tags below)
	ctTargetLabel = 18
	ctAmount      = 19
	ctHasAmount   = 20
	ctBytes       = 21
	ctCwd         = 22
	ctResolved    = 23
	// Added with provenance.
	ctSourceID      = 24
	ctChannel       = 25
	ctScope         = 26
	ctContentDigest = 27
	ctPath          = 28
	ctOrigin        = 29 // one per origin
	ctModelMade     = 30 // 1 when ModelMade
	ctTrace         = 31 // one per field trace (trace tags below)
	// Added with operator approvals.
	ctReviewID = 32
	ctNote     = 33
	// Added with receipt format levels.
	ctFormat = 34
	// Added with refusal summaries.
	ctSince = 35
	ctUntil = 36
	// Added with reviews as decision records.
	ctCaption      = 37
	ctTransition   = 38
	ctDestination  = 39
	ctReviewerRole = 40
	ctRole         = 41 // one per role the caller holds
	ctSender       = 42
	ctText         = 43
	ctReplyAt      = 44
	// Tags 45-49 are unassigned. Added with route ownership
	// leases.
	ctRoute    = 50
	ctRouteGen = 51
	// Added with break-glass cases (60-64 reserved for them).
	ctCaseID     = 60
	ctGlassScope = 61
	// Added with fleets (52-59 and 62-69 reserved for them).
	ctScopeTool   = 52 // one per tool pattern
	ctScopeClass  = 53 // one per consequence class
	ctScopeTarget = 54 // one per target pattern
	ctParentLane  = 55
	// Added with worker NATS credentials.
	ctUserKey = 66
)

// Field trace tags inside ctTrace, and match tags inside a trace's
// trMatch: append only.
const (
	trField   = 1
	trCovered = 2
	trMatch   = 3

	tmSource    = 1
	tmTransform = 2
	tmPart      = 3
	tmWhole     = 4
	// 5-6 belong to typed value matching.
	tmField      = 7 // receipt format 10: result field pointer
	tmFieldWhole = 8
)

// Argument value tags inside ctArg: append only.
const (
	atPath  = 1
	atKind  = 2
	atValue = 3
	atLen   = 4
)

// Batch field tags: append only.
const (
	btTime    = 1
	btNode    = 2
	btCommand = 3
)

// AppendEncode appends the command's canonical encoding to buf.
func (c *Command) AppendEncode(buf []byte) []byte {
	var sc encodeScratch
	return c.appendEncode(buf, &sc)
}

// encodeScratch holds the buffers a command's nested records (argument
// values, field traces and their matches) are encoded in before they are
// written as fields. Batch.Encode keeps one for all its commands.
type encodeScratch struct {
	rec, match []byte
}

// appendEncode is AppendEncode encoding nested records in sc, which it
// may grow.
func (c *Command) appendEncode(buf []byte, sc *encodeScratch) []byte {
	w := events.NewWriter(buf)
	w.Uint(ctOp, uint64(c.Op))
	w.String(ctCaller, c.Caller)
	w.String(ctGrantID, c.GrantID)
	w.String(ctLane, c.Lane)
	w.String(ctSession, c.Session)
	w.String(ctTool, c.Tool)
	w.Hash(ctDigest, c.Digest)
	w.String(ctIdemKey, c.IdemKey)
	w.Int(ctTTL, c.TTL)
	w.Strings(ctSources, c.Sources)
	w.String(ctOutcome, c.Outcome)
	w.String(ctVerifier, c.Verifier)
	w.String(ctKey, c.Key)
	w.Raw(ctPolicy, c.Policy)
	w.Uint(ctSeq, c.Seq)
	w.Bool(ctArgs, c.Args.Carried)
	for _, a := range c.Args.Leaves {
		aw := events.NewWriter(sc.rec)
		aw.String(atPath, a.Path)
		aw.Uint(atKind, uint64(a.Kind))
		aw.String(atValue, a.Value)
		aw.Uint(atLen, a.Len)
		sc.rec = aw.Bytes()
		nested(w, ctArg, sc.rec)
	}
	w.String(ctTargetLabel, c.TargetLabel)
	w.Uint(ctAmount, c.Amount)
	w.Bool(ctHasAmount, c.HasAmount)
	w.Uint(ctBytes, c.Bytes)
	w.String(ctCwd, c.Cwd)
	w.String(ctResolved, c.Resolved)
	w.String(ctSourceID, c.SourceID)
	w.String(ctChannel, c.Channel)
	w.String(ctScope, c.Scope)
	w.Hash(ctContentDigest, c.ContentDigest)
	w.String(ctPath, c.Path)
	w.Strings(ctOrigin, c.Origins)
	w.Bool(ctModelMade, c.ModelMade)
	for i := range c.Traces {
		sc.rec = appendTrace(sc.rec, &c.Traces[i], &sc.match)
		nested(w, ctTrace, sc.rec)
	}
	w.String(ctReviewID, c.ReviewID)
	w.String(ctNote, c.Note)
	w.Uint(ctFormat, c.Format)
	w.Int(ctSince, c.Since)
	w.Int(ctUntil, c.Until)
	w.String(ctCaption, c.Caption)
	w.String(ctTransition, c.Transition)
	w.String(ctDestination, c.Destination)
	w.String(ctReviewerRole, c.ReviewerRole)
	w.Strings(ctRole, c.Roles)
	w.String(ctSender, c.Sender)
	w.String(ctText, c.Text)
	w.Int(ctReplyAt, c.ReplyAt)
	w.String(ctRoute, c.Route)
	w.Uint(ctRouteGen, c.RouteGen)
	w.Strings(ctScopeTool, c.ScopeTools)
	w.Strings(ctScopeClass, c.ScopeClasses)
	w.Strings(ctScopeTarget, c.ScopeTargets)
	w.String(ctParentLane, c.ParentLane)
	w.String(ctCaseID, c.CaseID)
	w.String(ctGlassScope, c.GlassScope)
	w.String(ctUserKey, c.UserKey)
	return w.Bytes()
}

// nested writes one element of a repeated field holding a nested record:
// the bytes as Raw writes them, and an empty record as an empty element
// (which Raw would drop, and Strings keeps).
func nested(w *events.Writer, tag uint32, rec []byte) {
	if len(rec) == 0 {
		w.Strings(tag, []string{""})
		return
	}
	w.Raw(tag, rec)
}

// appendTrace writes t's encoding to buf[:0], each match encoded in
// *scratch (which it may grow) first.
func appendTrace(buf []byte, t *Trace, scratch *[]byte) []byte {
	tw := events.NewWriter(buf)
	tw.String(trField, t.Field)
	tw.Bool(trCovered, t.Covered)
	for _, m := range t.Matches {
		mw := events.NewWriter(*scratch)
		mw.String(tmSource, m.Source)
		mw.String(tmTransform, m.Transform)
		mw.String(tmPart, m.Part)
		mw.Bool(tmWhole, m.Whole)
		mw.String(tmField, m.Field)
		mw.Bool(tmFieldWhole, m.FieldWhole)
		*scratch = mw.Bytes()
		nested(tw, trMatch, *scratch)
	}
	return tw.Bytes()
}

// DecodeCommand parses one command.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if err := decodeCommand(b, &c, nil); err != nil {
		return Command{}, err
	}
	return c, nil
}

// decodeCommand is DecodeCommand into *c (a command is over half a
// kilobyte: DecodeBatch decodes in place rather than copying each one
// twice), sharing repeated strings through strs (nil: none). On error *c
// is partly filled.
func decodeCommand(b []byte, c *Command, strs *strCache) error {
	r := events.NewReader(b)
	var f events.Field
	for r.Next(&f) {
		ok := true
		switch f.Tag {
		case ctOp:
			if ok = r.Expect(&f, events.WireVarint); ok {
				if f.Uint > 255 {
					r.Failf("op %d out of range", f.Uint)
					ok = false
				}
				c.Op = Op(f.Uint)
			}
		case ctCaller:
			ok = strs.str(r, &f, &c.Caller)
		case ctGrantID:
			ok = str(r, &f, &c.GrantID)
		case ctLane:
			ok = strs.str(r, &f, &c.Lane)
		case ctSession:
			ok = strs.str(r, &f, &c.Session)
		case ctTool:
			ok = strs.str(r, &f, &c.Tool)
		case ctDigest:
			ok = hash(r, &f, &c.Digest)
		case ctIdemKey:
			ok = str(r, &f, &c.IdemKey)
		case ctTTL:
			if ok = r.Expect(&f, events.WireVarint); ok {
				c.TTL = f.Int()
			}
		case ctSources:
			var s string
			if ok = strs.str(r, &f, &s); ok {
				c.Sources = append(c.Sources, s)
			}
		case ctOutcome:
			ok = strs.str(r, &f, &c.Outcome)
		case ctVerifier:
			ok = strs.str(r, &f, &c.Verifier)
		case ctKey:
			ok = strs.str(r, &f, &c.Key)
		case ctPolicy:
			if ok = r.Expect(&f, events.WireBytes); ok {
				c.Policy = append([]byte(nil), f.Data...)
			}
		case ctSeq:
			if ok = r.Expect(&f, events.WireVarint); ok {
				c.Seq = f.Uint
			}
		case ctArgs:
			if ok = r.Expect(&f, events.WireVarint); ok {
				if f.Uint != 1 {
					r.Failf("args flag %d", f.Uint)
					ok = false
				}
				c.Args.Carried = true
			}
		case ctArg:
			if ok = r.Expect(&f, events.WireBytes); ok {
				if c.Args.Leaves == nil {
					c.Args.Leaves = make([]policy.Arg, 0, repeats(r, ctArg, policy.MaxArgLeaves))
				}
				ok = decodeArg(r, &f, &c.Args, strs)
			}
		case ctTargetLabel:
			ok = strs.str(r, &f, &c.TargetLabel)
		case ctAmount:
			if ok = r.Expect(&f, events.WireVarint); ok {
				c.Amount = f.Uint
			}
		case ctHasAmount:
			if ok = r.Expect(&f, events.WireVarint); ok {
				if f.Uint != 1 {
					r.Failf("has_amount flag %d", f.Uint)
					ok = false
				}
				c.HasAmount = true
			}
		case ctBytes:
			if ok = r.Expect(&f, events.WireVarint); ok {
				c.Bytes = f.Uint
			}
		case ctCwd:
			ok = strs.str(r, &f, &c.Cwd)
		case ctResolved:
			ok = str(r, &f, &c.Resolved)
		case ctSourceID:
			ok = str(r, &f, &c.SourceID)
		case ctChannel:
			ok = strs.str(r, &f, &c.Channel)
		case ctScope:
			ok = strs.str(r, &f, &c.Scope)
		case ctContentDigest:
			ok = hash(r, &f, &c.ContentDigest)
		case ctPath:
			ok = str(r, &f, &c.Path)
		case ctOrigin:
			if len(c.Origins) >= MaxSourceOrigins {
				r.Failf("more than %d origins", MaxSourceOrigins)
				ok = false
				break
			}
			var s string
			if ok = strs.str(r, &f, &s); ok {
				c.Origins = append(c.Origins, s)
			}
		case ctModelMade:
			if ok = r.Expect(&f, events.WireVarint); ok {
				if f.Uint != 1 {
					r.Failf("model_made flag %d", f.Uint)
					ok = false
				}
				c.ModelMade = true
			}
		case ctTrace:
			if len(c.Traces) >= MaxTraces {
				r.Failf("more than %d field traces", MaxTraces)
				ok = false
				break
			}
			if ok = r.Expect(&f, events.WireBytes); ok {
				if c.Traces == nil {
					c.Traces = make([]Trace, 0, repeats(r, ctTrace, MaxTraces))
				}
				var t Trace
				if ok = decodeTrace(r, f.Data, &t, strs); ok {
					c.Traces = append(c.Traces, t)
				}
			}
		case ctReviewID:
			ok = str(r, &f, &c.ReviewID)
		case ctNote:
			ok = str(r, &f, &c.Note)
		case ctFormat:
			if ok = r.Expect(&f, events.WireVarint); ok {
				c.Format = f.Uint
			}
		case ctSince:
			if ok = r.Expect(&f, events.WireVarint); ok {
				c.Since = f.Int()
			}
		case ctUntil:
			if ok = r.Expect(&f, events.WireVarint); ok {
				c.Until = f.Int()
			}
		case ctCaption:
			ok = str(r, &f, &c.Caption)
		case ctTransition:
			ok = str(r, &f, &c.Transition)
		case ctDestination:
			ok = str(r, &f, &c.Destination)
		case ctReviewerRole:
			ok = str(r, &f, &c.ReviewerRole)
		case ctRole:
			if len(c.Roles) >= MaxReviewerRoles {
				r.Failf("more than %d reviewer roles", MaxReviewerRoles)
				ok = false
				break
			}
			var s string
			if ok = str(r, &f, &s); ok {
				c.Roles = append(c.Roles, s)
			}
		case ctSender:
			ok = str(r, &f, &c.Sender)
		case ctText:
			ok = str(r, &f, &c.Text)
		case ctReplyAt:
			if ok = r.Expect(&f, events.WireVarint); ok {
				c.ReplyAt = f.Int()
			}
		case ctRoute:
			ok = strs.str(r, &f, &c.Route)
		case ctRouteGen:
			if ok = r.Expect(&f, events.WireVarint); ok {
				c.RouteGen = f.Uint
			}
		case ctScopeTool, ctScopeClass, ctScopeTarget:
			dst := &c.ScopeTools
			switch f.Tag {
			case ctScopeClass:
				dst = &c.ScopeClasses
			case ctScopeTarget:
				dst = &c.ScopeTargets
			}
			if len(*dst) >= MaxSpawnScope {
				r.Failf("more than %d spawn scope entries", MaxSpawnScope)
				ok = false
				break
			}
			var s string
			if ok = str(r, &f, &s); ok {
				*dst = append(*dst, s)
			}
		case ctParentLane:
			ok = str(r, &f, &c.ParentLane)
		case ctUserKey:
			ok = str(r, &f, &c.UserKey)
		case ctCaseID:
			ok = str(r, &f, &c.CaseID)
		case ctGlassScope:
			ok = str(r, &f, &c.GlassScope)
		}
		if !ok {
			break
		}
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("%w: command: %v", ErrBadEntry, err)
	}
	return nil
}

// Encode returns the canonical encoding of a batch: one version byte then
// tagged fields.
func (b *Batch) Encode() []byte {
	buf := make([]byte, 0, 64+len(b.Commands)*128)
	w := events.NewWriter(buf)
	w.Byte(batchVersion)
	w.Int(btTime, b.Time)
	w.String(btNode, b.Node)
	scratch := make([]byte, 0, 512) // most commands fit: one allocation
	var sc encodeScratch
	for i := range b.Commands {
		scratch = b.Commands[i].appendEncode(scratch[:0], &sc)
		// An all-zero command encodes empty, and is kept as an empty
		// element.
		nested(w, btCommand, scratch)
	}
	return w.Bytes()
}

// DecodeBatch parses a log entry. Malformed entries return ErrBadEntry and
// are answered as invalid by the adapter; they never change state.
func DecodeBatch(data []byte) (Batch, error) {
	var b Batch
	if len(data) == 0 {
		return b, fmt.Errorf("%w: empty entry", ErrBadEntry)
	}
	if data[0] != batchVersion {
		return b, fmt.Errorf("%w: batch version %d (this build reads %d)", ErrBadEntry, data[0], batchVersion)
	}
	// Count the commands first so the slice is allocated once: Command
	// is large, and growing by doubling copies it several times.
	n, r := 0, events.NewReader(data[1:])
	var f events.Field
	for r.Next(&f) {
		if f.Tag == btCommand {
			n++
		}
	}
	if n > 0 {
		b.Commands = make([]Command, 0, min(n, MaxBatchCommands))
	}
	// One cache for the entry: its commands repeat callers, lanes, tools.
	strs := new(strCache)
	r = events.NewReader(data[1:])
	for r.Next(&f) {
		switch f.Tag {
		case btTime:
			if r.Expect(&f, events.WireVarint) {
				b.Time = f.Int()
			}
		case btNode:
			strs.str(r, &f, &b.Node)
		case btCommand:
			if !r.Expect(&f, events.WireBytes) {
				break
			}
			if len(b.Commands) >= MaxBatchCommands {
				r.Failf("more than %d commands", MaxBatchCommands)
				break
			}
			if i := len(b.Commands); i < cap(b.Commands) {
				b.Commands = b.Commands[:i+1] // counted above; make zeroed it
			} else {
				b.Commands = append(b.Commands, Command{})
			}
			if err := decodeCommand(f.Data, &b.Commands[len(b.Commands)-1], strs); err != nil {
				return Batch{}, err
			}
		}
	}
	if err := r.Err(); err != nil {
		return Batch{}, fmt.Errorf("%w: %v", ErrBadEntry, err)
	}
	return b, nil
}

// decodeArg decodes one argument value into args. Values need the carried
// flag before them, a known kind, and stay within policy.MaxArgLeaves.
func decodeArg(r *events.Reader, f *events.Field, args *policy.Args, strs *strCache) bool {
	if !args.Carried {
		r.Failf("argument value without the args flag")
		return false
	}
	if len(args.Leaves) >= policy.MaxArgLeaves {
		r.Failf("more than %d argument values", policy.MaxArgLeaves)
		return false
	}
	var a policy.Arg
	ar := events.NewReader(f.Data)
	var af events.Field
	for ar.Next(&af) {
		switch af.Tag {
		case atPath:
			strs.str(ar, &af, &a.Path)
		case atKind:
			if ar.Expect(&af, events.WireVarint) {
				if af.Uint < uint64(policy.ArgString) || af.Uint > uint64(policy.ArgElided) {
					ar.Failf("argument kind %d", af.Uint)
				}
				a.Kind = policy.ArgKind(af.Uint)
			}
		case atValue:
			str(ar, &af, &a.Value)
		case atLen:
			if ar.Expect(&af, events.WireVarint) {
				a.Len = af.Uint
			}
		default:
			ar.Failf("unknown argument tag %d", af.Tag)
		}
	}
	if err := ar.Err(); err != nil {
		r.Failf("argument: %v", err)
		return false
	}
	if a.Kind == 0 {
		r.Failf("argument without a kind")
		return false
	}
	args.Leaves = append(args.Leaves, a)
	return true
}

// decodeTrace decodes one field trace: known tags only, at most
// MaxTraceMatches matches, each a nested record of known tags.
func decodeTrace(r *events.Reader, data []byte, t *Trace, strs *strCache) bool {
	tr := events.NewReader(data)
	var tf events.Field
	for tr.Next(&tf) {
		switch tf.Tag {
		case trField:
			strs.str(tr, &tf, &t.Field)
		case trCovered:
			if tr.Expect(&tf, events.WireVarint) {
				if tf.Uint != 1 {
					tr.Failf("covered flag %d", tf.Uint)
				}
				t.Covered = true
			}
		case trMatch:
			if !tr.Expect(&tf, events.WireBytes) {
				break
			}
			if len(t.Matches) >= MaxTraceMatches {
				tr.Failf("more than %d matches in one trace", MaxTraceMatches)
				break
			}
			if t.Matches == nil {
				t.Matches = make([]TraceMatch, 0, repeats(tr, trMatch, MaxTraceMatches))
			}
			var m TraceMatch
			mr := events.NewReader(tf.Data)
			var mf events.Field
			for mr.Next(&mf) {
				switch mf.Tag {
				case tmSource:
					strs.str(mr, &mf, &m.Source)
				case tmTransform:
					strs.str(mr, &mf, &m.Transform)
				case tmPart:
					strs.str(mr, &mf, &m.Part)
				case tmWhole:
					if mr.Expect(&mf, events.WireVarint) {
						if mf.Uint != 1 {
							mr.Failf("whole must be 1 when present")
						}
						m.Whole = true
					}
				case tmField:
					strs.str(mr, &mf, &m.Field)
				case tmFieldWhole:
					if mr.Expect(&mf, events.WireVarint) {
						if mf.Uint != 1 {
							mr.Failf("field_whole must be 1 when present")
						}
						m.FieldWhole = true
					}
				default:
					mr.Failf("unknown match tag %d", mf.Tag)
				}
			}
			if err := mr.Err(); err != nil {
				tr.Failf("match: %v", err)
				break
			}
			t.Matches = append(t.Matches, m)
		default:
			tr.Failf("unknown trace tag %d", tf.Tag)
		}
	}
	if err := tr.Err(); err != nil {
		r.Failf("trace: %v", err)
		return false
	}
	return true
}

// repeats counts the fields tagged tag that r holds next, plus one for the
// field just read, up to limit: how many elements a repeated field has
// (within its limit), so that its slice is allocated once. It reads a copy
// of r, which it leaves as it was; the count stops at the first field with
// another tag or at an error (which r reports when it gets there).
func repeats(r *events.Reader, tag uint32, limit int) int {
	rr := *r
	n := 1
	var f events.Field
	for n < limit && rr.Next(&f) && f.Tag == tag {
		n++
	}
	return n
}

// strCacheMaxLen is the longest string a strCache shares.
const strCacheMaxLen = 64

// strCache shares the decoded copy of a short string that repeats within
// one log entry: a caller, a lane, a tool, a session, a source id, an
// argument path. It is direct-mapped: a string takes the slot its bytes
// hash to, replacing whatever was there. Each string it hands out is an
// allocation of its own, never a slice of a larger buffer, so a string the
// state keeps pins nothing else; and sharing one between commands is
// invisible, strings being immutable. A nil *strCache shares nothing. It
// is laid out as the interner's recent cache and uses its slot function.
// Ids and keys that are unique per command are not worth a slot and are
// decoded with str.
type strCache struct {
	slots [64]string // indexed by recentSlot
}

// str is the package's str, sharing the string through sc.
func (sc *strCache) str(r *events.Reader, f *events.Field, dst *string) bool {
	if !r.Expect(f, events.WireBytes) {
		return false
	}
	*dst = sc.get(f.Data)
	return true
}

// get returns a string equal to b: the cached copy if there is one, else
// a new one, which it caches.
func (sc *strCache) get(b []byte) string {
	if sc == nil || len(b) == 0 || len(b) > strCacheMaxLen {
		return string(b)
	}
	slot := &sc.slots[recentSlot(b)]
	if *slot == string(b) { // compared without a conversion
		return *slot
	}
	*slot = string(b)
	return *slot
}

// str decodes a string field into *dst: a copy of its bytes, never an
// alias of the input.
func str(r *events.Reader, f *events.Field, dst *string) bool {
	if !r.Expect(f, events.WireBytes) {
		return false
	}
	*dst = string(f.Data)
	return true
}

func hash(r *events.Reader, f *events.Field, dst *events.Hash) bool {
	if !r.Expect(f, events.WireBytes) {
		return false
	}
	h, err := events.HashFromBytes(f.Data)
	if err != nil {
		r.Failf("%v", err)
		return false
	}
	*dst = h
	return true
}
