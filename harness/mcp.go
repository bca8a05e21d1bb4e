package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/writ-dev/writ/grants"
)

// MCP methods the proxy acts on.
const (
	MethodToolsCall = "tools/call"
	MethodCancelled = "notifications/cancelled"
)

// DefaultMaxLine bounds one message from the MCP client. A longer line is
// not forwarded (the proxy cannot inspect it) and gets a parse error.
const DefaultMaxLine = 64 << 20

// MCPToolName is the name writ grants an MCP tool under, the one Claude
// Code uses too: mcp__<server>__<tool>. A policy written for the Claude
// Code hook (e.g. a lane denying "mcp__*") applies unchanged to the proxy.
func MCPToolName(server, tool string) string { return "mcp__" + server + "__" + tool }

// ToolCall is one tools/call request from the MCP client.
type ToolCall struct {
	ID   json.RawMessage // the JSON-RPC id, as sent
	Name string          // params.name
	Args json.RawMessage // params.arguments ({} when absent)
}

// IDKey is the call's id in a canonical textual form: the key the proxy
// tracks it under and the call id of its idempotency key.
func (c ToolCall) IDKey() string { return idKey(c.ID) }

// Verdict is a Gate's decision on one tools/call.
type Verdict struct {
	Allow bool
	// Refusal is the text the model sees in the isError result when the
	// call is not forwarded.
	Refusal string
	// Ref is handed back to Done (e.g. the spent grant's id).
	Ref any
}

// Gate decides the tools/call requests a Proxy sees. Both methods are
// called concurrently.
type Gate interface {
	// Check decides one call before it reaches the upstream server.
	Check(ctx context.Context, c ToolCall) Verdict
	// Done reports how the upstream server answered a forwarded call:
	// grants.OutcomeConfirmed for a result, OutcomeFailed for an isError
	// result or a JSON-RPC error, OutcomeUnknown when the server went
	// away without answering. result is the response's result member as
	// the server sent it for a confirmed call (nil otherwise): what the
	// call brought into the session, which a Gate registers as a source
	// (see MCPResultText).
	Done(ctx context.Context, c ToolCall, ref any, outcome string, result json.RawMessage)
}

// Proxy is an MCP stdio proxy: newline-delimited JSON-RPC passes through
// unchanged in both directions, except that each tools/call request from
// the client is held until the Gate decides it. A refused call is answered
// by the proxy with a normal result carrying isError and the refusal text
// (not a JSON-RPC error), so the model sees why; the upstream server never
// sees it. Requests are independent: one call waiting for its decision
// holds up nothing else.
//
// The proxy fails closed where the protocol leaves room: a client line
// that is not JSON, or longer than MaxLine, is answered with a parse error
// and not forwarded (the server might read it differently); a tools/call
// without an id (a notification, which would get no answer to carry a
// refusal) is dropped; a batch holding a tools/call is split into single
// messages so each call is decided on its own.
type Proxy struct {
	Gate    Gate
	MaxLine int                           // DefaultMaxLine when zero
	Logf    func(format string, a ...any) // diagnostics; nil for none

	toClient, toUpstream lockedWriter

	mu        sync.Mutex
	checking  map[string]*[][]byte // id -> cancellations held until the decision
	forwarded map[string]forwardedCall
	closed    bool           // the server is gone: no new checks
	checks    sync.WaitGroup // Check goroutines; Add only under mu while !closed
	reports   sync.WaitGroup // Done goroutines
}

type forwardedCall struct {
	call ToolCall
	ref  any
}

// MCPResultText returns the text a tools/call result brings into the
// session, bounded by max bytes (cut at a rune boundary): the text of its
// content items (text items, and the text of embedded resources), then
// the string and number leaves of its structuredContent, one per line. An
// error result, or one with no text, has none.
func MCPResultText(result json.RawMessage, max int) []byte {
	var r struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Resource struct {
				Text string `json:"text"`
			} `json:"resource"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	}
	if json.Unmarshal(result, &r) != nil || r.IsError {
		return nil
	}
	var out []byte
	for _, c := range r.Content {
		if len(out) > max {
			break
		}
		switch c.Type {
		case "text":
			out = appendLeaf(out, c.Text)
		case "resource":
			out = appendLeaf(out, c.Resource.Text)
		}
	}
	if len(out) <= max {
		if st, _ := ResponseText(r.Structured, max); len(st) > 0 {
			out = appendLeaf(out, string(st))
		}
	}
	b, _ := bound(out, max)
	return b
}

type lockedWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// writeLine writes line and a newline under the lock, so concurrent
// messages never interleave.
func (l *lockedWriter) writeLine(line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if _, l.err = l.w.Write(line); l.err == nil {
		_, l.err = l.w.Write(newline)
	}
	return l.err
}

var newline = []byte{'\n'}

// Run proxies until the upstream server closes its output. Reading the
// client ends at EOF, which closes toUpstream once every call waiting for
// a decision is settled; the server is expected to exit then. Run waits
// for the Gate's Done reports (calls forwarded but never answered are
// reported unknown) and returns the first write error to the client, if
// any. ctx bounds the Gate's work.
func (p *Proxy) Run(ctx context.Context, client io.Reader, toClient io.Writer, upstream io.Reader, toUpstream io.WriteCloser) error {
	if p.MaxLine <= 0 {
		p.MaxLine = DefaultMaxLine
	}
	p.toClient.w, p.toUpstream.w = toClient, toUpstream
	p.checking = map[string]*[][]byte{}
	p.forwarded = map[string]forwardedCall{}

	go func() {
		p.readClient(ctx, bufio.NewReaderSize(client, 64<<10))
		p.checks.Wait()
		_ = toUpstream.Close()
	}()
	p.readUpstream(ctx, bufio.NewReaderSize(upstream, 64<<10))

	// The server is gone: a call it never answered has an unknown outcome.
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.checks.Wait()
	p.mu.Lock()
	for k, f := range p.forwarded {
		delete(p.forwarded, k)
		p.report(ctx, f, grants.OutcomeUnknown, nil)
	}
	p.mu.Unlock()
	p.reports.Wait()
	p.toClient.mu.Lock()
	defer p.toClient.mu.Unlock()
	return p.toClient.err
}

func (p *Proxy) logf(format string, a ...any) {
	if p.Logf != nil {
		p.Logf(format, a...)
	}
}

// readClient handles client messages until EOF or a failed write upstream.
func (p *Proxy) readClient(ctx context.Context, r *bufio.Reader) {
	for {
		line, tooLong, err := readLine(r, p.MaxLine)
		if tooLong {
			p.logf("dropped a client message longer than %d bytes", p.MaxLine)
			p.replyError(nil, -32700, fmt.Sprintf("Parse error: message longer than %d bytes", p.MaxLine))
		} else if line != nil {
			if werr := p.fromClient(ctx, line); werr != nil {
				p.logf("writing to the MCP server: %v", werr)
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				p.logf("reading the MCP client: %v", err)
			}
			return
		}
	}
}

// fromClient handles one client line; it returns an error only when the
// upstream server can no longer be written.
func (p *Proxy) fromClient(ctx context.Context, line []byte) error {
	trimmed := bytes.TrimSpace(line)
	switch {
	case len(trimmed) == 0:
		return nil // blank lines carry no message
	case trimmed[0] == '[':
		return p.fromClientBatch(ctx, line, trimmed)
	}
	msg, err := parseMessage(trimmed)
	if err != nil {
		p.logf("refused a client line that is not a JSON-RPC object: %v", err)
		p.replyError(nil, -32700, "Parse error: "+err.Error())
		return nil
	}
	return p.handle(ctx, line, msg)
}

func (p *Proxy) fromClientBatch(ctx context.Context, line, trimmed []byte) error {
	var elems []json.RawMessage
	if err := json.Unmarshal(trimmed, &elems); err != nil {
		p.replyError(nil, -32700, "Parse error: "+err.Error())
		return nil
	}
	msgs := make([]message, len(elems))
	split := false
	for i, e := range elems {
		m, err := parseMessage(e)
		if err != nil {
			p.replyError(nil, -32600, "Invalid Request: batch element "+fmt.Sprint(i)+": "+err.Error())
			return nil
		}
		msgs[i] = m
		if m.method == MethodToolsCall || m.method == MethodCancelled {
			split = true
		}
	}
	if !split {
		return p.toUpstream.writeLine(line)
	}
	for i, m := range msgs {
		if err := p.handle(ctx, elems[i], m); err != nil {
			return err
		}
	}
	return nil
}

// handle forwards one client message, holding tools/call for the Gate.
func (p *Proxy) handle(ctx context.Context, raw []byte, m message) error {
	switch m.method {
	case MethodToolsCall:
		p.toolsCall(ctx, raw, m)
		return nil
	case MethodCancelled:
		if id, ok := cancelledID(m); ok {
			p.mu.Lock()
			held, waiting := p.checking[id]
			if waiting {
				*held = append(*held, append([]byte(nil), raw...))
			}
			p.mu.Unlock()
			if waiting {
				return nil // forwarded after the request, or dropped with it
			}
		}
	}
	return p.toUpstream.writeLine(raw)
}

// toolsCall decides one tools/call in its own goroutine.
func (p *Proxy) toolsCall(ctx context.Context, raw []byte, m message) {
	if m.id == nil {
		p.logf("dropped a tools/call without an id: a notification cannot carry writ's refusal, so it is never run")
		return
	}
	call, perr := m.toolCall()
	key := idKey(m.id)
	raw = append([]byte(nil), raw...)
	p.mu.Lock()
	_, busy := p.checking[key]
	_, sent := p.forwarded[key]
	closed := p.closed
	if !busy && !sent && !closed {
		p.checking[key] = new([][]byte)
		p.checks.Add(1)
	}
	p.mu.Unlock()
	switch {
	case closed:
		p.replyRefusal(m.id, "writ did not run this tool call: the MCP server has exited")
		return
	case busy || sent:
		p.replyError(m.id, -32600, "Invalid Request: id "+key+" is already in flight")
		return
	}
	go func() {
		defer p.checks.Done()
		var v Verdict
		if perr != nil {
			v = Verdict{Refusal: "writ refused this tool call: " + perr.Error()}
		} else {
			v = p.Gate.Check(ctx, call)
		}
		p.mu.Lock()
		held := *p.checking[key]
		delete(p.checking, key)
		if v.Allow {
			p.forwarded[key] = forwardedCall{call: call, ref: v.Ref}
		}
		p.mu.Unlock()
		if !v.Allow {
			p.replyRefusal(m.id, v.Refusal)
			return
		}
		if err := p.toUpstream.writeLine(raw); err != nil {
			p.logf("writing to the MCP server: %v", err)
			return
		}
		for _, c := range held {
			_ = p.toUpstream.writeLine(c)
		}
	}()
}

// readUpstream passes server messages to the client and reports the
// answers to forwarded calls.
func (p *Proxy) readUpstream(ctx context.Context, r *bufio.Reader) {
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(line, []byte("\n"))
			if !p.fromUpstream(ctx, line) {
				p.deliver(line)
			}
		}
		if err != nil {
			if err != io.EOF {
				p.logf("reading the MCP server: %v", err)
			}
			return
		}
	}
}

func (p *Proxy) deliver(line []byte) {
	if werr := p.toClient.writeLine(line); werr != nil {
		p.logf("writing to the MCP client: %v", werr)
	}
}

// fromUpstream reports the outcome of a forwarded call when line answers
// one. It runs before the line reaches the client. A line that is one
// answer to a forwarded call is delivered to the client only once the
// Gate's Done has returned (in its own goroutine; other messages go on),
// as a harness runs the model on only once its PostToolUse hook has
// registered the result: the model cannot copy from a result before the
// result is a registered source. fromUpstream reports true when it
// delivers the line itself so.
func (p *Proxy) fromUpstream(ctx context.Context, line []byte) bool {
	p.mu.Lock()
	pending := len(p.forwarded)
	p.mu.Unlock()
	if pending == 0 {
		return false
	}
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return false
	}
	var msgs []json.RawMessage
	if trimmed[0] == '[' {
		if json.Unmarshal(trimmed, &msgs) != nil {
			return false
		}
	} else {
		msgs = []json.RawMessage{trimmed}
		if m, err := parseMessage(trimmed); err == nil && m.method == "" && m.id != nil {
			key := idKey(m.id)
			p.mu.Lock()
			f, ok := p.forwarded[key]
			delete(p.forwarded, key)
			p.mu.Unlock()
			if ok {
				outcome := m.outcome()
				var result json.RawMessage
				if outcome == grants.OutcomeConfirmed {
					result = m.fields["result"]
				}
				p.reports.Add(1)
				go func() {
					defer p.reports.Done()
					p.Gate.Done(ctx, f.call, f.ref, outcome, result)
					p.deliver(line)
				}()
				return true
			}
			return false
		}
	}
	for _, raw := range msgs {
		m, err := parseMessage(raw)
		if err != nil || m.method != "" || m.id == nil {
			continue
		}
		key := idKey(m.id)
		p.mu.Lock()
		f, ok := p.forwarded[key]
		delete(p.forwarded, key)
		p.mu.Unlock()
		if ok {
			outcome := m.outcome()
			var result json.RawMessage
			if outcome == grants.OutcomeConfirmed {
				result = m.fields["result"]
			}
			p.report(ctx, f, outcome, result)
		}
	}
	return false
}

func (p *Proxy) report(ctx context.Context, f forwardedCall, outcome string, result json.RawMessage) {
	p.reports.Add(1)
	go func() {
		defer p.reports.Done()
		p.Gate.Done(ctx, f.call, f.ref, outcome, result)
	}()
}

// replyRefusal answers a refused call with an isError result.
func (p *Proxy) replyRefusal(id json.RawMessage, text string) {
	type content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  struct {
			Content []content `json:"content"`
			IsError bool      `json:"isError"`
		} `json:"result"`
	}{JSONRPC: "2.0", ID: id}
	resp.Result.Content = []content{{Type: "text", Text: text}}
	resp.Result.IsError = true
	p.replyJSON(resp)
}

// replyError answers with a JSON-RPC error (id null when nil).
func (p *Proxy) replyError(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	p.replyJSON(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
}

func (p *Proxy) replyJSON(v any) {
	b, err := marshal(v)
	if err != nil {
		p.logf("encoding a reply: %v", err)
		return
	}
	if err := p.toClient.writeLine(bytes.TrimSuffix(b, []byte("\n"))); err != nil {
		p.logf("writing to the MCP client: %v", err)
	}
}

// message is the part of a JSON-RPC message the proxy looks at. Keys are
// matched exactly (encoding/json's struct decoding would also accept
// "Method" or "METHOD", which a server reading the same line would not, so
// a tools/call could slip past under a second, differently cased key).
type message struct {
	method string
	id     json.RawMessage // nil when absent or null
	fields map[string]json.RawMessage
}

var errNotObject = errors.New("not a JSON object")

func parseMessage(raw []byte) (message, error) {
	var m message
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return m, errNotObject
	}
	if err := json.Unmarshal(raw, &m.fields); err != nil {
		return m, err
	}
	if mr, ok := m.fields["method"]; ok {
		// A method that is not a string is no method the server runs.
		_ = json.Unmarshal(mr, &m.method)
	}
	if id, ok := m.fields["id"]; ok && !bytes.Equal(bytes.TrimSpace(id), []byte("null")) {
		m.id = id
	}
	return m, nil
}

// toolCall extracts params.name and params.arguments. An error is a call
// the proxy refuses itself.
func (m message) toolCall() (ToolCall, error) {
	c := ToolCall{ID: m.id, Args: json.RawMessage("{}")}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(m.fields["params"], &params); err != nil || params == nil {
		return c, errors.New("params must be an object with a tool name")
	}
	if err := json.Unmarshal(params["name"], &c.Name); err != nil || c.Name == "" {
		return c, errors.New("params.name must be a non-empty string")
	}
	if a, ok := params["arguments"]; ok && !bytes.Equal(bytes.TrimSpace(a), []byte("null")) {
		a = bytes.TrimSpace(a)
		if len(a) == 0 || a[0] != '{' {
			return c, errors.New("params.arguments must be an object")
		}
		c.Args = a
	}
	return c, nil
}

// outcome classifies a response: a JSON-RPC error or an isError result
// failed, any other result confirmed.
func (m message) outcome() string {
	if e, ok := m.fields["error"]; ok && !bytes.Equal(bytes.TrimSpace(e), []byte("null")) {
		return grants.OutcomeFailed
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(m.fields["result"], &r) == nil && r.IsError {
		return grants.OutcomeFailed
	}
	return grants.OutcomeConfirmed
}

func cancelledID(m message) (string, bool) {
	var params map[string]json.RawMessage
	if json.Unmarshal(m.fields["params"], &params) != nil {
		return "", false
	}
	id, ok := params["requestId"]
	if !ok {
		return "", false
	}
	return idKey(id), true
}

// idKey is the compact form of a JSON-RPC id: "7" and "7 " are the same
// id, "7" and "\"7\"" are not.
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(bytes.TrimSpace(id))
	}
	return b.String()
}

// readLine reads one newline-terminated line of at most max bytes (without
// the newline). A longer line is consumed and reported tooLong with a nil
// line. At EOF it returns a final unterminated line, then io.EOF.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		frag, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(frag) > max+1 { // +1: the newline
				tooLong, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if tooLong {
			return nil, true, err
		}
		if len(line) == 0 && err != nil {
			return nil, false, err
		}
		return bytes.TrimSuffix(line, []byte("\n")), false, err
	}
}
