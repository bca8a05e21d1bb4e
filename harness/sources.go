package harness

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/writ-dev/writ/authority"
)

// MaxSourceContent bounds the content of one registered source: a longer
// tool result, prompt or written text is registered by its first
// MaxSourceContent bytes (cut at a rune boundary), and its digest is that
// of the registered part. Whatever lies beyond is not matched, so a value
// copied from it counts as model-made.
const MaxSourceContent = 1 << 20

// InstructionFiles are the instruction files a session start registers,
// relative to the session's working directory, in registration order.
var InstructionFiles = []string{"CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md", "AGENTS.md"}

// ToolSource says how a finished tool call's result entered the session.
type ToolSource struct {
	// Channel of the result: web_fetch (WebFetch, WebSearch), file_read
	// (Read, Grep, Glob, NotebookRead), peer_message (Task and Agent: a
	// subagent's answer) or tool_result (everything else: Bash, MCP tools,
	// ...).
	Channel string
	// Path is the absolute path a file read named ("" when it named none
	// that could be made absolute).
	Path string
	// Write: the tool wrote content the agent produced (Write, Edit,
	// MultiEdit, NotebookEdit, Codex's apply_patch). Its result is not
	// registered; what it wrote is, as derived content (see Written).
	Write bool
}

var (
	webTools   = []string{"WebFetch", "WebSearch"}
	readTools  = []string{"Read", "Grep", "Glob", "NotebookRead"}
	agentTools = []string{"Task", "Agent"}
	writeTools = []string{"Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch"}
)

func oneOf(s string, list []string) bool {
	for _, v := range list {
		if s == v {
			return true
		}
	}
	return false
}

// ClassifyTool says how the result of tool, called with input (its
// tool_input) in the working directory cwd (absolute, or ""), entered the
// session.
func ClassifyTool(tool string, input json.RawMessage, cwd string) ToolSource {
	switch {
	case oneOf(tool, writeTools):
		return ToolSource{Channel: authority.ChannelDerived, Write: true}
	case oneOf(tool, webTools):
		return ToolSource{Channel: authority.ChannelWebFetch}
	case oneOf(tool, agentTools):
		return ToolSource{Channel: authority.ChannelPeerMessage}
	case oneOf(tool, readTools):
		p := inputPath(input, cwd, "file_path", "notebook_path", "path")
		if p == "" && (tool == "Grep" || tool == "Glob") {
			p = cwd // they search the working directory by default
		}
		return ToolSource{Channel: authority.ChannelFileRead, Path: p}
	}
	return ToolSource{Channel: authority.ChannelToolResult}
}

// inputPath returns the first of keys that holds a string in input, made
// absolute against cwd and cleaned; "" when there is none or it cannot be
// made absolute.
func inputPath(input json.RawMessage, cwd string, keys ...string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(input, &m) != nil {
		return ""
	}
	for _, k := range keys {
		var v string
		if json.Unmarshal(m[k], &v) != nil || v == "" {
			continue
		}
		return absPath(v, cwd)
	}
	return ""
}

// absPath cleans p, joined to cwd when relative; "" when it cannot be
// made absolute or is not a path the issuer accepts.
func absPath(p, cwd string) string {
	if !filepath.IsAbs(p) {
		if cwd == "" {
			return ""
		}
		p = filepath.Join(cwd, p)
	}
	p = filepath.Clean(p)
	if checkText("path", p, MaxPathLen) != nil {
		return ""
	}
	return p
}

// Written returns the path and the content a writing tool (see
// ClassifyTool) wrote: Write's content, Edit's new_string, MultiEdit's
// edits[].new_string (one per line), NotebookEdit's new_source, and the
// added lines of an apply_patch patch (its path is the first file the
// patch names). The content is bounded by MaxSourceContent. ok is false
// when input holds nothing written.
func Written(tool string, input json.RawMessage, cwd string) (path string, content []byte, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(input, &m) != nil {
		return "", nil, false
	}
	str := func(k string) string {
		var v string
		_ = json.Unmarshal(m[k], &v)
		return v
	}
	var text string
	switch tool {
	case "Write":
		path, text = inputPath(input, cwd, "file_path"), str("content")
	case "Edit":
		path, text = inputPath(input, cwd, "file_path"), str("new_string")
	case "MultiEdit":
		path = inputPath(input, cwd, "file_path")
		var edits []struct {
			NewString string `json:"new_string"`
		}
		_ = json.Unmarshal(m["edits"], &edits)
		parts := make([]string, 0, len(edits))
		for _, e := range edits {
			parts = append(parts, e.NewString)
		}
		text = strings.Join(parts, "\n")
	case "NotebookEdit":
		path, text = inputPath(input, cwd, "notebook_path"), str("new_source")
	case "apply_patch":
		patch := str("command")
		if patch == "" {
			patch = str("patch")
		}
		path, text = patchContent(patch, cwd)
	default:
		return "", nil, false
	}
	if text == "" {
		return path, nil, false
	}
	b, _ := bound([]byte(text), MaxSourceContent)
	return path, b, true
}

// patchContent returns the first file an apply_patch patch names and the
// lines it adds.
func patchContent(patch, cwd string) (path, added string) {
	var b strings.Builder
	for _, line := range strings.Split(patch, "\n") {
		switch {
		case path == "" && (strings.HasPrefix(line, "*** Update File: ") || strings.HasPrefix(line, "*** Add File: ")):
			_, p, _ := strings.Cut(line, ": ")
			path = absPath(strings.TrimSpace(p), cwd)
		case strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "+++"):
			b.WriteString(line[1:])
			b.WriteByte('\n')
		}
	}
	return path, b.String()
}

// ResponseText returns the text of a tool_response: a JSON string as is;
// an object or array as its string and number leaves, in document order,
// one per line; any other scalar as its JSON text. null, an empty
// structure or an absent response has no text. The result is bounded by
// max bytes (cut at a rune boundary); truncated reports a cut.
func ResponseText(raw json.RawMessage, max int) (text []byte, truncated bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		return bound([]byte(s), max)
	case '{', '[':
	default:
		return bound(append([]byte(nil), raw...), max)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out []byte
	inObject := []bool{} // per open container: is it an object
	expectKey := false
	for len(out) <= max {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				inObject = append(inObject, true)
				expectKey = true
			case '[':
				inObject = append(inObject, false)
				expectKey = false
			default:
				inObject = inObject[:len(inObject)-1]
				expectKey = len(inObject) > 0 && inObject[len(inObject)-1]
			}
			continue
		case string:
			if expectKey {
				expectKey = false
				continue
			}
			out = appendLeaf(out, t)
		case json.Number:
			out = appendLeaf(out, string(t))
		}
		expectKey = len(inObject) > 0 && inObject[len(inObject)-1]
	}
	if len(out) == 0 {
		return nil, false
	}
	return bound(out, max)
}

func appendLeaf(out []byte, s string) []byte {
	if s == "" {
		return out
	}
	if len(out) > 0 {
		out = append(out, '\n')
	}
	return append(out, s...)
}

// bound cuts b to at most max bytes at a rune boundary.
func bound(b []byte, max int) ([]byte, bool) {
	if len(b) <= max {
		return b, false
	}
	cut := max
	for cut > 0 && cut > max-utf8.UTFMax && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return b[:cut], true
}

// ResultResource is the path a result's source registration carries for
// the resource the result came from, given the call's grant target (its
// canonical form): the plain path of a path target, the canonical form of
// a URL, email, raw or digest target ("url:https://x/y", "raw:msg-17"),
// and "" for a shell or list target or none. The issuer gives it effect
// only for a tool whose policy surface declares result_from target: there
// it raises the result by the policy's path and resource levels, and
// protects it by the protected paths, as a file read is.
func ResultResource(target string) string {
	method, rest, ok := strings.Cut(target, ":")
	if !ok || rest == "" {
		return ""
	}
	switch method {
	case "path":
		if checkText("path", rest, MaxPathLen) != nil || !strings.HasPrefix(rest, "/") {
			return ""
		}
		return rest
	case "url", "email", "raw", "digest":
		if checkText("path", target, MaxPathLen) != nil {
			return ""
		}
		return target
	}
	return ""
}
