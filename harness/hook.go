package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/grants"
)

// Harness names. They prefix idempotency keys and name self-reporting
// verifiers ("harness:claude-code").
const (
	ClaudeCode = "claude-code"
	Codex      = "codex"
	MCP        = "mcp"
)

// Hook event names (hook_event_name).
const (
	EventPreToolUse         = "PreToolUse"
	EventPostToolUse        = "PostToolUse"
	EventPostToolUseFailure = "PostToolUseFailure"
	// EventUserPromptSubmit carries the user's prompt before the model
	// sees it; writ registers it as a source.
	EventUserPromptSubmit = "UserPromptSubmit"
	// EventSessionStart opens (or resumes, clears, compacts) a session;
	// writ registers the instruction files of its working directory.
	EventSessionStart = "SessionStart"
)

// Limits.
const (
	// MaxHookInput bounds one hook event read from stdin. Tool input beyond
	// args.MaxBytes is refused later, with its own message.
	MaxHookInput = 4 << 20
	// MaxKeyLen is the issuer's limit on idempotency keys.
	MaxKeyLen = 128
	// MaxSessionLen is the issuer's limit on session ids.
	MaxSessionLen = 128
	// MaxToolLen is the issuer's limit on tool names.
	MaxToolLen = 256
	// MaxPathLen is the issuer's limit on paths (cwd, source paths).
	MaxPathLen = 1024
)

// ErrMalformed wraps every reason a hook event cannot be acted on. A hook
// answers it with exit 2: the call does not run.
var ErrMalformed = errors.New("malformed hook input")

// HookInput is one hook event as Claude Code and Codex write it on stdin.
// Only the fields writ acts on are decoded; the rest (transcript_path,
// permission_mode, duration_ms, error, model, ...) are ignored whatever
// their type, so a harness adding or changing them cannot break the hook.
// The informational fields cwd, prompt and source are read leniently (a
// value that is not a string reads as absent), and tool_response is kept
// raw, whatever its shape: none of them can make an event malformed.
type HookInput struct {
	SessionID     string          `json:"session_id"`
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
	// AgentID and AgentType are set inside a Claude Code subagent; the
	// main session has neither.
	AgentID   string `json:"agent_id"`
	AgentType string `json:"agent_type"`
	// TurnID is Codex's turn.
	TurnID string `json:"turn_id"`

	// Cwd is the session's working directory (every event).
	Cwd LooseString `json:"cwd"`
	// Prompt is the user's prompt (UserPromptSubmit).
	Prompt LooseString `json:"prompt"`
	// Source says why a session started: startup, resume, clear or
	// compact (SessionStart).
	Source LooseString `json:"source"`
	// ToolResponse is the tool's result (PostToolUse), in whatever shape
	// the harness gives it: an object for most Claude Code tools, a string
	// for Codex's.
	ToolResponse json.RawMessage `json:"tool_response"`
}

// LooseString decodes a JSON string; any other JSON value (a number, an
// object, null) decodes as "" instead of failing the whole event.
type LooseString string

// UnmarshalJSON implements json.Unmarshaler.
func (s *LooseString) UnmarshalJSON(b []byte) error {
	var v string
	if json.Unmarshal(b, &v) != nil {
		*s = ""
		return nil
	}
	*s = LooseString(v)
	return nil
}

// Decode reads one hook event: a single JSON object of at most
// MaxHookInput bytes, nothing after it but whitespace, with a
// hook_event_name. Errors wrap ErrMalformed.
func Decode(r io.Reader) (HookInput, error) {
	var in HookInput
	raw, err := io.ReadAll(io.LimitReader(r, MaxHookInput+1))
	if err != nil {
		return in, fmt.Errorf("%w: reading stdin: %v", ErrMalformed, err)
	}
	if len(raw) > MaxHookInput {
		return in, fmt.Errorf("%w: more than %d bytes on stdin", ErrMalformed, MaxHookInput)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return in, fmt.Errorf("%w: stdin is empty (want one JSON object)", ErrMalformed)
	}
	if raw[0] != '{' {
		return in, fmt.Errorf("%w: stdin is not a JSON object", ErrMalformed)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&in); err != nil {
		return in, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return in, fmt.Errorf("%w: trailing data after the JSON object", ErrMalformed)
	}
	if in.HookEventName == "" {
		return in, fmt.Errorf("%w: hook_event_name is missing", ErrMalformed)
	}
	return in, nil
}

// IsToolEvent reports whether the event is about one tool call: those are
// the only events writ gates or records.
func (in HookInput) IsToolEvent() bool {
	switch in.HookEventName {
	case EventPreToolUse, EventPostToolUse, EventPostToolUseFailure:
		return true
	}
	return false
}

// IsSourceEvent reports whether the event brings content into the session
// that writ registers but does not gate: a user prompt or a session start.
func (in HookInput) IsSourceEvent() bool {
	switch in.HookEventName {
	case EventUserPromptSubmit, EventSessionStart:
		return true
	}
	return false
}

// IsToolEventName reports whether event names a tool event.
func IsToolEventName(event string) bool {
	return HookInput{HookEventName: event}.IsToolEvent()
}

// CheckSession validates session_id as Call does: present, bounded, no
// control characters. Errors wrap ErrMalformed.
func (in HookInput) CheckSession() error {
	if in.SessionID == "" {
		return fmt.Errorf("%w: session_id is missing", ErrMalformed)
	}
	return checkText("session_id", in.SessionID, MaxSessionLen)
}

// WorkDir returns cwd when it is a clean-able absolute path without
// control characters, else "": only such a directory may be passed on as
// a grant's resolution context or searched for instruction files.
func (in HookInput) WorkDir() string {
	d := string(in.Cwd)
	if d == "" || !filepath.IsAbs(d) || checkText("cwd", d, MaxPathLen) != nil {
		return ""
	}
	return filepath.Clean(d)
}

// Call is one tool call as writ binds it: the harness it came from, the
// session and call ids that make its idempotency key, the tool name and the
// canonical JSON of its arguments.
type Call struct {
	Harness   string
	Session   string
	CallID    string // tool_use_id, or the JSON-RPC id for MCP
	Tool      string
	Args      json.RawMessage // canonical JSON
	AgentType string          // Claude Code subagent type; "" in the main session
	AgentID   string          // Claude Code subagent id; "" in the main session
}

// GrantSession is the session a grant binds: the harness session, and
// inside a subagent "<session>/<agent_id>", so the receipts say which
// subagent made the call (the session alone when that would be longer than
// the issuer accepts).
func (c Call) GrantSession() string {
	if c.AgentID == "" {
		return c.Session
	}
	s := c.Session + "/" + c.AgentID
	if len(s) > MaxSessionLen || checkText("agent_id", c.AgentID, MaxSessionLen) != nil {
		return c.Session
	}
	return s
}

// Call extracts the tool call of a tool event. Errors wrap ErrMalformed
// and name the field; arguments that do not canonicalize (over
// args.MaxBytes, duplicate keys, invalid UTF-8, ...) are malformed
// too, because a grant could not bind them.
func (in HookInput) Call(harness string) (Call, error) {
	c := Call{Harness: harness, Session: in.SessionID, CallID: in.ToolUseID, Tool: in.ToolName, AgentType: in.AgentType, AgentID: in.AgentID}
	if !in.IsToolEvent() {
		return c, fmt.Errorf("%w: %s is not a tool event", ErrMalformed, in.HookEventName)
	}
	for _, f := range []struct{ name, v string }{
		{"session_id", in.SessionID}, {"tool_name", in.ToolName}, {"tool_use_id", in.ToolUseID},
	} {
		if f.v == "" {
			return c, fmt.Errorf("%w: %s is missing", ErrMalformed, f.name)
		}
	}
	if err := checkText("session_id", in.SessionID, MaxSessionLen); err != nil {
		return c, err
	}
	if err := checkText("tool_name", in.ToolName, MaxToolLen); err != nil {
		return c, err
	}
	raw := bytes.TrimSpace(in.ToolInput)
	if len(raw) == 0 || raw[0] != '{' {
		return c, fmt.Errorf("%w: tool_input must be a JSON object", ErrMalformed)
	}
	canon, err := CanonicalArgs(raw)
	if err != nil {
		return c, err
	}
	c.Args = canon
	return c, nil
}

// CanonicalArgs canonicalizes tool arguments for a grant; errors wrap
// ErrMalformed.
func CanonicalArgs(raw []byte) (json.RawMessage, error) {
	if len(raw) > args.MaxBytes {
		return nil, fmt.Errorf("%w: tool input is %d bytes; a writ grant binds at most %d", ErrMalformed, len(raw), args.MaxBytes)
	}
	c, err := args.CanonicalJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: tool input: %s", ErrMalformed, strings.TrimPrefix(err.Error(), args.ErrCanonical.Error()+": "))
	}
	return c, nil
}

// checkText applies the issuer's rule for free text fields: bounded, no
// control characters.
func checkText(field, v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrMalformed, field, len(v), max)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f || r == unicode.ReplacementChar {
			return fmt.Errorf("%w: %s contains %q", ErrMalformed, field, r)
		}
	}
	return nil
}

// IdempotencyKey is the key a grant request and its spend carry: a pure
// function of the harness, the session and the call id, so a repeated hook
// for the same call — and the PostToolUse hook after it — gets the
// original answer. It is "<harness>:<session>:<call>" when that fits the
// issuer's 128-byte limit and is plain printable ASCII, and
// "<harness>:sha256:<hex>" of both ids otherwise.
func IdempotencyKey(harness, session, callID string) string {
	k := harness + ":" + session + ":" + callID
	if len(k) <= MaxKeyLen && plainASCII(k) {
		return k
	}
	h := sha256.New()
	h.Write([]byte(session))
	h.Write([]byte{0})
	h.Write([]byte(callID))
	return harness + ":sha256:" + hex.EncodeToString(h.Sum(nil))
}

// IdempotencyKey returns IdempotencyKey(c.Harness, c.Session, c.CallID).
func (c Call) IdempotencyKey() string { return IdempotencyKey(c.Harness, c.Session, c.CallID) }

func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// Verifier names the harness as the (self-reporting) verifier of a
// PostToolUse result: "harness:claude-code". The "harness:" prefix marks
// the effect as the runtime's own account, never a destination-confirmed
// one.
func Verifier(harness string) string { return "harness:" + harness }

// PostOutcome maps a post-call hook event to the effect outcome it
// reports: PostToolUse confirmed, PostToolUseFailure failed.
func PostOutcome(event string) (string, bool) {
	switch event {
	case EventPostToolUse:
		return grants.OutcomeConfirmed, true
	case EventPostToolUseFailure:
		return grants.OutcomeFailed, true
	}
	return "", false
}
