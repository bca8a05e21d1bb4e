package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxSettingsBytes bounds a settings file InstallHooks will read.
const MaxSettingsBytes = 4 << 20

// ErrSettings wraps every reason a settings file cannot be merged; the file
// is then left alone.
var ErrSettings = errors.New("settings")

// HookSpec is the set of hook entries writ installs into a harness's
// settings ({"hooks": {"<Event>": [{"matcher": ..., "hooks": [handler]}]}},
// the layout both Claude Code's settings.json and Codex's hooks.json use).
type HookSpec struct {
	Events []string // hook events to gate or observe, e.g. PreToolUse, SessionStart
	// Matcher is the matcher of the groups of tool events; "" leaves the
	// key out. Groups of other events (UserPromptSubmit, SessionStart)
	// never get one: both harnesses run a matcher-less group for every
	// prompt and every kind of session start.
	Matcher string
	Command string // the handler's shell command
	Timeout int    // the handler's timeout in seconds; 0 leaves it out
	// Owns recognises a handler command writ installed, whatever the
	// binary's path or the flags it was installed with.
	Owns func(command string) bool
}

// ClaudeCodeEvents are the Claude Code events writ installs for: the tool
// events it gates and records, and the events whose content it registers
// as sources (the prompt; the instruction files at session start).
var ClaudeCodeEvents = []string{EventPreToolUse, EventPostToolUse, EventPostToolUseFailure, EventUserPromptSubmit, EventSessionStart}

// CodexEvents are the Codex events writ installs for. Codex's
// UserPromptSubmit and SessionStart hooks get the same session_id, cwd,
// prompt and source fields as Claude Code's.
var CodexEvents = []string{EventPreToolUse, EventPostToolUse, EventUserPromptSubmit, EventSessionStart}

// InstallHooks merges spec into the settings document doc (empty means a
// new file) and returns the new document and whether it changed. It never
// removes or reorders anything: other keys, other events and other
// handlers stay as they were, in their order. A handler writ installed
// earlier (spec.Owns) is updated in place, so installing twice changes
// nothing the second time. The output is indented with two spaces.
func InstallHooks(doc []byte, spec HookSpec) ([]byte, bool, error) {
	if spec.Command == "" || spec.Owns == nil || len(spec.Events) == 0 {
		return nil, false, fmt.Errorf("%w: incomplete hook spec", ErrSettings)
	}
	root, err := parseSettings(doc)
	if err != nil {
		return nil, false, err
	}
	hooks, err := root.childObject("hooks", true)
	if err != nil {
		return nil, false, err
	}
	for _, ev := range spec.Events {
		groups, err := hooks.childArray(ev, "hooks."+ev)
		if err != nil {
			return nil, false, err
		}
		found := false
		for gi, g := range groups {
			gobj, ok := g.(*object)
			if !ok {
				continue
			}
			handlers, ok := gobj.get("hooks").([]any)
			if !ok {
				continue
			}
			for hi, h := range handlers {
				hobj, ok := h.(*object)
				if !ok || !spec.ownsHandler(hobj) {
					continue
				}
				found = true
				hobj.set("type", "command")
				hobj.set("command", spec.Command)
				if spec.Timeout > 0 {
					hobj.set("timeout", json.Number(strconv.Itoa(spec.Timeout)))
				}
				handlers[hi] = hobj
			}
			groups[gi] = gobj
		}
		if !found {
			groups = append(groups, spec.group(ev))
		}
		hooks.set(ev, groups)
	}
	out := render(root)
	return out, !sameJSON(doc, out), nil
}

// UninstallHooks removes every handler owns recognises, then any group,
// event list and hooks object left empty by that removal, and returns the
// new document and whether it changed. Nothing else is touched.
func UninstallHooks(doc []byte, owns func(command string) bool) ([]byte, bool, error) {
	root, err := parseSettings(doc)
	if err != nil {
		return nil, false, err
	}
	spec := HookSpec{Owns: owns}
	hooks, ok := root.get("hooks").(*object)
	if !ok {
		return doc, false, nil
	}
	removed := false
	for _, ev := range append([]string(nil), hooks.keys...) {
		groups, ok := hooks.get(ev).([]any)
		if !ok {
			continue
		}
		keptGroups := groups[:0:0]
		evRemoved := false
		for _, g := range groups {
			gobj, ok := g.(*object)
			handlers, hok := gobj.getOK("hooks")
			hs, aok := handlers.([]any)
			if !ok || !hok || !aok {
				keptGroups = append(keptGroups, g)
				continue
			}
			kept := hs[:0:0]
			for _, h := range hs {
				if hobj, ok := h.(*object); ok && spec.ownsHandler(hobj) {
					evRemoved = true
					continue
				}
				kept = append(kept, h)
			}
			if len(kept) == 0 && len(hs) > 0 {
				continue // emptied by us
			}
			gobj.set("hooks", kept)
			keptGroups = append(keptGroups, gobj)
		}
		if !evRemoved {
			continue
		}
		removed = true
		if len(keptGroups) == 0 {
			hooks.delete(ev)
		} else {
			hooks.set(ev, keptGroups)
		}
	}
	if !removed {
		return doc, false, nil
	}
	if len(hooks.keys) == 0 {
		root.delete("hooks")
	}
	return render(root), true, nil
}

func (s HookSpec) ownsHandler(h *object) bool {
	cmd, ok := h.get("command").(string)
	return ok && (cmd == s.Command || s.Owns(cmd))
}

func (s HookSpec) group(event string) *object {
	h := &object{}
	h.set("type", "command")
	h.set("command", s.Command)
	if s.Timeout > 0 {
		h.set("timeout", json.Number(strconv.Itoa(s.Timeout)))
	}
	g := &object{}
	if s.Matcher != "" && IsToolEventName(event) {
		g.set("matcher", s.Matcher)
	}
	g.set("hooks", []any{h})
	return g
}

// OwnsCommand returns a matcher for hook commands that run the
// worker-agent's hook for harness: writ's wrapped command (see
// WrapHookCommand; any binary path), or the bare form earlier versions
// installed — after optional VAR=value words, a program named
// worker-agent (any directory) followed by "hook <harness>".
func OwnsCommand(harness string) func(string) bool {
	return func(cmd string) bool {
		_, ok := ParseHookCommand(harness, cmd)
		return ok
	}
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// shellWords splits a POSIX shell command line into words: blanks separate,
// single quotes are literal, double quotes and backslashes escape. It
// reports false for an unterminated quote. Operators (;, |, &&) are not
// recognised: a command using them is not one writ installed.
func shellWords(s string) ([]string, bool) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, false
			}
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, true
}

// ShellQuote quotes s for a POSIX shell when it needs quoting.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// object is a JSON object that remembers its key order.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) any { v, _ := o.getOK(k); return v }

func (o *object) getOK(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

func (o *object) set(k string, v any) {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) delete(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, kk := range o.keys {
		if kk == k {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

// childObject returns the object at key k, creating it when create is set
// and it is absent; a value of another type is an error.
func (o *object) childObject(k string, create bool) (*object, error) {
	v, ok := o.getOK(k)
	if !ok || v == nil {
		if !create {
			return nil, nil
		}
		c := &object{}
		o.set(k, c)
		return c, nil
	}
	c, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not an object", ErrSettings, k)
	}
	return c, nil
}

// childArray returns the array at key k (nil when absent).
func (o *object) childArray(k, path string) ([]any, error) {
	v, ok := o.getOK(k)
	if !ok || v == nil {
		return nil, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not an array", ErrSettings, path)
	}
	return a, nil
}

// parseSettings parses a settings document into ordered values. An empty
// document is an empty object; the top level must be an object; duplicate
// keys are refused (which one a harness honours is not ours to guess).
func parseSettings(doc []byte) (*object, error) {
	if len(doc) > MaxSettingsBytes {
		return nil, fmt.Errorf("%w: file is larger than %d bytes", ErrSettings, MaxSettingsBytes)
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return &object{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	v, err := parseValue(dec, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrSettings)
	}
	root, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("%w: the top level is not a JSON object", ErrSettings)
	}
	return root, nil
}

func parseValue(dec *json.Decoder, path string, depth int) (any, error) {
	if depth > 100 {
		return nil, fmt.Errorf("%w: nested too deeply at %s", ErrSettings, path)
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: not valid JSON: %v", ErrSettings, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("%w: not valid JSON: %v", ErrSettings, err)
				}
				k := kt.(string)
				if _, dup := o.vals[k]; dup {
					return nil, fmt.Errorf("%w: duplicate key %q in %s", ErrSettings, k, orRoot(path))
				}
				v, err := parseValue(dec, path+"."+k, depth+1)
				if err != nil {
					return nil, err
				}
				o.set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("%w: not valid JSON: %v", ErrSettings, err)
			}
			return o, nil
		case '[':
			a := []any{}
			for i := 0; dec.More(); i++ {
				v, err := parseValue(dec, fmt.Sprintf("%s[%d]", path, i), depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("%w: not valid JSON: %v", ErrSettings, err)
			}
			return a, nil
		}
	}
	return tok, nil // string, json.Number, bool or nil
}

func orRoot(p string) string {
	if p == "" {
		return "the top level"
	}
	return strings.TrimPrefix(p, ".")
}

// render writes v as JSON indented with two spaces, keys in their order,
// followed by a newline.
func render(v any) []byte {
	var b bytes.Buffer
	writeValue(&b, v, 0)
	b.WriteByte('\n')
	return b.Bytes()
}

func writeValue(b *bytes.Buffer, v any, depth int) {
	indent := func(d int) {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat("  ", d))
	}
	switch t := v.(type) {
	case *object:
		if len(t.keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			indent(depth + 1)
			writeString(b, k)
			b.WriteString(": ")
			writeValue(b, t.vals[k], depth+1)
		}
		indent(depth)
		b.WriteByte('}')
	case []any:
		if len(t) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			indent(depth + 1)
			writeValue(b, e, depth+1)
		}
		indent(depth)
		b.WriteByte(']')
	case string:
		writeString(b, t)
	case json.Number:
		b.WriteString(t.String())
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case nil:
		b.WriteString("null")
	}
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // strings always encode
	b.Truncate(b.Len() - 1)
}

// sameJSON reports whether a and b hold the same ordered document (an
// empty a is the empty object).
func sameJSON(a, b []byte) bool {
	pa, err := parseSettings(a)
	if err != nil {
		return false
	}
	pb, err := parseSettings(b)
	if err != nil {
		return false
	}
	return bytes.Equal(render(pa), render(pb))
}

// SameSettings reports whether two settings documents hold the same
// ordered JSON (an empty document is the empty object), whatever their
// formatting. A document that does not parse is never the same.
func SameSettings(a, b []byte) bool { return sameJSON(a, b) }

// InstalledCommands returns, by event, the hook commands in the settings
// document doc that owns recognises, in the order they appear.
func InstalledCommands(doc []byte, owns func(command string) bool) (map[string][]string, error) {
	root, err := parseSettings(doc)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	hooks, ok := root.get("hooks").(*object)
	if !ok {
		return out, nil
	}
	for _, ev := range hooks.keys {
		groups, _ := hooks.get(ev).([]any)
		for _, g := range groups {
			gobj, _ := g.(*object)
			handlers, _ := gobj.get("hooks").([]any)
			for _, h := range handlers {
				hobj, _ := h.(*object)
				if cmd, ok := hobj.get("command").(string); ok && owns(cmd) {
					out[ev] = append(out[ev], cmd)
				}
			}
		}
	}
	return out, nil
}
