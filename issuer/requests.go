package issuer

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/revocation"
)

// Limits on request fields.
const (
	maxKeyLen     = 128
	maxSources    = 64
	maxVerifier   = 128
	maxToolLen    = 256
	maxSessionLen = 128
	maxLabelLen   = 256
	maxPathLen    = 1024
)

// requestError is a refusal decided before anything is proposed: the
// request never reaches the log and changes nothing.
type requestError struct {
	reason  grants.Reason
	missing string
	detail  string
}

func (e *requestError) Error() string { return string(e.reason) + ": " + e.detail }

func (e *requestError) envelope() grants.Envelope {
	return grants.Refuse(e.reason, e.missing, e.detail)
}

func invalid(field, format string, args ...any) *requestError {
	return &requestError{reason: grants.ReasonInvalidRequest, missing: field, detail: field + ": " + fmt.Sprintf(format, args...)}
}

// decodeStrict decodes one JSON object, rejecting unknown fields, trailing
// data, oversize bodies and any version but api.Version.
//
// A well-formed body is parsed once: one strict decode, then the version
// it carried. Anything else (a decode error, trailing bytes, a missing or
// other version) is judged again from scratch by decodeStrictSlow, the
// version probe first, so a refusal and its message are exactly those of
// probing the version before decoding strictly. The single pass accepts
// exactly what the two passes accept: a strict decode that succeeds with
// only whitespace after the object has read a syntactically valid
// document, from which the probe would have read the same version.
func decodeStrict(data []byte, v any) *requestError {
	if len(data) > api.MaxBodyBytes {
		return &requestError{reason: grants.ReasonRequestTooLarge, missing: "body", detail: fmt.Sprintf("body is %d bytes; the limit is %d", len(data), api.MaxBodyBytes)}
	}
	if version, ok := bodyVersion(v); ok {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if dec.Decode(v) == nil && onlySpace(data[dec.InputOffset():]) && *version == api.Version {
			return refuseDuplicate(data, v)
		}
		// Start over from the zero value, as the two passes would.
		reflect.ValueOf(v).Elem().SetZero()
	}
	return decodeStrictSlow(data, v)
}

// bodyVersion returns where a request body type keeps its version field,
// for the single-pass decode; ok is false for any other type.
func bodyVersion(v any) (version *int, ok bool) {
	switch r := v.(type) {
	case *api.GrantRequest:
		return &r.V, true
	case *api.SpendRequest:
		return &r.V, true
	case *api.EffectRequest:
		return &r.V, true
	case *api.SourceRequest:
		return &r.V, true
	case *effectSourceBody:
		return &r.V, true
	case *api.RevokeRequest:
		return &r.V, true
	case *api.ReinstateRequest:
		return &r.V, true
	case *api.PolicyRequest:
		return &r.V, true
	case *api.PolicyShowRequest:
		return &r.V, true
	case *api.ApproveRequest:
		return &r.V, true
	case *api.ReviewsRequest:
		return &r.V, true
	case *api.PolicyTestRequest:
		return &r.V, true
	}
	return nil, false
}

// onlySpace reports whether b holds nothing but JSON whitespace.
func onlySpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// decodeStrictSlow probes the version with a lenient decode and then
// decodes strictly: the reference behaviour, and the path every refused
// body takes.
func decodeStrictSlow(data []byte, v any) *requestError {
	var probe struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return invalid("body", "not a JSON object: %v", err)
	}
	if probe.V == nil {
		return invalid("v", "missing; this issuer speaks version %d", api.Version)
	}
	if *probe.V != api.Version {
		return &requestError{reason: grants.ReasonUnknownVersion, missing: "v", detail: fmt.Sprintf("version %d is not supported; this issuer speaks version %d", *probe.V, api.Version)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("body", "%v", err)
	}
	if dec.More() {
		return invalid("body", "trailing data after the JSON object")
	}
	return refuseDuplicate(data, v)
}

// refuseDuplicate refuses data, already decoded into v, when its object
// names a field twice, and then leaves v zero.
func refuseDuplicate(data []byte, v any) *requestError {
	if k, dup := duplicateKey(data); dup {
		reflect.ValueOf(v).Elem().SetZero()
		return invalid(k, "given twice; a request names each field once")
	}
	return nil
}

// duplicateKey reports a key the top-level object of data holds twice.
// encoding/json keeps the last of two equal keys (and matches keys without
// regard to case), so a body could carry one value for a reader that keeps
// the first and another for the issuer; such a body is refused. data has
// already decoded as one object.
func duplicateKey(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	seen := make(map[string]bool, 16)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		k, _ := t.(string)
		folded := strings.ToLower(k)
		if seen[folded] {
			return k, true
		}
		seen[folded] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

// isObject reports whether the JSON value raw is an object.
func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

func checkID(field, v string, required bool) *requestError {
	if v == "" && !required {
		return nil
	}
	if err := api.ValidID(v); err != nil {
		return invalid(field, "%v", err)
	}
	return nil
}

func checkText(field, v string, max int, required bool) *requestError {
	if v == "" {
		if required {
			return invalid(field, "required")
		}
		return nil
	}
	if len(v) > max {
		return invalid(field, "longer than %d bytes", max)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return invalid(field, "contains control characters")
		}
	}
	return nil
}

// grantCommand builds an OpRequest from a worker's body. The worker id comes
// from the subject; the grant id is chosen here, by the leader. The body is
// decoded by api.DecodeGrantFast when it has the shape api/client sends,
// and by decodeStrict otherwise (and for every refusal); api's fast
// decoders accept only bodies decodeStrict accepts, and decode them alike.
func grantCommand(worker string, data []byte) (fsm.Command, *requestError) {
	var r api.GrantRequest
	if !api.DecodeGrantFast(data, &r) {
		// A second variable: &slow escapes to the heap, but only on this
		// path.
		var slow api.GrantRequest
		if err := decodeStrict(data, &slow); err != nil {
			return fsm.Command{}, err
		}
		r = slow
	}
	return grantRequestCommand(worker, &r)
}

// grantRequestCommand checks a decoded grant request and builds its
// command.
func grantRequestCommand(worker string, r *api.GrantRequest) (fsm.Command, *requestError) {
	for _, e := range []*requestError{
		checkID("lane", r.Lane, true),
		checkText("session", r.Session, maxSessionLen, false),
		checkText("tool", r.Tool, maxToolLen, true),
		checkText("idempotency_key", r.IdempotencyKey, maxKeyLen, true),
	} {
		if e != nil {
			return fsm.Command{}, e
		}
	}
	if len(r.Args) == 0 {
		return fsm.Command{}, invalid("args", "required (use {} for a call without arguments)")
	}
	if !isObject(r.Args) {
		return fsm.Command{}, invalid("args", "must be a JSON object of the tool's arguments (use {} for a call without arguments)")
	}
	// Canonicalise once: the digest binds the canonical form, and the
	// engine's view is flattened from it (args.Flatten of a canonical
	// document is args.Flatten of the document, and it recognises the
	// canonical form in one scan).
	canon, err := args.CanonicalJSON(r.Args)
	if err != nil {
		return fsm.Command{}, invalid("args", "%v", err)
	}
	digest := args.RequestDigest(r.Tool, canon)
	flat, rerr := flatten(canon)
	if rerr != nil {
		return fsm.Command{}, rerr
	}
	for _, e := range []*requestError{
		checkText("target_label", r.TargetLabel, maxLabelLen, false),
		checkPath("cwd", r.Cwd),
		checkPath("resolved_target", r.ResolvedTarget),
	} {
		if e != nil {
			return fsm.Command{}, e
		}
	}
	// Compare in milliseconds: multiplying first would overflow for huge
	// values and turn them negative.
	if r.TTLMillis < 0 || r.TTLMillis > policy.MaxTTL.Milliseconds() {
		return fsm.Command{}, invalid("ttl_ms", "must be between 0 and %d", policy.MaxTTL.Milliseconds())
	}
	if len(r.Sources) > maxSources {
		return fsm.Command{}, invalid("sources", "at most %d", maxSources)
	}
	for _, s := range r.Sources {
		if e := checkID("sources", s, true); e != nil {
			return fsm.Command{}, e
		}
	}
	traces, rerr := traceCommand(r.Provenance)
	if rerr != nil {
		return fsm.Command{}, rerr
	}
	c := fsm.Command{
		Op: fsm.OpRequest, Caller: worker, GrantID: uuid.NewString(), Lane: r.Lane,
		Session: r.Session, Tool: r.Tool, Digest: digest, IdemKey: r.IdempotencyKey,
		TTL: r.TTLMillis * int64(time.Millisecond), Sources: r.Sources,
		Args: flat, TargetLabel: r.TargetLabel, Bytes: r.Bytes, Cwd: r.Cwd, Resolved: r.ResolvedTarget,
		Traces: traces, Route: r.Route, RouteGen: r.RouteGen,
	}
	switch {
	case r.Route != "":
		if err := policy.CheckRouteName(r.Route); err != nil {
			return fsm.Command{}, invalid("route", "%v", err)
		}
	case r.RouteGen != 0:
		return fsm.Command{}, invalid("route_gen", "a route generation without a route")
	}
	if r.Amount != nil {
		c.Amount, c.HasAmount = *r.Amount, true
	}
	if r.Review != "" || r.ArtifactSHA256 != "" {
		// A call an artifact review approves: the review and the
		// artifact's digest as it is now.
		if !api.ValidReviewID(r.Review) {
			if _, _, _, ok := api.ParseReviewRef(r.Review); !ok {
				return fsm.Command{}, invalid("review", "want a review id, caption (<slug>_v<N>_review) or keep token (<slug>_v<N>_keep)")
			}
		}
		sum, err := hex.DecodeString(r.ArtifactSHA256)
		if err != nil || len(sum) != len(events.Hash{}) || events.Hash(sum).IsZero() {
			return fsm.Command{}, invalid("artifact_sha256", "with review, the artifact's SHA-256 as it is now (64 hex digits)")
		}
		c.ReviewID, c.ContentDigest = r.Review, events.Hash(sum)
	}
	return c, nil
}

// traceCommand checks a grant request's field traces and converts them for
// the state machine: at most api.MaxTraces, one per field, each field a
// JSON pointer ("/to", "/payment/iban") of at most maxPathLen bytes, at
// most api.MaxTraceMatches matches naming valid source ids, a known
// transform and URL part. The state machine checks the same again.
func traceCommand(in []api.FieldTrace) ([]fsm.Trace, *requestError) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > api.MaxTraces {
		return nil, invalid("provenance", "at most %d field traces", api.MaxTraces)
	}
	out := make([]fsm.Trace, 0, len(in))
	for i, t := range in {
		field := fmt.Sprintf("provenance[%d].field", i)
		if e := checkText(field, t.Field, maxPathLen, true); e != nil {
			return nil, e
		}
		if !strings.HasPrefix(t.Field, "/") {
			return nil, invalid(field, "must be a JSON pointer to an argument leaf (\"/to\", \"/payment/iban\")")
		}
		if len(t.Matches) > api.MaxTraceMatches {
			return nil, invalid(fmt.Sprintf("provenance[%d].matches", i), "at most %d matches", api.MaxTraceMatches)
		}
		ft := fsm.Trace{Field: t.Field, Covered: t.Covered}
		for j, m := range t.Matches {
			if e := checkID(fmt.Sprintf("provenance[%d].matches[%d].source", i, j), m.Source, true); e != nil {
				return nil, e
			}
			ft.Matches = append(ft.Matches, fsm.TraceMatch{Source: m.Source, Transform: m.Transform, Part: m.Part, Whole: m.Whole,
				Field: m.Field, FieldWhole: m.FieldWhole})
		}
		out = append(out, ft)
	}
	if field, detail := fsm.CheckTraces(out); field != "" {
		return nil, invalid(field, "%s", detail)
	}
	return out, nil
}

// stripResultFields drops the result fields of traces, for a cluster
// below receipt format 10 (fsm.ReceiptFormatResultFields): a voter of an
// earlier build could not decode them, and the state machine would not
// read them anyway.
func stripResultFields(traces []fsm.Trace) {
	for i := range traces {
		for j := range traces[i].Matches {
			traces[i].Matches[j].Field, traces[i].Matches[j].FieldWhole = "", false
		}
	}
}

// sourceCommand builds an OpSource from a worker's source registration:
// a descriptor, never content. The owner is the worker the subject names;
// an omitted scope is the narrowest, task.
func sourceCommand(worker string, data []byte) (fsm.Command, *requestError) {
	var r api.SourceRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	return sourceRequestCommand(worker, &r)
}

// sourceRequestCommand checks a decoded source registration and builds its
// command.
func sourceRequestCommand(worker string, r *api.SourceRequest) (fsm.Command, *requestError) {
	for _, e := range []*requestError{
		checkID("id", r.ID, true),
		checkText("session", r.Session, maxSessionLen, false),
		checkText("channel", r.Channel, maxToolLen, true),
		checkText("tool", r.Tool, maxToolLen, false),
		checkSourcePath(r.Channel, r.Path),
	} {
		if e != nil {
			return fsm.Command{}, e
		}
	}
	if r.ContentDigest == "" {
		return fsm.Command{}, invalid("content_digest", "required: the hex SHA-256 of the content")
	}
	digest, err := events.ParseHash(r.ContentDigest)
	if err != nil {
		return fsm.Command{}, invalid("content_digest", "%v", err)
	}
	if len(r.Origins) > api.MaxSourceOrigins {
		return fsm.Command{}, invalid("origins", "at most %d", api.MaxSourceOrigins)
	}
	for _, o := range r.Origins {
		if e := checkID("origins", o, true); e != nil {
			return fsm.Command{}, e
		}
	}
	scope := r.Scope
	if scope == "" {
		scope = "task"
	}
	c := fsm.Command{
		Op: fsm.OpSource, Caller: worker, SourceID: r.ID, Session: r.Session, Channel: r.Channel,
		Scope: scope, ContentDigest: digest, Path: r.Path, Tool: r.Tool, Origins: r.Origins, ModelMade: r.ModelMade,
	}
	if field, detail := fsm.CheckSource(c); field != "" {
		return fsm.Command{}, invalid(field, "%s", detail)
	}
	return c, nil
}

// flatten forwards a call's arguments to the state machine as the policy
// engine reads them (args.Flatten: canonical, one entry per scalar,
// long strings as length and digest). This is a pure function of the
// arguments, independent of the policy in force, so which fields are the
// target, sinks and amount is decided inside the state machine, under the
// policy the request is judged by.
func flatten(raw []byte) (args.Flat, *requestError) {
	a, err := args.Flatten(raw)
	if err != nil {
		if errors.Is(err, args.ErrTooLarge) {
			return args.Flat{}, &requestError{reason: grants.ReasonRequestTooLarge, missing: "args",
				detail: "args: " + argsTooLarge(raw, err)}
		}
		return args.Flat{}, invalid("args", "%v", err)
	}
	return a, nil
}

// argsTooLarge states how arguments exceed the bounds of args.Flatten with
// the real numbers: how many scalar values there are (args.MaxLeaves) or
// how long the longest field path is (args.MaxPath). It walks the
// arguments as args.Flatten does, on this refusal path only.
func argsTooLarge(raw []byte, err error) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var values, longest int
	var walk func(pathLen int) bool
	walk = func(pathLen int) bool {
		longest = max(longest, pathLen)
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		d, ok := tok.(json.Delim)
		if !ok {
			values++
			return true
		}
		for i := 0; dec.More(); i++ {
			n := len(strconv.Itoa(i))
			if d == '{' {
				kt, err := dec.Token()
				k, _ := kt.(string)
				if err != nil {
					return false
				}
				n = len(k) + strings.Count(k, "~") + strings.Count(k, "/") // JSON pointer escapes
			}
			if !walk(pathLen + 1 + n) {
				return false
			}
		}
		_, err = dec.Token()
		return err == nil
	}
	walk(0)
	switch {
	case values > args.MaxLeaves:
		return fmt.Sprintf("%d values; the limit is %d values per call", values, args.MaxLeaves)
	case longest > args.MaxPath:
		return fmt.Sprintf("a field path is %d bytes long; the limit is %d bytes", longest, args.MaxPath)
	}
	msg := err.Error() // not expected: Flatten's words, without its stacked prefixes
	if i := strings.LastIndex(msg, args.ErrTooLarge.Error()+": "); i >= 0 {
		msg = msg[i+len(args.ErrTooLarge.Error())+2:]
	}
	return msg
}

// checkPath checks an optional absolute path of the resolution context.
// checkSourcePath checks a source's path: an absolute path, or for a tool
// result the canonical resource it came from (url:, email:, raw: or
// digest:, as a surface's result_from target gives it; see
// policy.ResourcePath).
func checkSourcePath(channel, v string) *requestError {
	if channel == authority.ChannelToolResult {
		for _, m := range []string{policy.CanonURL, policy.CanonEmail, policy.CanonRaw, policy.CanonDigest} {
			if strings.HasPrefix(v, m+":") {
				return checkText("path", v, maxPathLen, false)
			}
		}
	}
	return checkPath("path", v)
}

func checkPath(field, v string) *requestError {
	if v == "" {
		return nil
	}
	if e := checkText(field, v, maxPathLen, false); e != nil {
		return e
	}
	if !strings.HasPrefix(v, "/") {
		return invalid(field, "must be an absolute path")
	}
	return nil
}

// spendCommand builds an OpSpend. When the body carries args rather than a
// digest, it returns their canonical form: the digest binds the tool too,
// and only the grant knows the tool, so the service completes the digest
// from the grant it has applied (see bindSpend).
func spendCommand(worker string, data []byte) (fsm.Command, []byte, *requestError) {
	var r api.SpendRequest
	if !api.DecodeSpendFast(data, &r) {
		// A second variable: &slow escapes to the heap, but only on this
		// path.
		var slow api.SpendRequest
		if err := decodeStrict(data, &slow); err != nil {
			return fsm.Command{}, nil, err
		}
		r = slow
	}
	return spendRequestCommand(worker, &r)
}

// spendRequestCommand checks a decoded spend request and builds its
// command, as spendCommand describes.
func spendRequestCommand(worker string, r *api.SpendRequest) (fsm.Command, []byte, *requestError) {
	if e := checkText("grant_id", r.GrantID, 64, true); e != nil {
		return fsm.Command{}, nil, e
	}
	if e := checkText("idempotency_key", r.IdempotencyKey, maxKeyLen, true); e != nil {
		return fsm.Command{}, nil, e
	}
	for _, e := range []*requestError{checkPath("cwd", r.Cwd), checkPath("resolved_target", r.ResolvedTarget)} {
		if e != nil {
			return fsm.Command{}, nil, e
		}
	}
	c := fsm.Command{Op: fsm.OpSpend, Caller: worker, GrantID: r.GrantID, IdemKey: r.IdempotencyKey,
		Cwd: r.Cwd, Resolved: r.ResolvedTarget}
	switch {
	case len(r.Args) > 0 && r.Digest != "":
		return c, nil, invalid("args", "give args or digest, not both")
	case r.Digest != "" && (r.Cwd != "" || r.ResolvedTarget != ""):
		return c, nil, invalid("args", "a spend that names a resolution context must carry the call's args, so the target can be re-derived")
	case r.Digest != "":
		h, err := events.ParseHash(r.Digest)
		if err != nil {
			return c, nil, invalid("digest", "%v", err)
		}
		c.Digest = h
		return c, nil, nil
	case len(r.Args) > 0:
		if !isObject(r.Args) {
			return c, nil, invalid("args", "must be the JSON object of the call's arguments")
		}
		canon, err := args.CanonicalJSON(r.Args)
		if err != nil {
			return c, nil, invalid("args", "%v", err)
		}
		var rerr *requestError
		if c.Args, rerr = flatten(canon); rerr != nil {
			return c, nil, rerr
		}
		return c, canon, nil
	case r.Cwd != "" || r.ResolvedTarget != "":
		return c, nil, invalid("args", "a spend that names a resolution context must carry the call's args, so the target can be re-derived")
	}
	return c, nil, invalid("args", "give the call's args (or their digest) so the spend binds the exact request")
}

// effectCommand builds an OpEffect from a worker's report of what a spend
// did.
func effectCommand(worker string, data []byte) (fsm.Command, *requestError) {
	var r api.EffectRequest
	if !api.DecodeEffectFast(data, &r) {
		// A second variable: &slow escapes to the heap, but only on this
		// path.
		var slow api.EffectRequest
		if err := decodeStrict(data, &slow); err != nil {
			return fsm.Command{}, err
		}
		r = slow
	}
	return effectRequestCommand(worker, &r)
}

// effectRequestCommand checks a decoded effect request and builds its
// command.
func effectRequestCommand(worker string, r *api.EffectRequest) (fsm.Command, *requestError) {
	if e := checkText("grant_id", r.GrantID, 64, true); e != nil {
		return fsm.Command{}, e
	}
	if !grants.ValidOutcome(r.Outcome) {
		return fsm.Command{}, invalid("outcome", "must be confirmed, failed or unknown")
	}
	if e := checkText("verifier", r.Verifier, maxVerifier, true); e != nil {
		return fsm.Command{}, e
	}
	return fsm.Command{Op: fsm.OpEffect, Caller: worker, GrantID: r.GrantID, Outcome: r.Outcome, Verifier: r.Verifier}, nil
}

// effectSourceBody is api.EffectSourceRequest with its source kept raw,
// so that the source object is decoded as strictly as a body: unknown and
// repeated fields refused, its version absent or api.Version.
type effectSourceBody struct {
	V        int             `json:"v"`
	GrantID  string          `json:"grant_id"`
	Outcome  string          `json:"outcome"`
	Verifier string          `json:"verifier"`
	Source   json.RawMessage `json:"source"`
}

// effectSourceCommand builds an OpEffectSource from a worker's report of a
// finished call that carries the call's result as a source: the effect
// checked as effectCommand checks it, the source as sourceCommand does,
// each field prefixed "source." in a refusal of the source.
func effectSourceCommand(worker string, data []byte) (fsm.Command, *requestError) {
	var b effectSourceBody
	if err := decodeStrict(data, &b); err != nil {
		return fsm.Command{}, err
	}
	if len(b.Source) == 0 || !isObject(b.Source) {
		return fsm.Command{}, invalid("source", "required: the source registration (an object, as a source request's body)")
	}
	var src api.SourceRequest
	dec := json.NewDecoder(bytes.NewReader(b.Source))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&src); err != nil {
		return fsm.Command{}, invalid("source", "%v", err)
	}
	if k, dup := duplicateKey(b.Source); dup {
		return fsm.Command{}, invalid("source."+k, "given twice; a request names each field once")
	}
	if src.V != 0 && src.V != api.Version {
		return fsm.Command{}, &requestError{reason: grants.ReasonUnknownVersion, missing: "source.v",
			detail: fmt.Sprintf("source.v: version %d is not supported; this issuer speaks version %d", src.V, api.Version)}
	}
	c, rerr := effectRequestCommand(worker, &api.EffectRequest{V: b.V, GrantID: b.GrantID, Outcome: b.Outcome, Verifier: b.Verifier})
	if rerr != nil {
		return fsm.Command{}, rerr
	}
	sc, rerr := sourceRequestCommand(worker, &src)
	if rerr != nil {
		rerr.missing = "source." + rerr.missing
		rerr.detail = "source." + rerr.detail
		return fsm.Command{}, rerr
	}
	sc.Op, sc.GrantID, sc.Outcome, sc.Verifier = fsm.OpEffectSource, c.GrantID, c.Outcome, c.Verifier
	return sc, nil
}

func revokeCommand(operator string, data []byte) (fsm.Command, *requestError) {
	var r api.RevokeRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	var key string
	n := 0
	for _, f := range []struct{ scope, id, field string }{
		{revocation.ScopeWorker, r.Worker, "worker"},
		{revocation.ScopeSource, r.Source, "source"},
		{revocation.ScopeLane, r.Lane, "lane"},
	} {
		if f.id == "" {
			continue
		}
		if e := checkID(f.field, f.id, true); e != nil {
			return fsm.Command{}, e
		}
		key = revocation.Key(f.scope, f.id)
		n++
	}
	if n != 1 {
		return fsm.Command{}, invalid("worker|source|lane", "name exactly one of worker, source or lane")
	}
	return fsm.Command{Op: fsm.OpRevoke, Caller: operator, Key: key}, nil
}

func reinstateCommand(operator string, data []byte) (fsm.Command, *requestError) {
	var r api.ReinstateRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	if e := checkID("worker", r.Worker, true); e != nil {
		return fsm.Command{}, e
	}
	return fsm.Command{Op: fsm.OpReinstate, Caller: operator, Key: r.Worker}, nil
}

// policyCommand builds an OpSetPolicy from a JSON document (the CLI
// converts YAML first). The entry carries the document with writ's
// built-in rules (LogPolicy). A document that fails validation, is of
// version 1 or redefines a built-in rule is refused here, with the field
// named, and never reaches the log; the state machine checks it again
// when it applies the entry.
func policyCommand(operator string, data []byte) (fsm.Command, *requestError) {
	var r api.PolicyRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	p, err := LogPolicy(r.Policy)
	if err != nil {
		// The validation error names the document ("policy: invalid:")
		// and every problem with its field; it is the detail as it is,
		// not under a second "policy:".
		return fsm.Command{}, &requestError{reason: grants.ReasonInvalidRequest, missing: "policy", detail: err.Error()}
	}
	canon := p.Canonical()
	// The canonical form can be larger than the document (JSON escapes
	// '<' as \u003c); refuse here what the state machine would refuse, so
	// an oversized entry never reaches the log.
	if _, err := policy.Parse(canon); err != nil {
		return fsm.Command{}, invalid("policy", "canonical form does not validate: %s", strings.TrimPrefix(err.Error(), "policy: "))
	}
	return fsm.Command{Op: fsm.OpSetPolicy, Caller: operator, Policy: canon}, nil
}

// LogPolicy parses an operator's policy document and returns the document
// that is written to the log for it: the same document with writ's
// built-in rules (policy.WithBuiltins), which keep every agent from
// running writ's operator commands. A version 1 document, which cannot
// carry them, and one that redefines a built-in rule are refused. Only
// the paths where a document enters writ call it (the initial policy, a
// policy request); entries already in the log replay as they are.
func LogPolicy(raw []byte) (*policy.Policy, error) {
	p, err := policy.Parse(raw)
	if err != nil {
		return nil, err
	}
	return policy.WithBuiltins(p)
}

// checkReviewID checks a review id's shape (api.ValidReviewID).
func checkReviewID(v string) *requestError {
	if v == "" {
		return invalid("review_id", "required (the rv-... id an approval_required answer names)")
	}
	if !api.ValidReviewID(v) {
		return invalid("review_id", "want rv- and 20 lowercase hex digits, as approval_required answers name it")
	}
	return nil
}

// approveCommand builds an OpApprove from an operator's approval: a
// review id of the shape api.ValidReviewID checks, a lifetime within
// api.MaxApprovalTTLMillis (0: the default, api.DefaultApprovalTTLMillis)
// and a note of at most api.MaxApprovalNote bytes of valid UTF-8 without
// control characters other than newlines and tabs.
func approveCommand(operator string, data []byte) (fsm.Command, *requestError) {
	var r api.ApproveRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	if e := checkReviewID(r.ReviewID); e != nil {
		return fsm.Command{}, e
	}
	if r.TTLMillis < 0 || r.TTLMillis > api.MaxApprovalTTLMillis {
		return fsm.Command{}, invalid("ttl_ms", "must be between 0 (the default, %d) and %d", api.DefaultApprovalTTLMillis, api.MaxApprovalTTLMillis)
	}
	if len(r.Note) > api.MaxApprovalNote {
		return fsm.Command{}, invalid("note", "longer than %d bytes", api.MaxApprovalNote)
	}
	// encoding/json replaces invalid UTF-8 with U+FFFD; refuse it instead.
	// Past the review id's check, the note is the only text the body can
	// carry (unknown fields are refused).
	if !utf8.Valid(data) || !utf8.ValidString(r.Note) {
		return fsm.Command{}, invalid("note", "not valid UTF-8")
	}
	for _, c := range r.Note {
		if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			return fsm.Command{}, invalid("note", "contains control characters")
		}
	}
	ttl := r.TTLMillis
	if ttl == 0 {
		ttl = api.DefaultApprovalTTLMillis
	}
	return fsm.Command{Op: fsm.OpApprove, Caller: operator, ReviewID: r.ReviewID,
		TTL: ttl * int64(time.Millisecond), Note: r.Note}, nil
}

// breakGlassCommand builds an OpBreakGlass from an operator's break-glass
// request: a case id of the id shape, a scope api.ParseBreakGlassScope
// accepts, a lifetime within api.MaxBreakGlassTTLMillis and a reason of
// at most api.MaxBreakGlassReason bytes of valid UTF-8 without control
// characters other than newlines and tabs. The state machine checks them
// again (and refuses the op below receipt format level 6).
func breakGlassCommand(operator string, data []byte) (fsm.Command, *requestError) {
	var r api.BreakGlassRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	if e := checkID("case_id", r.CaseID, true); e != nil {
		return fsm.Command{}, e
	}
	if _, err := api.ParseBreakGlassScope(r.Scope); err != nil {
		return fsm.Command{}, invalid("scope", "%v", err)
	}
	if r.TTLMillis <= 0 || r.TTLMillis > api.MaxBreakGlassTTLMillis {
		return fsm.Command{}, invalid("ttl_ms", "must be more than 0 and at most %d (8h)", api.MaxBreakGlassTTLMillis)
	}
	if r.Reason == "" || len(r.Reason) > api.MaxBreakGlassReason {
		return fsm.Command{}, invalid("reason", "required, at most %d bytes", api.MaxBreakGlassReason)
	}
	if !utf8.Valid(data) || !utf8.ValidString(r.Reason) {
		return fsm.Command{}, invalid("reason", "not valid UTF-8")
	}
	for _, c := range r.Reason {
		if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			return fsm.Command{}, invalid("reason", "contains control characters")
		}
	}
	return fsm.Command{Op: fsm.OpBreakGlass, Caller: operator, CaseID: r.CaseID, GlassScope: r.Scope,
		TTL: r.TTLMillis * int64(time.Millisecond), Note: r.Reason}, nil
}
