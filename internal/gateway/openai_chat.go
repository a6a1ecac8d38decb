package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// openAIChat is OpenAI's Chat Completions: POST {base}/chat/completions.
//
// Leading system and developer messages are the session's system prompt
// (sent back verbatim); every other message is one domain message: user
// (text parts, images as opaque image parts), assistant (text and
// tool_calls), tool (one tool result). Fields the domain does not hold
// (names are held; audio, refusal, file and audio parts, unknown fields)
// are kept verbatim (raw.go).
type openAIChat struct{ memo *memo }

const doorOpenAIChat = "openai.chat"

func (openAIChat) name() string     { return doorOpenAIChat }
func (openAIChat) shape() wireShape { return shapeOpenAI }
func (openAIChat) upstream(cfg *Config) string {
	return cfg.OpenAIBaseURL + "/chat/completions"
}

type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []oaToolCall    `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	// raw is the part as the client wrote it (audio, files and parts yet
	// unknown are identified by all of it).
	raw json.RawMessage
}

func (p *oaPart) UnmarshalJSON(b []byte) error {
	type plain oaPart
	if err := json.Unmarshal(b, (*plain)(p)); err != nil {
		return err
	}
	p.raw = append(json.RawMessage(nil), b...)
	return nil
}

// common reads the fields every OpenAI request shares.
func commonFields(fields map[string]json.RawMessage, c *conversation) error {
	if err := json.Unmarshal(fields["model"], &c.model); err != nil || c.model == "" {
		return chat.Invalid("model", "is required (a model name string)")
	}
	if s, ok := fields["stream"]; ok && string(s) != "null" {
		if err := json.Unmarshal(s, &c.stream); err != nil {
			return chat.Invalid("stream", "must be a boolean")
		}
	}
	return nil
}

func (d openAIChat) parse(b *requestBody) (*conversation, error) {
	fields := b.fields
	c := &conversation{}
	if err := commonFields(fields, c); err != nil {
		return nil, err
	}
	var so struct {
		IncludeUsage bool `json:"include_usage"`
	}
	if s, ok := fields["stream_options"]; ok && string(s) != "null" {
		if err := json.Unmarshal(s, &so); err != nil {
			return nil, chat.Invalid("stream_options", "must be an object")
		}
	}
	c.wantsUsage = so.IncludeUsage
	tools, err := openAITools(d.memo, fields["tools"], true)
	if err != nil {
		return nil, err
	}
	c.tools = tools
	raws, ok := b.array("messages")
	if !ok {
		return nil, chat.Invalid("messages", "must be an array of messages")
	}
	if len(raws) == 0 {
		return nil, chat.Invalid("messages", "must have at least one message")
	}
	var system []string
	lead := true
	c.reserve(len(raws))
	c.raws = make(map[[32]byte]json.RawMessage, len(raws))
	for i, raw := range raws {
		key := memoKey(doorOpenAIChat, raw)
		if done, ok := d.memo.get(key); ok && (!lead || done.msgs[0].Role != chat.RoleSystem) {
			lead = false
			c.add(done)
			keepOwn(c.raws, c.digests[len(c.digests)-1], raw, sameRaw)
			continue
		}
		f := fmt.Sprintf("messages[%d]", i)
		var m oaMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, chat.Invalid(f, "must be a message object: %v", err)
		}
		if lead && (m.Role == "system" || m.Role == "developer") {
			text, err := oaText(m.Content, f+".content")
			if err != nil {
				return nil, err
			}
			system = append(system, text)
			c.lead++
			continue
		}
		lead = false
		msg, extra, err := oaToDomain(m, f)
		if err != nil {
			return nil, err
		}
		gen, _ := json.Marshal(oaFromDomain(&msg))
		setRaw(&msg, doorOpenAIChat, raw, gen)
		stamp(&msg, extra)
		c.add(d.memo.put(key, len(raw), []chat.Message{msg}))
		keepOwn(c.raws, c.digests[len(c.digests)-1], raw, sameRaw)
	}
	if len(c.msgs) == 0 {
		return nil, chat.Invalid("messages", "must have a message after the system messages")
	}
	c.system = strings.Join(system, "\n\n")
	return c, nil
}

// parseOpenAITools reads Chat Completions tools (nested: {"type":"function",
// "function":{...}}) or Responses tools (flat: {"type":"function","name"}).
// Built-in tools (web search, ...) are named by their type; they and every
// tool of a type other than "function" are counted by their whole JSON.
func parseOpenAITools(raw json.RawMessage, nested bool) ([]chat.Tool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, chat.Invalid("tools", "must be an array of tools")
	}
	out := make([]chat.Tool, 0, len(list))
	for i, t := range list {
		var fn struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Function    *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(t, &fn); err != nil {
			return nil, chat.Invalid(fmt.Sprintf("tools[%d]", i), "must be a tool object")
		}
		if nested && fn.Function != nil {
			fn.Name, fn.Description, fn.Parameters = fn.Function.Name, fn.Function.Description, fn.Function.Parameters
		}
		tool := chat.Tool{Name: fn.Name, Description: fn.Description}
		if isObject(fn.Parameters) {
			tool.Parameters = string(fn.Parameters)
		}
		if tool.Name == "" || (fn.Type != "" && fn.Type != "function") {
			// A built-in tool, or one of another type (Codex's "namespace"
			// of nested tools, a "custom" grammar tool): its whole
			// definition is what the model sees.
			if tool.Name == "" {
				tool.Name = fmt.Sprintf("%s_%d", fn.Type, i)
			}
			tool.Description, tool.Parameters = string(t), ""
		}
		out = append(out, tool)
	}
	return out, nil
}

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// oaText is the text of a content that must be text (a string, or text
// parts).
func oaText(content json.RawMessage, field string) (string, error) {
	parts, err := oaParts(content, field)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		b.WriteString(p.Refusal)
	}
	return b.String(), nil
}

// oaParts reads a content: a string, null, or an array of parts.
func oaParts(content json.RawMessage, field string) ([]oaPart, error) {
	content = bytes.TrimSpace(content)
	if len(content) == 0 || string(content) == "null" {
		return nil, nil
	}
	if content[0] == '"' {
		var s string
		if err := json.Unmarshal(content, &s); err != nil {
			return nil, chat.Invalid(field, "must be a string or an array of parts")
		}
		return []oaPart{{Type: "text", Text: s}}, nil
	}
	var parts []oaPart
	if err := json.Unmarshal(content, &parts); err != nil {
		return nil, chat.Invalid(field, "must be a string or an array of parts")
	}
	return parts, nil
}

// oaToDomain converts one message after the system prompt; extra are the
// digests of its images' data.
func oaToDomain(m oaMessage, f string) (chat.Message, []string, error) {
	out := chat.Message{Name: m.Name}
	var extra []string
	switch m.Role {
	case "user", "system", "developer":
		out.Role = chat.RoleUser
		if m.Role != "user" {
			out.Role = chat.RoleSystem
		}
		parts, err := oaParts(m.Content, f+".content")
		if err != nil {
			return out, nil, err
		}
		for _, p := range parts {
			switch {
			case p.Type == "text":
				out.Parts = append(out.Parts, chat.Part{Type: chat.PartText, Text: p.Text})
			case p.Type == "image_url" && p.ImageURL != nil:
				out.Parts = append(out.Parts, chat.Part{Type: chat.PartImage, Image: &chat.Image{MediaType: dataURLType(p.ImageURL.URL), Detail: p.ImageURL.Detail}})
				extra = append(extra, sourceDigest([]byte(p.ImageURL.URL)))
			default:
				// Audio, files and parts yet unknown ride along verbatim,
				// identified by every byte of them (two audios differ).
				extra = append(extra, sourceDigest(p.raw))
			}
		}
	case "assistant":
		out.Role = chat.RoleAssistant
		parts, err := oaParts(m.Content, f+".content")
		if err != nil {
			return out, nil, err
		}
		for _, p := range parts {
			if t := p.Text + p.Refusal; t != "" {
				out.Parts = append(out.Parts, chat.Part{Type: chat.PartText, Text: t})
			}
		}
		for j, tc := range m.ToolCalls {
			if tc.ID == "" {
				return out, nil, chat.Invalid(fmt.Sprintf("%s.tool_calls[%d].id", f, j), "is required")
			}
			out.Parts = append(out.Parts, chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
	case "tool":
		out.Role = chat.RoleTool
		if m.ToolCallID == "" {
			return out, nil, chat.Invalid(f+".tool_call_id", "is required")
		}
		text, err := oaText(m.Content, f+".content")
		if err != nil {
			return out, nil, err
		}
		out.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: m.ToolCallID, Content: text}}}
	case "":
		return out, nil, chat.Invalid(f+".role", "is required")
	default:
		return out, nil, chat.Invalid(f+".role", "must be one of system, developer, user, assistant, tool (not %q)", m.Role)
	}
	if len(out.Parts) == 0 {
		out.Parts = []chat.Part{{Type: chat.PartText}}
	}
	return out, extra, nil
}

// dataURLType is the media type of a data: URL ("" for a link).
func dataURLType(u string) string {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if t, _, ok := strings.Cut(rest, ";"); ok {
			return t
		}
	}
	return ""
}

// oaFromDomain writes a domain message as Chat Completions does. An image
// whose data the domain does not hold (a message that came through another
// door) is written as a text note.
func oaFromDomain(m *chat.Message) map[string]any {
	out := map[string]any{"role": string(m.Role)}
	if m.Name != "" {
		out["name"] = m.Name
	}
	switch m.Role {
	case chat.RoleTool:
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult {
				out["tool_call_id"] = p.ToolResult.ToolCallID
				out["content"] = p.ToolResult.Content
			}
		}
		return out
	case chat.RoleAssistant:
		var text strings.Builder
		var calls []map[string]any
		for _, p := range m.Parts {
			switch p.Type {
			case chat.PartText:
				text.WriteString(p.Text)
			case chat.PartToolCall:
				calls = append(calls, map[string]any{"id": p.ToolCall.ID, "type": "function",
					"function": map[string]any{"name": p.ToolCall.Name, "arguments": p.ToolCall.Arguments}})
			}
		}
		out["content"] = text.String()
		if len(calls) > 0 {
			out["tool_calls"] = calls
			if text.Len() == 0 {
				out["content"] = nil
			}
		}
		return out
	}
	texts := 0
	for _, p := range m.Parts {
		if p.Type == chat.PartText {
			texts++
		}
	}
	if texts == len(m.Parts) && texts == 1 {
		out["content"] = m.Parts[0].Text
		return out
	}
	var parts []map[string]any
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			parts = append(parts, map[string]any{"type": "text", "text": p.Text})
		case chat.PartImage:
			parts = append(parts, map[string]any{"type": "text", "text": "[image not kept by contextd]"})
		}
	}
	out["content"] = parts
	return out
}

func (openAIChat) build(b *requestBody, c *conversation, view []chat.Message, _ engine.CacheHints) error {
	raws, ok := b.array("messages")
	if !ok || len(raws) < c.lead {
		return chat.Invalid("messages", "must be an array of messages")
	}
	out := make([]json.RawMessage, 0, len(view)+c.lead)
	out = append(out, raws[:c.lead]...) // the system messages, as sent
	for i := range view {
		m := &view[i]
		if m.Kind == "" || m.Kind == chat.KindNormal {
			// A message the client sent in this request goes back as it
			// sent it (its cache marks and field order too).
			if raw := c.raws[c.viewDigest(m)]; raw != nil {
				out = append(out, raw)
				continue
			}
		}
		if raw := rawOf(m, doorOpenAIChat); raw != nil {
			out = append(out, raw)
			continue
		}
		j, err := json.Marshal(oaFromDomain(&view[i]))
		if err != nil {
			return err
		}
		out = append(out, j)
	}
	b.splice("messages", out)
	fields := b.fields
	if c.stream && !c.wantsUsage {
		// Ask for the usage chunk; the streamer drops it again.
		so := map[string]json.RawMessage{}
		if s, ok := fields["stream_options"]; ok && string(s) != "null" {
			_ = json.Unmarshal(s, &so)
		}
		so["include_usage"] = json.RawMessage("true")
		fields["stream_options"], _ = json.Marshal(so)
	}
	return nil
}

type oaUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *oaUsage) usage() usage {
	if u == nil {
		return usage{}
	}
	var cached int64
	if u.PromptTokensDetails != nil {
		cached = u.PromptTokensDetails.CachedTokens
	}
	return openAIUsage(u.PromptTokens, cached, u.CompletionTokens)
}

func (openAIChat) answer(body []byte) (usage, []chat.Message) {
	var resp struct {
		Choices []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
		Usage *oaUsage `json:"usage"`
	}
	if json.Unmarshal(body, &resp) != nil {
		return usage{}, nil
	}
	u := resp.Usage.usage()
	if len(resp.Choices) == 0 {
		return u, nil
	}
	reply := oaReply(resp.Choices[0].Message)
	others := make([]json.RawMessage, 0, len(resp.Choices)-1)
	for _, ch := range resp.Choices[1:] {
		others = append(others, ch.Message)
	}
	noteChoices(reply, others) // picks.go
	return u, reply
}

// oaReply is the domain message of an answer's message (nil when it is not
// one), stamped as the client's echo of it will be.
func oaReply(raw json.RawMessage) []chat.Message {
	raw = withCallIDs(raw, "")
	var m oaMessage
	if json.Unmarshal(raw, &m) != nil || m.Role != "assistant" {
		return nil
	}
	msg, extra, err := oaToDomain(m, "choices[0].message")
	if err != nil {
		return nil
	}
	gen, _ := json.Marshal(oaFromDomain(&msg))
	setRaw(&msg, doorOpenAIChat, withoutEmpty(raw), gen)
	stamp(&msg, extra)
	return []chat.Message{msg}
}

// oaStream follows a streamed Chat Completion: it assembles the first
// choice's message from the deltas and reads the usage chunk (dropped when
// the client did not ask for it).
type oaStream struct {
	wantsUsage bool
	// named: the tool calls of the event just seen that the gateway gave
	// an id (callids.go).
	named   []namedCall
	seed    string // names the answer (door.stream)
	tag     string // of the ids it gives, made from seed
	role    string
	content strings.Builder
	calls   []oaToolCall
	// others: the other choices' text and calls (picks.go), at most
	// maxChoices.
	others map[int]*oaChoice
	u      usage
	done   bool
}

// oaChoice is a streamed choice after the first, as far as its identity
// goes: its text and its calls' ids and names.
type oaChoice struct {
	content strings.Builder
	calls   []oaToolCall
}

func (openAIChat) stream(c *conversation, seed string) streamer {
	return &oaStream{wantsUsage: c.wantsUsage, seed: seed}
}

func (s *oaStream) event(_ string, data []byte) (bool, bool) {
	s.named = nil
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		s.done = true
		return true, true
	}
	var chunk struct {
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Role      string `json:"role"`
				Content   string `json:"content"`
				Refusal   string `json:"refusal"`
				ToolCalls []struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
		Usage *oaUsage `json:"usage"`
	}
	if json.Unmarshal(data, &chunk) != nil {
		return true, false
	}
	if chunk.Usage != nil {
		s.u = chunk.Usage.usage()
	}
	for pos, ch := range chunk.Choices {
		if ch.Index != 0 {
			o := s.other(ch.Index)
			if o == nil {
				continue
			}
			o.content.WriteString(ch.Delta.Content)
			o.content.WriteString(ch.Delta.Refusal)
			for _, tc := range ch.Delta.ToolCalls {
				if c := callAt(&o.calls, tc.Index); c != nil {
					c.ID += tc.ID
					c.Function.Name += tc.Function.Name
				}
			}
			continue
		}
		if ch.Delta.Role != "" {
			s.role = ch.Delta.Role
		}
		s.content.WriteString(ch.Delta.Content)
		s.content.WriteString(ch.Delta.Refusal)
		for j, tc := range ch.Delta.ToolCalls {
			c := callAt(&s.calls, tc.Index)
			if c == nil {
				continue
			}
			if tc.ID != "" {
				c.ID = tc.ID
			}
			if c.ID == "" {
				c.ID = s.nameCall(pos, j, tc.Index)
			}
			c.Function.Name += tc.Function.Name
			c.Function.Arguments += tc.Function.Arguments
		}
	}
	// The usage chunk has no choices; the client did not ask for it.
	if len(chunk.Choices) == 0 && chunk.Usage != nil && !s.wantsUsage {
		return false, false
	}
	return true, false
}

// partial is what a cut stream carried: the usage chunk, when it came
// before the cut (it is the whole usage: only [DONE] was missing), and the
// text so far of every choice, with the first choice's tool names and
// arguments (the other choices' calls are not counted).
func (s *oaStream) partial() (usage, string) {
	var b relayedText
	b.add(s.content.String())
	for _, c := range s.calls {
		b.add(c.Function.Name)
		b.add(c.Function.Arguments)
	}
	for i := 1; i <= maxChoices; i++ {
		if o := s.others[i]; o != nil {
			b.add(o.content.String())
		}
	}
	return s.u, b.String()
}

func (s *oaStream) result() (usage, []chat.Message, bool) {
	if !s.done {
		return usage{}, nil, false
	}
	msg := map[string]any{"role": "assistant", "content": s.content.String()}
	if len(s.calls) > 0 {
		msg["tool_calls"] = s.calls
		if s.content.Len() == 0 {
			msg["content"] = nil
		}
	}
	raw, _ := json.Marshal(msg)
	reply := oaReply(raw)
	var others []json.RawMessage
	for i := 1; i <= maxChoices; i++ {
		if o := s.others[i]; o != nil {
			m := map[string]any{"role": "assistant", "content": o.content.String()}
			if len(o.calls) > 0 {
				m["tool_calls"] = o.calls
			}
			b, _ := json.Marshal(m)
			others = append(others, b)
		}
	}
	noteChoices(reply, others) // picks.go
	return s.u, reply, true
}

// callAt is the call of index i of a streamed choice's calls, made when
// it is new; nil for an index past 1024.
func callAt(calls *[]oaToolCall, i int) *oaToolCall {
	if i < 0 || i > 1024 {
		return nil
	}
	for len(*calls) <= i {
		*calls = append(*calls, oaToolCall{Type: "function"})
	}
	return &(*calls)[i]
}

// other is the streamed choice of index i (nil past maxChoices).
func (s *oaStream) other(i int) *oaChoice {
	if i < 1 || i > maxChoices {
		return nil
	}
	if s.others == nil {
		s.others = map[int]*oaChoice{}
	}
	if s.others[i] == nil {
		s.others[i] = &oaChoice{}
	}
	return s.others[i]
}

// withoutEmpty drops null values and empty arrays from an object's fields
// (an answer's "refusal": null, "annotations": []), which a request need
// not carry back.
func withoutEmpty(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	for k, v := range m {
		if t := bytes.TrimSpace(v); string(t) == "null" || string(t) == "[]" {
			delete(m, k)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}

// toolJSON writes a function tool as Chat Completions nests it.
func (openAIChat) toolJSON(t chat.Tool) json.RawMessage {
	return mustJSON(map[string]any{"type": "function", "function": map[string]any{
		"name": t.Name, "description": t.Description, "parameters": json.RawMessage(t.Parameters)}})
}

func (openAIChat) toolChoiceNone() json.RawMessage { return json.RawMessage(`"none"`) }

// expandSeen looks for contextd_expand calls in an answer or one of its
// chunks, in every choice: first says the first choice calls it, other
// that another does; ok is false when the data is not a chunk or answer.
func (openAIChat) expandSeen(data []byte) (first, other, ok bool) {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		return false, false, true
	}
	type calls []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	var v struct {
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				ToolCalls calls `json:"tool_calls"`
			} `json:"message"`
			Delta struct {
				ToolCalls calls `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &v) != nil {
		return false, false, false
	}
	for _, ch := range v.Choices {
		for _, c := range append(ch.Message.ToolCalls, ch.Delta.ToolCalls...) {
			if c.Function.Name == engine.ExpandToolName {
				first, other = first || ch.Index == 0, other || ch.Index != 0
			}
		}
	}
	return first, other, true
}

// echo: Chat Completions does not echo the request's tools.
func (openAIChat) echo(data []byte, _, _ json.RawMessage) ([]byte, bool) { return data, true }

// withCallIDs gives the tool calls of an answer's message that came
// without an id (as some OpenAI-compatible servers send them) one of the
// gateway's, so their results can name them: a digest of seed (the
// answer's: exchange.answerSeed) and the message. Without a seed (an
// answer whose body the exchange has not named: the ids are there already,
// or a test) the message's digest alone, which the same call made again
// in a later turn shares.
func withCallIDs(raw json.RawMessage, seed string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	var calls []map[string]json.RawMessage
	if json.Unmarshal(m["tool_calls"], &calls) != nil {
		return raw
	}
	changed := false
	tag := sourceDigest(raw) // the same message gets the same ids
	if seed != "" {
		tag = callTag(seed, raw)
	}
	for i, c := range calls {
		var id string
		if json.Unmarshal(c["id"], &id); id == "" {
			c["id"] = mustJSON(fmt.Sprintf("call_gw_%.12s_%d", tag, i))
			changed = true
		}
	}
	if !changed {
		return raw
	}
	m["tool_calls"] = mustJSON(calls)
	return mustJSON(m)
}
