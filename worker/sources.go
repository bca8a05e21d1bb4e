package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/api"
	authlevel "github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/provenance"
	"github.com/writ-dev/writ/revocation"
)

// Source registration: what enters a session is registered with the
// issuer first (a descriptor: channel, scope, path, tool, content digest,
// origins — never the content), and only a source the issuer permitted is
// windowed into the session's local registry, under the authority level
// and the revocation counters the issuer answered. PreToolUse then traces
// each argument leaf against that registry (see traceArgs); the issuer
// judges the traces against its own replicated registry, never against a
// level the worker claims.
//
//   - SessionStart: the instruction files of the working directory
//     (harness.InstructionFiles, each a regular file of at most
//     harness.MaxSourceContent bytes), channel instruction_file, scope
//     session, path absolute.
//   - UserPromptSubmit: the prompt, channel user_prompt, scope session: in
//     a fleet the prompt states the task and stays the user's word for the
//     whole session (a new prompt is a new source; nothing expires it
//     early).
//   - PostToolUse: the tool's result (harness.ResponseText, bounded by
//     harness.MaxSourceContent), channel by tool (harness.ClassifyTool),
//     scope task, tool = the tool's name, path = the file a read named.
//     A structured tool_result (a JSON object or array, or MCP content
//     carrying one) is registered as one source whose leaves are also
//     kept by field (provenance.ResultLeaves), so that traces name the
//     field a value came from and the issuer can judge it by the policy's
//     result schemas.
//     Results of writing tools are not registered; what they wrote is:
//     traced against the registry and registered as derived content whose
//     origins are the sources it matched (model_made when the matches do
//     not cover it), so a file the agent wrote and reads back later stays
//     tied to where its content came from.
//   - PostToolUseFailure registers nothing: the call produced no result.
//
// Source ids are "s" + 24 hex digits of a SHA-256 over the session, the
// call (tool_use_id, or the event name), the channel, the path and the
// content digest — and for derived content its origins and model_made —
// so a repeated hook registers the same descriptor under the same id,
// which the issuer answers with its original answer.

// sourceIDPrefix starts every source id the hooks register.
const sourceIDPrefix = "s"

// Scopes of registered content.
const (
	scopeSession = "session"
	scopeTask    = "task"
)

// errSourcesUnsupported: the issuer does not know the source operation.
// Such an issuer (an older build, mid-upgrade) does not judge provenance
// either, so there is nothing to register: the hook skips registration
// silently and its grant requests carry no traces it would read.
var errSourcesUnsupported = errors.New("the issuer does not register sources")

// sourcesUnsupported recognizes an issuer's answer to an operation it
// does not know: invalid_request naming "op".
func sourcesUnsupported(env grants.Envelope) bool {
	return env.Decision == grants.Deny && env.Reason == grants.ReasonInvalidRequest && env.Missing == "op"
}

// pendingSource is content about to be registered.
type pendingSource struct {
	req     api.SourceRequest
	content []byte
	what    string                  // for messages: "this prompt", "CLAUDE.md"
	inputs  []provenance.Descriptor // derived: the local descriptors of its origins
	// leaves: a structured tool result's fields, kept locally by field
	// (provenance.RegisterResult) so that traces name the field a value
	// came from; never sent to the issuer.
	leaves []provenance.ResultLeaf
}

// sourceID derives the id of a source (see above).
func sourceID(session, call, channel, path string, digest [32]byte, extra ...string) string {
	h := sha256.New()
	for _, part := range append([]string{session, call, channel, path, hex.EncodeToString(digest[:])}, extra...) {
		h.Write([]byte(part))
		h.Write([]byte{'|'})
	}
	return sourceIDPrefix + hex.EncodeToString(h.Sum(nil))[:24]
}

// newSource describes content from channel (not derived).
func newSource(session, call, channel, scope, path, tool, what string, content []byte) pendingSource {
	digest := sha256.Sum256(content)
	return pendingSource{
		req: api.SourceRequest{
			ID: sourceID(session, call, channel, path, digest), Session: session, Channel: channel, Scope: scope,
			ContentDigest: hex.EncodeToString(digest[:]), Path: path, Tool: tool,
		},
		content: content,
		what:    what,
	}
}

// derivedSource describes content the agent wrote, traced against reg
// (nil: nothing registered yet). Its origins are the sources the content
// matched; it is model-made unless raw matches cover all of it, with
// nothing uncertain. With more than api.MaxSourceOrigins origins the
// lowest-authority ones are kept and it is marked model-made: a dropped
// origin must not leave it looking better grounded than it is.
func derivedSource(reg *provenance.Registry, session, call, path, tool, what string, content []byte) pendingSource {
	var inputs []provenance.Descriptor
	modelMade := true
	if reg != nil {
		tr := reg.Trace("", string(content))
		modelMade = len(tr.Matches) == 0 || tr.Length == 0 || tr.Covered < tr.Length || tr.StopGrams > 0 || tr.Truncated
		for _, id := range tr.Sources {
			if d, ok := reg.Source(id); ok {
				inputs = append(inputs, d)
			}
		}
	}
	if len(inputs) > api.MaxSourceOrigins {
		sort.SliceStable(inputs, func(a, b int) bool { return inputs[a].Authority < inputs[b].Authority })
		inputs, modelMade = inputs[:api.MaxSourceOrigins], true
	}
	var origins []string
	for _, d := range inputs {
		origins = append(origins, d.ID)
	}
	sort.Strings(origins)
	digest := sha256.Sum256(content)
	id := sourceID(session, call, authlevel.ChannelDerived, path, digest, strings.Join(origins, ","), strconv.FormatBool(modelMade))
	scope := provenance.Derive(id, "", inputs...).Scope.String()
	return pendingSource{
		req: api.SourceRequest{
			ID: id, Session: session, Channel: authlevel.ChannelDerived, Scope: scope,
			ContentDigest: hex.EncodeToString(digest[:]), Path: path, Tool: tool, Origins: origins, ModelMade: modelMade,
		},
		content: content,
		what:    what,
		inputs:  inputs,
	}
}

// descriptor is the local registry's label for a source the issuer
// permitted: the level the issuer assigned (Evidence if it named none it
// could parse; for derived content never above the lowest of its local
// origins) and the revocation counters it recorded.
func (p pendingSource) descriptor(env grants.Envelope) provenance.Descriptor {
	lvl, err := provenance.ParseLevel(env.Authority)
	if err != nil {
		lvl = provenance.Evidence
	}
	var d provenance.Descriptor
	if p.req.Channel == authlevel.ChannelDerived {
		d = provenance.Derive(p.req.ID, "", p.inputs...)
		lvl = provenance.Lowest(lvl, d.Authority)
		if p.req.ModelMade {
			lvl = provenance.Evidence
		}
	} else {
		scope := provenance.ScopeTask
		if p.req.Scope == scopeSession {
			scope = provenance.ScopeSession
		}
		d = provenance.NewSource(p.req.ID, provenance.Channel(p.req.Channel), "", scope, lvl, 0, p.content)
	}
	d.Authority = lvl
	d.ContentDigest = sha256.Sum256(p.content)
	var counters []provenance.OriginCounter
	for _, c := range env.Counters {
		if id, ok := strings.CutPrefix(c.Key, revocation.ScopeSource+"/"); ok {
			counters = append(counters, provenance.OriginCounter{Source: id, Counter: c.Value})
		}
	}
	if len(counters) > 0 {
		sort.Slice(counters, func(a, b int) bool { return counters[a].Source < counters[b].Source })
		d.OriginCounters = counters
	}
	return d
}

// registerSources registers each source with the issuer, in order, then
// windows the permitted ones into the session registry in one update. It
// returns notes that do not fail the hook (a rebuilt registry, pressure)
// and an error naming what could not be registered. An issuer that does
// not know source registration gets nothing registered and no error.
func registerSources(ctx context.Context, auth authority, store *sessionStore, srcs []pendingSource) (notes []string, err error) {
	return registerAnswered(ctx, auth, store, srcs, nil)
}

// registerAnswered is registerSources for sources the first of which
// already have the issuer's answers (answered[i] answers srcs[i]: they
// were registered in the same request as an effect).
func registerAnswered(ctx context.Context, auth authority, store *sessionStore, srcs []pendingSource, answered []grants.Envelope) (notes []string, err error) {
	type permitted struct {
		desc    provenance.Descriptor
		content []byte
		what    string
		leaves  []provenance.ResultLeaf
	}
	var (
		ok        []permitted
		failures  []string
		transport error
	)
	for i, p := range srcs {
		var (
			env grants.Envelope
			err error
		)
		if i < len(answered) {
			env = answered[i]
		} else {
			env, err = auth.RegisterSource(ctx, p.req)
		}
		if err != nil {
			failures = append(failures, p.what+" ("+unreachable(err).Error()+")")
			if isTransport(err) {
				transport = err
			}
			break // the rest would wait for the same issuer
		}
		if sourcesUnsupported(env) {
			return nil, nil
		}
		if env.Decision != grants.Permit {
			failures = append(failures, p.what+" (refused: "+refusalCode(env)+")")
			continue
		}
		ok = append(ok, permitted{p.descriptor(env), p.content, p.what, p.leaves})
	}
	if len(ok) > 0 {
		notes, err = store.update(ctx, func(reg *provenance.Registry) error {
			for _, s := range ok {
				if err := reg.RegisterResult(s.desc, s.content, s.leaves); err != nil {
					return fmt.Errorf("registering %s locally: %v", s.desc.ID, err)
				}
			}
			return nil
		})
		if err != nil {
			for _, s := range ok {
				failures = append(failures, s.what+" (the session's provenance registry: "+err.Error()+")")
			}
		}
	}
	if len(failures) > 0 {
		return notes, &sourcesError{
			msg:       fmt.Sprintf("not registered as a source: %s — values copied from it count as model-made", strings.Join(failures, "; ")),
			transport: transport,
		}
	}
	return notes, nil
}

// sourcesError says what could not be registered. It unwraps to the
// transport error when the issuer could not be reached or did not answer
// in time (isTransport), and to nothing when it answered and refused.
type sourcesError struct {
	msg       string
	transport error
}

func (e *sourcesError) Error() string { return e.msg }
func (e *sourcesError) Unwrap() error { return e.transport }

// instructionSources reads the instruction files of dir (absolute). Files
// that are missing are skipped; files that are not regular, too large or
// unreadable are skipped with a note.
func instructionSources(session, dir string) (srcs []pendingSource, notes []string) {
	if dir == "" {
		return nil, nil
	}
	for _, name := range harness.InstructionFiles {
		path := filepath.Join(dir, name)
		content, err := readFileBounded(path, harness.MaxSourceContent)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			notes = append(notes, fmt.Sprintf("%s not registered as a source (%v): its content counts as model-made", name, err))
			continue
		case len(content) == 0:
			continue
		}
		srcs = append(srcs, newSource(session, harness.EventSessionStart, authlevel.ChannelInstructionFile, scopeSession, path, "", name, content))
	}
	return srcs, notes
}

// readFileBounded reads a regular file of at most max bytes.
func readFileBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return b, nil
}

// promptSource is the prompt of a UserPromptSubmit event, bounded by
// harness.MaxSourceContent; ok is false for an empty prompt.
func promptSource(in harness.HookInput) (pendingSource, bool) {
	p := []byte(string(in.Prompt))
	if len(p) == 0 {
		return pendingSource{}, false
	}
	if len(p) > harness.MaxSourceContent {
		p = []byte(strings.ToValidUTF8(string(p[:harness.MaxSourceContent]), ""))
	}
	return newSource(in.SessionID, harness.EventUserPromptSubmit, authlevel.ChannelUserPrompt, scopeSession, "", "", "this prompt", p), true
}

// resultSource is what a PostToolUse event brings into the session: the
// tool's result, or for a writing tool what it wrote (traced against the
// registry store holds; with a nil store only ok is meaningful). ok is
// false when there is nothing to register.
func resultSource(ctx context.Context, store *sessionStore, in harness.HookInput, call harness.Call) (src pendingSource, notes []string, ok bool) {
	cwd := in.WorkDir()
	ts := harness.ClassifyTool(call.Tool, in.ToolInput, cwd)
	if ts.Write {
		path, content, ok := harness.Written(call.Tool, in.ToolInput, cwd)
		if !ok {
			return pendingSource{}, nil, false
		}
		if store == nil {
			return pendingSource{what: "what this " + call.Tool + " call wrote"}, nil, true
		}
		reg, err := store.load(ctx)
		if err != nil {
			// Traced against nothing: model-made. The update that
			// registers it rebuilds an unreadable file.
			notes = append(notes, err.Error())
		}
		return derivedSource(reg, in.SessionID, call.CallID, path, call.Tool, "what this "+call.Tool+" call wrote", content), notes, true
	}
	text, _ := harness.ResponseText(in.ToolResponse, harness.MaxSourceContent)
	if len(text) == 0 {
		return pendingSource{}, nil, false
	}
	src = newSource(in.SessionID, call.CallID, ts.Channel, scopeTask, ts.Path, call.Tool, "the result of this "+call.Tool+" call", text)
	if ts.Channel == authlevel.ChannelToolResult {
		src.leaves, _ = provenance.ResultLeaves(in.ToolResponse)
	}
	return src, nil, true
}

// withResource gives a tool result the resource its call's grant target
// names (harness.ResultResource) as its path, when the harness named none
// (an MCP tool, say): the issuer applies path and resource levels to it
// where the tool's policy surface declares result_from. Other sources are
// returned as they are.
func withResource(src pendingSource, target, session, call string) pendingSource {
	res := harness.ResultResource(target)
	if res == "" || src.req.Path != "" || src.req.Channel != authlevel.ChannelToolResult {
		return src
	}
	digest := sha256.Sum256(src.content)
	src.req.Path = res
	src.req.ID = sourceID(session, call, src.req.Channel, res, digest)
	return src
}
