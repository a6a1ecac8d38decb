package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// openAIResponses is OpenAI's Responses API: POST {base}/responses.
//
// instructions and leading system or developer messages are the system
// prompt (sent back as they came). Each user message is a domain user
// message; each tool output (function_call_output, and any *_call_output
// with a call_id) a domain tool message; and every run of items between
// them that the model produced — assistant messages, reasoning, function
// calls (and any *_call with a call_id) and items yet unknown — one domain
// assistant message, its calls as tool calls and the whole run kept
// verbatim in order (raw.go). A request that continues a conversation the
// provider stores (previous_response_id, conversation) is forwarded
// unchanged: the client no longer holds the history.
type openAIResponses struct{ memo *memo }

const doorOpenAIResponses = "openai.responses"

func (openAIResponses) name() string     { return doorOpenAIResponses }
func (openAIResponses) shape() wireShape { return shapeOpenAI }
func (openAIResponses) upstream(cfg *Config) string {
	return cfg.OpenAIBaseURL + "/responses"
}

type rItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
}

func (it *rItem) isMessage() bool { return it.Type == "message" || it.Type == "" && it.Role != "" }

func (d openAIResponses) parse(b *requestBody) (*conversation, error) {
	fields := b.fields
	c := &conversation{}
	if err := commonFields(fields, c); err != nil {
		return nil, err
	}
	for _, k := range []string{"previous_response_id", "conversation"} {
		if v, ok := fields[k]; ok && string(v) != "null" && string(v) != `""` {
			c.passthrough = k + " is set: the provider holds this conversation, so contextd forwards the request unchanged and does not manage its context"
			return c, nil
		}
	}
	tools, err := openAITools(d.memo, fields["tools"], false)
	if err != nil {
		return nil, err
	}
	c.tools = tools
	var system []string
	if v, ok := fields["instructions"]; ok && string(v) != "null" {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, chat.Invalid("instructions", "must be a string")
		}
		system = append(system, s)
	}
	raws, err := rInput(b)
	if err != nil {
		return nil, err
	}
	start := 0
	for ; start < len(raws); start++ {
		var it rItem
		if k, ok := rKindOf(raws[start]); !ok || !k.isMessage() || k.role != "system" && k.role != "developer" {
			break
		}
		if err := json.Unmarshal(raws[start], &it); err != nil {
			return nil, chat.Invalid(fmt.Sprintf("input[%d]", start), "must be an item with a type or a role")
		}
		text, err := rText(it.Content, fmt.Sprintf("input[%d].content", start))
		if err != nil {
			return nil, err
		}
		system = append(system, text)
	}
	e, runs, err := rRequestMessages(d.memo, raws[start:], start)
	if err != nil {
		return nil, err
	}
	if len(e.msgs) == 0 {
		return nil, chat.Invalid("input", "must have at least one item after the system messages")
	}
	c.reserve(len(e.msgs))
	c.add(e)
	c.lead = start
	c.runs = make(map[[32]byte][]json.RawMessage, len(runs))
	for i, run := range runs {
		keepOwn(c.runs, c.digests[i], run, sameRaws)
	}
	c.system = strings.Join(system, "\n\n")
	return c, nil
}

// rInput is the request's input items: an array's come split from the
// body's one scan; a string is one user message.
func rInput(b *requestBody) ([]json.RawMessage, error) {
	if raws, ok := b.array("input"); ok {
		return raws, nil
	}
	return rStringInput(b.fields["input"])
}

// rStringInput reads an input that is not an array (rInput): a string is
// one user message; anything else is refused.
func rStringInput(input json.RawMessage) ([]json.RawMessage, error) {
	input = bytes.TrimSpace(input)
	if len(input) == 0 || string(input) == "null" {
		return nil, chat.Invalid("input", "is required")
	}
	var s string
	if input[0] != '"' || json.Unmarshal(input, &s) != nil {
		return nil, chat.Invalid("input", "must be a string or an array of items")
	}
	raw, _ := json.Marshal(map[string]string{"role": "user", "content": s})
	return []json.RawMessage{raw}, nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// rText is the text of a message content (a string or content parts).
func rText(content json.RawMessage, field string) (string, error) {
	content = bytes.TrimSpace(content)
	if len(content) == 0 || string(content) == "null" {
		return "", nil
	}
	if content[0] == '"' {
		var s string
		if err := json.Unmarshal(content, &s); err != nil {
			return "", chat.Invalid(field, "must be a string or an array of content parts")
		}
		return s, nil
	}
	var parts []struct {
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if err := json.Unmarshal(content, &parts); err != nil {
		return "", chat.Invalid(field, "must be a string or an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		b.WriteString(p.Refusal)
	}
	return b.String(), nil
}

// isCall and isOutput classify tool items by their type and call_id, so
// calls the domain does not name (custom tools, shell, computer use) stay
// paired with their outputs through compaction.
func (it *rItem) isCall() bool {
	return it.CallID != "" && strings.HasSuffix(it.Type, "_call")
}

func (it *rItem) isOutput() bool {
	return it.CallID != "" && strings.HasSuffix(it.Type, "_call_output")
}

// rToDomain groups items into domain messages (see openAIResponses); runs
// are the items each message was made of, as the client sent them.
func rToDomain(memo *memo, raws []json.RawMessage, items []rItem, offset int) (memoEntry, [][]json.RawMessage, error) {
	var out memoEntry
	var runs [][]json.RawMessage
	var group chat.Message
	var groupRaw []json.RawMessage
	var groupExtra []string
	take := func(e memoEntry, run []json.RawMessage) {
		out.take(e)
		runs = append(runs, run)
	}
	flush := func() {
		if len(groupRaw) == 0 {
			return
		}
		if len(group.Parts) == 0 {
			group.Parts = []chat.Part{{Type: chat.PartText}}
		}
		take(rFinish(memo, group, groupRaw, groupExtra), groupRaw)
		group, groupRaw, groupExtra = chat.Message{}, nil, nil
	}
	for i := range items {
		it := &items[i]
		f := fmt.Sprintf("input[%d]", i+offset)
		switch {
		case it.isMessage() && it.Role == "assistant":
			text, err := rText(it.Content, f+".content")
			if err != nil {
				return memoEntry{}, nil, err
			}
			group.Role = chat.RoleAssistant
			groupRaw = append(groupRaw, raws[i])
			if text != "" {
				group.Parts = append(group.Parts, chat.Part{Type: chat.PartText, Text: text})
			}
		case it.isMessage():
			flush()
			m, extra, err := rUser(it, f)
			if err != nil {
				return memoEntry{}, nil, err
			}
			take(rFinish(memo, m, raws[i:i+1], extra), raws[i:i+1])
		case it.isOutput():
			flush()
			text, err := rOutput(it.Output, f+".output")
			if err != nil {
				return memoEntry{}, nil, err
			}
			m := chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: it.CallID, Content: text}}}}
			take(rFinish(memo, m, raws[i:i+1], nil), raws[i:i+1])
		case it.isCall():
			args := it.Arguments
			if it.Type != "function_call" && args == "" {
				args = it.Input
			}
			name := it.Name
			if name == "" {
				name = it.Type
			}
			group.Role = chat.RoleAssistant
			groupRaw = append(groupRaw, raws[i])
			group.Parts = append(group.Parts, chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: it.CallID, Name: name, Arguments: args}})
		default:
			// Reasoning, server-side tool calls, item references and
			// items yet unknown: carried verbatim with the run.
			group.Role = chat.RoleAssistant
			groupRaw = append(groupRaw, raws[i])
			groupExtra = append(groupExtra, compactionDigest(it.Type, raws[i])...)
		}
	}
	flush()
	return out, runs, nil
}

// rFinish keeps the raw items of m when m does not write them again, and
// stamps its digest. The memo is not asked for raws first: a request's
// run is one message, which rRequestMessages just looked up and missed
// (and an answer's output has no memo).
func rFinish(memo *memo, m chat.Message, raws []json.RawMessage, extra []string) memoEntry {
	key := runKey(doorOpenAIResponses, raws)
	raw, _ := json.Marshal(raws)
	gen, _ := json.Marshal(rFromDomain(&m, nil))
	setRaw(&m, doorOpenAIResponses, raw, gen)
	stamp(&m, extra)
	return memo.put(key, len(raw), []chat.Message{m})
}

// rUser converts a user, system or developer message item.
func rUser(it *rItem, f string) (chat.Message, []string, error) {
	m := chat.Message{Role: chat.RoleUser}
	switch it.Role {
	case "user":
	case "system", "developer":
		m.Role = chat.RoleSystem
	default:
		return m, nil, chat.Invalid(f+".role", "must be one of user, assistant, system, developer (not %q)", it.Role)
	}
	content := bytes.TrimSpace(it.Content)
	var extra []string
	if len(content) > 0 && content[0] == '[' {
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL string `json:"image_url"`
			FileID   string `json:"file_id"`
			Detail   string `json:"detail"`
		}
		if err := json.Unmarshal(content, &parts); err != nil {
			return m, nil, chat.Invalid(f+".content", "must be a string or an array of content parts")
		}
		var rawParts []json.RawMessage
		_ = json.Unmarshal(content, &rawParts)
		for j, p := range parts {
			switch p.Type {
			case "input_text", "output_text", "text":
				m.Parts = append(m.Parts, chat.Part{Type: chat.PartText, Text: p.Text})
			case "input_image":
				m.Parts = append(m.Parts, chat.Part{Type: chat.PartImage, Image: &chat.Image{MediaType: dataURLType(p.ImageURL), Detail: p.Detail}})
				extra = append(extra, sourceDigest(rawParts[j]))
			default:
				extra = append(extra, sourceDigest(rawParts[j]))
			}
		}
	} else {
		text, err := rText(content, f+".content")
		if err != nil {
			return m, nil, err
		}
		m.Parts = []chat.Part{{Type: chat.PartText, Text: text}}
	}
	if len(m.Parts) == 0 {
		m.Parts = []chat.Part{{Type: chat.PartText}}
	}
	return m, extra, nil
}

// rOutput is a tool output's text: a string, or content parts' text.
func rOutput(out json.RawMessage, field string) (string, error) {
	out = bytes.TrimSpace(out)
	if len(out) > 0 && out[0] == '{' {
		return string(out), nil // a computer screenshot and the like
	}
	return rText(out, field)
}

// rFromDomain writes a domain message as items. like, when set, is the raw
// run the message stands in for (a placeholder's original), so a tool
// output keeps its type (a custom tool's output stays one).
func rFromDomain(m *chat.Message, like []rItem) []map[string]any {
	switch m.Role {
	case chat.RoleTool:
		var out []map[string]any
		for _, p := range m.Parts {
			if p.Type != chat.PartToolResult {
				continue
			}
			typ := "function_call_output"
			for _, it := range like {
				if it.isOutput() {
					typ = it.Type
				}
			}
			out = append(out, map[string]any{"type": typ, "call_id": p.ToolResult.ToolCallID, "output": p.ToolResult.Content})
		}
		return out
	case chat.RoleAssistant:
		var out []map[string]any
		if text := m.Text(); text != "" {
			out = append(out, map[string]any{"role": "assistant", "content": text})
		}
		for _, p := range m.Parts {
			if p.Type == chat.PartToolCall {
				out = append(out, map[string]any{"type": "function_call", "call_id": p.ToolCall.ID, "name": p.ToolCall.Name, "arguments": p.ToolCall.Arguments})
			}
		}
		if len(out) == 0 {
			out = append(out, map[string]any{"role": "assistant", "content": ""})
		}
		return out
	}
	role := "user"
	if m.Role == chat.RoleSystem {
		role = "developer"
	}
	text := m.Text()
	for _, p := range m.Parts {
		if p.Type == chat.PartImage {
			text += "[image not kept by contextd]"
		}
	}
	return []map[string]any{{"role": role, "content": text}}
}

func (openAIResponses) build(b *requestBody, c *conversation, view []chat.Message, _ engine.CacheHints) error {
	raws, err := rInput(b)
	if err != nil {
		return err
	}
	if len(raws) < c.lead {
		return chat.Invalid("input", "must be an array of items")
	}
	out := make([]json.RawMessage, 0, len(view)+c.lead)
	out = append(out, raws[:c.lead]...) // the system messages, as sent
	for i := range view {
		m := &view[i]
		if m.Kind == "" || m.Kind == chat.KindNormal {
			// Items the client sent in this request go back as it sent
			// them.
			if run := c.runs[c.viewDigest(m)]; run != nil {
				out = append(out, run...)
				continue
			}
		}
		if raw := rawOf(m, doorOpenAIResponses); raw != nil {
			var run []json.RawMessage
			if json.Unmarshal(raw, &run) == nil {
				out = append(out, run...)
				continue
			}
		}
		var like []rItem
		if raw := rawAnyKind(m, doorOpenAIResponses); raw != nil {
			_ = json.Unmarshal(raw, &like)
		}
		for _, it := range rFromDomain(m, like) {
			j, err := json.Marshal(it)
			if err != nil {
				return err
			}
			out = append(out, j)
		}
	}
	b.splice("input", out)
	return nil
}

type rUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// domain is a response's usage in contextd's terms; ok false when it has
// none (r nil).
func (r *rUsage) domain() usage {
	if r == nil {
		return usage{}
	}
	var cached int64
	if r.InputTokensDetails != nil {
		cached = r.InputTokensDetails.CachedTokens
	}
	return openAIUsage(r.InputTokens, cached, r.OutputTokens)
}

// rResponse reads a response object: usage and the reply of its output.
func rResponse(body []byte) (usage, []chat.Message) {
	var resp struct {
		Output []json.RawMessage `json:"output"`
		Usage  *rUsage           `json:"usage"`
	}
	if json.Unmarshal(body, &resp) != nil {
		return usage{}, nil
	}
	u := resp.Usage.domain()
	if len(resp.Output) == 0 {
		return u, nil
	}
	items := make([]rItem, len(resp.Output))
	raws := make([]json.RawMessage, len(resp.Output))
	for i, r := range resp.Output {
		raws[i] = r // as the provider wrote it: an empty summary is required
		if json.Unmarshal(r, &items[i]) != nil {
			return u, nil
		}
	}
	e, _, err := rToDomain(nil, raws, items, 0)
	if err != nil {
		return u, nil
	}
	return u, e.msgs
}

func (openAIResponses) answer(body []byte) (usage, []chat.Message) { return rResponse(body) }

// rStream follows a streamed response: its last event (response.completed,
// or .incomplete) carries the whole response. Until then it keeps the
// text of the deltas (partial), and the usage of a response.failed.
type rStream struct {
	u       usage
	reply   []chat.Message
	done    bool
	relayed relayedText
}

func (openAIResponses) stream(*conversation, string) streamer { return &rStream{} }

func (s *rStream) event(name string, data []byte) (bool, bool) {
	var ev struct {
		Type     string          `json:"type"`
		Response json.RawMessage `json:"response"`
		Delta    json.RawMessage `json:"delta"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return true, false
	}
	if name == "" {
		name = ev.Type
	}
	switch name {
	case "response.completed", "response.incomplete":
		s.u, s.reply = rResponse(ev.Response)
		s.done = true
		return true, true
	case "response.failed": // its usage, if it has one (partial); its output is not read
		var failed struct {
			Usage *rUsage `json:"usage"`
		}
		_ = json.Unmarshal(ev.Response, &failed)
		s.u = failed.Usage.domain()
	}
	var delta string
	if !s.relayed.full() && strings.HasSuffix(name, ".delta") && json.Unmarshal(ev.Delta, &delta) == nil {
		s.relayed.add(delta) // text, arguments, a custom tool's input, a summary
	}
	return true, false
}

func (s *rStream) result() (usage, []chat.Message, bool) { return s.u, s.reply, s.done }

// partial is what a cut stream carried: a response.failed's usage, and
// the deltas' text.
func (s *rStream) partial() (usage, string) { return s.u, s.relayed.String() }

// toolJSON writes a function tool as Responses has it (flat). strict is
// off: Responses defaults it on, which would refuse optional parameters.
func (openAIResponses) toolJSON(t chat.Tool) json.RawMessage {
	return mustJSON(map[string]any{"type": "function", "name": t.Name, "description": t.Description,
		"parameters": json.RawMessage(t.Parameters), "strict": false})
}

func (openAIResponses) toolChoiceNone() json.RawMessage { return json.RawMessage(`"none"`) }

// expandSeen looks for contextd_expand calls in a response or one of its
// events (the items of output_item events, a response's output); ok is
// false when the data is neither.
func (openAIResponses) expandSeen(data []byte) (first, other, ok bool) {
	type named struct {
		Name string `json:"name"`
	}
	var v struct {
		Output   []named `json:"output"`
		Item     *named  `json:"item"`
		Response *struct {
			Output []named `json:"output"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &v) != nil {
		return false, false, false
	}
	items := v.Output
	if v.Item != nil {
		items = append(items, *v.Item)
	}
	if v.Response != nil {
		items = append(items, v.Response.Output...)
	}
	for _, it := range items {
		first = first || it.Name == engine.ExpandToolName
	}
	return first, false, true
}

// echo puts the client's tools and tool_choice back where a response
// object echoes the request's (a JSON body, or an event's response), as
// the request carried contextd's tool: the client sees what it sent. ok is
// false when data is not JSON.
func (openAIResponses) echo(data []byte, tools, choice json.RawMessage) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return data, false
	}
	changed := false
	fix := func(obj map[string]json.RawMessage) {
		if _, ok := obj["tools"]; ok {
			obj["tools"], changed = tools, true
		}
		if _, ok := obj["tool_choice"]; ok {
			obj["tool_choice"], changed = choice, true
		}
	}
	fix(m)
	if raw, ok := m["response"]; ok {
		var r map[string]json.RawMessage
		if json.Unmarshal(raw, &r) == nil {
			fix(r)
			m["response"] = mustJSON(r)
		}
	}
	if !changed {
		return data, true
	}
	return mustJSON(m), true
}
