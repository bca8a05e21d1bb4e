package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/grants"
)

// OpenClaw is the harness name of the OpenClaw gateway plugin
// (integrations/openclaw), which reaches writ through the sidecar.
const OpenClaw = "openclaw"

// openClawTool maps an OpenClaw tool onto the writ tool whose surface
// the default policy already declares, and its parameter names onto that
// tool's: the policy's target fields (command, file_path, url) and the
// provenance code's readers (Written, ClassifyTool) see the same call a
// Claude Code or Codex session would present.
type openClawTool struct {
	tool   string
	rename map[string]string // OpenClaw parameter → writ argument
}

var openClawTools = map[string]openClawTool{
	"exec":        {tool: "Bash"},
	"bash":        {tool: "Bash"},
	"process":     {tool: "BashOutput"},
	"read":        {tool: "Read", rename: map[string]string{"path": "file_path"}},
	"write":       {tool: "Write", rename: map[string]string{"path": "file_path"}},
	"edit":        {tool: "Edit", rename: map[string]string{"path": "file_path", "oldText": "old_string", "newText": "new_string"}},
	"apply_patch": {tool: "apply_patch", rename: map[string]string{"input": "patch"}},
	// OpenClaw names its fetch tool after the channel its results enter
	// by; the literal has one home (authority), and the mapping test
	// spells the tool name out, so a renamed channel breaks the test.
	authority.ChannelWebFetch: {tool: "WebFetch"},
	"web_search":              {tool: "web_search"},
	"grep":                    {tool: "Grep"},
	"find":                    {tool: "Glob"},
	"ls":                      {tool: "LS"},
}

// OpenClawToolName is the writ tool an OpenClaw tool is granted as: the
// mapped name for the tools above, the OpenClaw name itself (message,
// browser, cron, a plugin's tool, ...) otherwise, so a policy lists it
// under that name.
func OpenClawToolName(tool string) string {
	if m, ok := openClawTools[tool]; ok {
		return m.tool
	}
	return tool
}

// OpenClawCall turns an OpenClaw before_tool_call (or after_tool_call)
// into the call a grant binds: tool mapped by OpenClawToolName, params
// renamed to that tool's argument names (a name the params already hold
// is left alone) and canonicalized, and the idempotency key
// "openclaw:<session>:<toolCallId>". session is the gateway's session key
// (or session id, or run id). Errors wrap ErrMalformed: a call without a
// session or a tool call id cannot be bound to one answer and is blocked.
func OpenClawCall(session, callID, tool string, params json.RawMessage) (Call, error) {
	c := Call{Harness: OpenClaw, Session: session, CallID: callID, Tool: OpenClawToolName(tool)}
	for _, f := range []struct{ name, v string }{{"session", session}, {"toolCallId", callID}, {"toolName", tool}} {
		if f.v == "" {
			return c, fmt.Errorf("%w: %s is missing", ErrMalformed, f.name)
		}
	}
	if err := checkText("session", session, MaxSessionLen); err != nil {
		return c, err
	}
	if err := checkText("toolCallId", callID, MaxSessionLen); err != nil {
		return c, err
	}
	if err := checkText("toolName", tool, MaxToolLen); err != nil {
		return c, err
	}
	raw := bytes.TrimSpace(params)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return c, fmt.Errorf("%w: params must be a JSON object", ErrMalformed)
	}
	// Canonical first: duplicate keys, invalid UTF-8 and oversize params
	// are refused before any renaming could hide them.
	canon, err := CanonicalArgs(raw)
	if err != nil {
		return c, err
	}
	if m, ok := openClawTools[tool]; ok && len(m.rename) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(canon, &obj); err != nil {
			return c, fmt.Errorf("%w: params: %v", ErrMalformed, err)
		}
		for from, to := range m.rename {
			if v, ok := obj[from]; ok {
				if _, taken := obj[to]; !taken {
					obj[to] = v
					delete(obj, from)
				}
			}
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return c, fmt.Errorf("%w: params: %v", ErrMalformed, err)
		}
		if canon, err = CanonicalArgs(b); err != nil {
			return c, err
		}
	}
	c.Args = canon
	return c, nil
}

// ReviewCaption is the one line a person deciding a held call reads: the
// tool, what it would touch, the review and why it is held.
func ReviewCaption(tool string, env grants.Envelope) string {
	var b strings.Builder
	fmt.Fprintf(&b, "writ review %s: %s", env.ReviewID, tool)
	if env.Operation != "" {
		fmt.Fprintf(&b, " (%s)", env.Operation)
	}
	switch {
	case env.TargetLabel != "":
		fmt.Fprintf(&b, " on %s", env.TargetLabel)
	case env.Target != "":
		fmt.Fprintf(&b, " on %s", env.Target)
	}
	if env.Reason != grants.ReasonNone {
		fmt.Fprintf(&b, " — %s", env.Reason)
	}
	if env.Missing != "" {
		fmt.Fprintf(&b, ", missing %s", env.Missing)
	}
	return shorten(OneLine(b.String()), 300)
}

// NextStep is the one safe next step after a refusal, for the model and
// the person reading along.
func NextStep(env grants.Envelope) string {
	if env.Decision == grants.ApprovalRequired {
		return "wait for a person to decide the review, then retry this exact call"
	}
	rec := env.Recovery
	if rec == "" {
		rec = grants.RecoveryFor(env.Reason)
	}
	return string(rec) + ": " + RecoveryAdvice(rec)
}
