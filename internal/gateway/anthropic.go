package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// anthropicMessages is Anthropic's Messages API: POST {base}/v1/messages.
//
// The top-level system prompt is the session's (sent back as the client
// sent it). An assistant message is one domain message (text, tool_use as
// tool calls; thinking, redacted thinking and server tool blocks ride
// along verbatim). A user message is split in order into one domain tool
// message per tool_result block and user messages for the blocks between
// them; the view is written back merging consecutive messages of one role,
// tool results first, so roles alternate as the API requires.
type anthropicMessages struct{ memo *memo }

const doorAnthropic = "anthropic.messages"

func (anthropicMessages) name() string     { return doorAnthropic }
func (anthropicMessages) shape() wireShape { return shapeAnthropic }
func (anthropicMessages) upstream(cfg *Config) string {
	return cfg.AnthropicBaseURL + "/v1/messages"
}

type anMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	IsError      bool            `json:"is_error"`
	Source       json.RawMessage `json:"source"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// anBlocks reads a content: a string (one text block) or an array of
// blocks, each kept as sent.
func anBlocks(content json.RawMessage, field string) ([]json.RawMessage, []anBlock, error) {
	content = bytes.TrimSpace(content)
	if len(content) > 0 && content[0] == '"' {
		var s string
		if err := json.Unmarshal(content, &s); err != nil {
			return nil, nil, chat.Invalid(field, "must be a string or an array of content blocks")
		}
		raw, _ := json.Marshal(map[string]string{"type": "text", "text": s})
		return []json.RawMessage{raw}, []anBlock{{Type: "text", Text: s}}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(content, &raws); err != nil {
		return nil, nil, chat.Invalid(field, "must be a string or an array of content blocks")
	}
	blocks := make([]anBlock, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &blocks[i]); err != nil || blocks[i].Type == "" {
			return nil, nil, chat.Invalid(fmt.Sprintf("%s[%d]", field, i), "must be a content block with a type")
		}
	}
	return raws, blocks, nil
}

func (d anthropicMessages) parse(b *requestBody) (*conversation, error) {
	fields := b.fields
	c := &conversation{marked: map[[32]byte]json.RawMessage{}}
	if err := commonFields(fields, c); err != nil {
		return nil, err
	}
	system, marks, err := anSystem(fields["system"])
	if err != nil {
		return nil, err
	}
	c.system, c.clientMarks = system, marks
	tools, marks, err := anTools(d.memo, fields["tools"])
	if err != nil {
		return nil, err
	}
	c.tools, c.clientMarks = tools, c.clientMarks || marks
	raws, ok := b.array("messages")
	if !ok {
		return nil, chat.Invalid("messages", "must be an array of messages")
	}
	if len(raws) == 0 {
		return nil, chat.Invalid("messages", "must have at least one message")
	}
	c.reserve(len(raws))
	for i, raw := range raws {
		key := memoKey(doorAnthropic, raw)
		if done, ok := d.memo.get(key); ok && !bytes.Contains(raw, []byte(`"cache_control"`)) {
			c.add(done)
			c.clientBlocks(done, raw)
			continue
		}
		f := fmt.Sprintf("messages[%d]", i)
		var m anMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, chat.Invalid(f, "must be a message object")
		}
		if m.Role != "user" && m.Role != "assistant" {
			return nil, chat.Invalid(f+".role", "must be user or assistant (not %q)", m.Role)
		}
		blockRaws, blocks, err := anBlocks(m.Content, f+".content")
		if err != nil {
			return nil, err
		}
		var msgs []chat.Message
		var counts []int
		for _, dm := range anToDomain(m.Role, blockRaws, blocks) {
			msgs = append(msgs, dm.msg)
			counts = append(counts, len(dm.raws))
			if dm.mark != nil {
				c.clientMarks = true
				c.marked[dm.digest] = dm.mark
			}
		}
		e := entryOf(msgs)
		e.blocks = counts
		c.add(d.memo.putEntry(key, len(raw), e))
		c.keepBlocks(e, blockRaws)
	}
	return c, nil
}

// anSystem reads the system prompt: a string or text blocks.
func anSystem(raw json.RawMessage) (string, bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, chat.Invalid("system", "must be a string or an array of text blocks")
		}
		return s, false, nil
	}
	var blocks []anBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", false, chat.Invalid("system", "must be a string or an array of text blocks")
	}
	texts := make([]string, 0, len(blocks))
	marks := false
	for _, b := range blocks {
		texts = append(texts, b.Text)
		marks = marks || len(b.CacheControl) > 0 && string(b.CacheControl) != "null"
	}
	return strings.Join(texts, "\n"), marks, nil
}

// parseAnTools reads tool definitions; server tools ({"type": ..., "name"}) are
// counted by their JSON.
func parseAnTools(raw json.RawMessage) ([]chat.Tool, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, false, chat.Invalid("tools", "must be an array of tools")
	}
	out := make([]chat.Tool, 0, len(list))
	marks := false
	for i, t := range list {
		var d struct {
			Type         string          `json:"type"`
			Name         string          `json:"name"`
			Description  string          `json:"description"`
			InputSchema  json.RawMessage `json:"input_schema"`
			CacheControl json.RawMessage `json:"cache_control"`
		}
		if err := json.Unmarshal(t, &d); err != nil {
			return nil, false, chat.Invalid(fmt.Sprintf("tools[%d]", i), "must be a tool object")
		}
		marks = marks || len(d.CacheControl) > 0 && string(d.CacheControl) != "null"
		tool := chat.Tool{Name: d.Name, Description: d.Description}
		if isObject(d.InputSchema) {
			tool.Parameters = string(d.InputSchema)
		} else if d.Type != "" && d.Type != "custom" {
			tool.Description = string(t)
		}
		out = append(out, tool)
	}
	return out, marks, nil
}

// anDomain is one domain message made from (part of) an Anthropic message.
type anDomain struct {
	msg    chat.Message
	digest [32]byte
	mark   json.RawMessage // the client's cache_control on the message, if any
	raws   []json.RawMessage
}

// anToDomain converts one message's blocks, in order.
func anToDomain(role string, raws []json.RawMessage, blocks []anBlock) []anDomain {
	var out []anDomain
	var cur chat.Message
	var curRaw []json.RawMessage
	var extra []string
	var marked json.RawMessage
	flush := func() {
		if len(curRaw) == 0 {
			return
		}
		if len(cur.Parts) == 0 {
			cur.Parts = []chat.Part{{Type: chat.PartText}}
		}
		raw, _ := json.Marshal(curRaw)
		gen, _ := json.Marshal(anFromDomain(&cur))
		setRaw(&cur, doorAnthropic, raw, gen)
		pinCompaction(&cur) // providercompaction.go
		d := stamp(&cur, extra)
		out = append(out, anDomain{msg: cur, digest: d, mark: marked, raws: curRaw})
		cur, curRaw, extra, marked = chat.Message{}, nil, nil, nil
	}
	for i, b := range blocks {
		var mark json.RawMessage
		if len(b.CacheControl) > 0 && string(b.CacheControl) != "null" {
			mark = b.CacheControl
		}
		if role == "user" && b.Type == "tool_result" {
			flush()
			text, data := anResultContent(b.Content)
			cur = chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult,
				ToolResult: &chat.ToolResult{ToolCallID: b.ToolUseID, Content: text, IsError: b.IsError}}}}
			curRaw, extra, marked = []json.RawMessage{raws[i]}, data, mark
			flush()
			continue
		}
		if cur.Role == "" {
			cur.Role = chat.RoleUser
			if role == "assistant" {
				cur.Role = chat.RoleAssistant
			}
		}
		curRaw = append(curRaw, raws[i])
		if mark != nil {
			marked = mark
		}
		switch b.Type {
		case "text":
			if b.Text != "" {
				cur.Parts = append(cur.Parts, chat.Part{Type: chat.PartText, Text: b.Text})
			}
		case "tool_use":
			if role == "assistant" {
				args := "{}"
				if isObject(b.Input) {
					args = string(b.Input)
				}
				cur.Parts = append(cur.Parts, chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: args}})
			}
		case "image":
			cur.Parts = append(cur.Parts, chat.Part{Type: chat.PartImage, Image: &chat.Image{MediaType: anMediaType(b.Source)}})
			extra = append(extra, sourceDigest(b.Source))
		default:
			// Documents, thinking, server tools and blocks yet unknown
			// ride along verbatim; what they say to the model is in
			// the digest only when the client would send it again as
			// it is (documents, search results).
			if role == "user" {
				extra = append(extra, sourceDigest(raws[i]))
			}
		}
	}
	flush()
	return out
}

// anResultContent is a tool result's text, and the digests of its images.
func anResultContent(content json.RawMessage) (string, []string) {
	content = bytes.TrimSpace(content)
	if len(content) == 0 || string(content) == "null" {
		return "", nil
	}
	if content[0] == '"' {
		var s string
		_ = json.Unmarshal(content, &s)
		return s, nil
	}
	var blocks []anBlock
	if json.Unmarshal(content, &blocks) != nil {
		return string(content), nil
	}
	var b strings.Builder
	var extra []string
	for _, x := range blocks {
		if x.Type == "text" {
			b.WriteString(x.Text)
		} else {
			extra = append(extra, sourceDigest(x.Source))
		}
	}
	return b.String(), extra
}

func anMediaType(src json.RawMessage) string {
	var s struct {
		MediaType string `json:"media_type"`
	}
	_ = json.Unmarshal(src, &s)
	return s.MediaType
}

// anFromDomain writes a domain message's blocks. An image whose data the
// domain does not hold (from another door) becomes a text note.
func anFromDomain(m *chat.Message) []map[string]any {
	var out []map[string]any
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			if p.Text != "" {
				out = append(out, map[string]any{"type": "text", "text": p.Text})
			}
		case chat.PartToolCall:
			input := json.RawMessage(p.ToolCall.Arguments)
			if !isObject(input) || !json.Valid(input) {
				input = json.RawMessage("{}")
			}
			out = append(out, map[string]any{"type": "tool_use", "id": p.ToolCall.ID, "name": p.ToolCall.Name, "input": input})
		case chat.PartToolResult:
			b := map[string]any{"type": "tool_result", "tool_use_id": p.ToolResult.ToolCallID, "content": p.ToolResult.Content}
			if p.ToolResult.IsError {
				b["is_error"] = true
			}
			out = append(out, b)
		case chat.PartImage:
			out = append(out, map[string]any{"type": "text", "text": "[image not kept by contextd]"})
		}
	}
	return out
}

// anOut is one message of the request being written, with the view
// message each block came from.
type anOut struct {
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
	from    []int
}

func (anthropicMessages) build(b *requestBody, c *conversation, view []chat.Message, hints engine.CacheHints) error {
	fields := b.fields
	var out []anOut
	for i := range view {
		m := &view[i]
		role := "user"
		if m.Role == chat.RoleAssistant {
			role = "assistant"
		}
		var blocks []json.RawMessage
		if m.Kind == "" || m.Kind == chat.KindNormal {
			// A message the client sent in this request goes back as it
			// sent its blocks (the gateway places the cache marks).
			if b := c.blocks[c.viewDigest(m)]; b != nil {
				blocks = slices.Clone(b)
			}
		}
		if raw := rawOf(m, doorAnthropic); blocks == nil && raw != nil {
			_ = json.Unmarshal(raw, &blocks)
		}
		if blocks == nil {
			for _, b := range anFromDomain(m) {
				j, err := json.Marshal(b)
				if err != nil {
					return err
				}
				blocks = append(blocks, j)
			}
		}
		if len(blocks) == 0 {
			blocks = []json.RawMessage{json.RawMessage(`{"type":"text","text":"(empty)"}`)}
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			last := &out[n-1]
			if m.Role == chat.RoleTool {
				// Tool results go before the other blocks of a user
				// message.
				at := 0
				for at < len(last.Content) && blockType(last.Content[at]) == "tool_result" {
					at++
				}
				last.Content = append(last.Content[:at], append(blocks, last.Content[at:]...)...)
				last.from = append(last.from[:at], append(repeat(i, len(blocks)), last.from[at:]...)...)
			} else {
				last.Content = append(last.Content, blocks...)
				last.from = append(last.from, repeat(i, len(blocks))...)
			}
			continue
		}
		out = append(out, anOut{Role: role, Content: blocks, from: repeat(i, len(blocks))})
	}
	if c.clientMarks {
		anClientMarks(out, view, c, countMarks(fields["system"])+countMarks(fields["tools"]))
	} else {
		anPlaceMarks(fields, out, hints)
	}
	// Written once, into the body (its blocks are the stored or the
	// client's JSON, or the gateway's: not checked again).
	pieces := make([]json.RawMessage, len(out))
	for i := range out {
		pieces[i] = out[i].appendJSON(nil)
	}
	b.splice("messages", pieces)
	return nil
}

// appendJSON writes the message as json.Marshal would, its blocks as they
// are.
func (o *anOut) appendJSON(dst []byte) []byte {
	n := len(`{"role":"","content":[]}`) + len(o.Role) + len(o.Content)
	for _, c := range o.Content {
		n += len(c)
	}
	dst = slices.Grow(dst, n)
	dst = append(dst, `{"role":`...)
	dst = appendName(dst, o.Role)
	dst = append(dst, `,"content":[`...)
	for i, c := range o.Content {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, c...)
	}
	return append(dst, "]}"...)
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// blockType is a block's type, read without decoding the block.
func blockType(b json.RawMessage) string {
	var t string
	eachMember(b, func(name, v []byte) {
		if bytes.EqualFold(name, []byte("type")) && !stringValue(v, &t) {
			t = ""
		}
	})
	return t
}

// cacheable block types: cache_control may not go on thinking blocks.
var cacheable = map[string]bool{"text": true, "image": true, "document": true, "tool_use": true, "tool_result": true, "search_result": true}

var ephemeral = json.RawMessage(`{"type":"ephemeral"}`)

// markLast puts a cache mark on the last block of out that came from view
// message i and can carry one; false when there is none.
func markLast(out []anOut, i int, mark json.RawMessage) bool {
	for mi := len(out) - 1; mi >= 0; mi-- {
		for bi := len(out[mi].Content) - 1; bi >= 0; bi-- {
			if out[mi].from[bi] != i || !cacheable[blockType(out[mi].Content[bi])] {
				continue
			}
			var b map[string]json.RawMessage
			if json.Unmarshal(out[mi].Content[bi], &b) != nil {
				return false
			}
			b["cache_control"] = mark
			out[mi].Content[bi], _ = json.Marshal(b)
			return true
		}
	}
	return false
}

// anPlaceMarks places contextd's cache marks (the cache hints'
// breakpoints, at most four) when the client placed none.
func anPlaceMarks(fields map[string]json.RawMessage, out []anOut, hints engine.CacheHints) {
	placed := 0
	for _, bp := range hints.Breakpoints {
		if placed == engine.MaxBreakpoints {
			return
		}
		if bp.Index < 0 {
			if markSystem(fields) {
				placed++
			}
			continue
		}
		if markLast(out, int(bp.Index), ephemeral) {
			placed++
		}
	}
}

// markSystem marks the end of the system prompt (turned into a text
// block when it is a string), or of the tools when there is none.
func markSystem(fields map[string]json.RawMessage) bool {
	sys := bytes.TrimSpace(fields["system"])
	if len(sys) > 0 && sys[0] == '"' {
		var s string
		if json.Unmarshal(sys, &s) != nil || s == "" {
			return false
		}
		fields["system"], _ = json.Marshal([]map[string]any{{"type": "text", "text": s, "cache_control": ephemeral}})
		return true
	}
	for _, key := range []string{"system", "tools"} {
		var list []map[string]json.RawMessage
		if json.Unmarshal(fields[key], &list) != nil || len(list) == 0 {
			continue
		}
		list[len(list)-1]["cache_control"] = ephemeral
		fields[key], _ = json.Marshal(list)
		return true
	}
	return false
}

// anClientMarks keeps the client's own marks on messages: the messages it
// marked keep a mark where they are in the view (the newest first), within
// Anthropic's four with the system prompt's and tools' marks.
func anClientMarks(out []anOut, view []chat.Message, c *conversation, used int) {
	for i := len(view) - 1; i >= 0 && used < engine.MaxBreakpoints; i-- {
		m := &view[i]
		mark := c.marked[storedDigest(m)]
		if m.Kind != "" && m.Kind != chat.KindNormal || mark == nil {
			continue
		}
		if markLast(out, i, mark) {
			used++
		}
	}
}

// countMarks counts cache_control marks in a JSON value.
func countMarks(raw json.RawMessage) int {
	return bytes.Count(raw, []byte(`"cache_control"`))
}

type anUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

func (u *anUsage) usage() usage {
	return anthropicUsage(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
}

func (anthropicMessages) answer(body []byte) (usage, []chat.Message) {
	var resp struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Usage   *anUsage        `json:"usage"`
	}
	if json.Unmarshal(body, &resp) != nil || resp.Usage == nil {
		return usage{}, nil
	}
	return resp.Usage.usage(), anReply(resp.Content)
}

// anReply is the domain message of an answer's content blocks.
func anReply(content json.RawMessage) []chat.Message {
	raws, blocks, err := anBlocks(content, "content")
	if err != nil || len(raws) == 0 {
		return nil
	}
	var out []chat.Message
	for _, d := range anToDomain("assistant", raws, blocks) {
		out = append(out, d.msg)
	}
	return out
}

// anStream follows a streamed message: the usage of message_start and
// message_delta, and the content blocks assembled from their deltas.
type anStream struct {
	u      anUsage
	blocks []map[string]any
	texts  []*strings.Builder
	inputs []*strings.Builder
	done   bool
	// final: message_delta brought the usage, whose output is the
	// provider's final count (partial).
	final bool
}

func (anthropicMessages) stream(*conversation, string) streamer { return &anStream{} }

func (s *anStream) event(name string, data []byte) (bool, bool) {
	var ev struct {
		Type    string `json:"type"`
		Index   int    `json:"index"`
		Message *struct {
			Usage *anUsage `json:"usage"`
		} `json:"message"`
		ContentBlock map[string]any `json:"content_block"`
		Delta        struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
			Thinking    string `json:"thinking"`
			Signature   string `json:"signature"`
			Content     string `json:"content"` // compaction_delta
			Encrypted   string `json:"encrypted_content"`
		} `json:"delta"`
		Usage *anUsage `json:"usage"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return true, false
	}
	if name == "" {
		name = ev.Type
	}
	switch name {
	case "message_start":
		if ev.Message != nil && ev.Message.Usage != nil {
			s.u = *ev.Message.Usage
		}
	case "content_block_start":
		if ev.Index < 0 || ev.Index > 4096 || ev.ContentBlock == nil {
			break
		}
		for len(s.blocks) <= ev.Index {
			s.blocks = append(s.blocks, nil)
			s.texts = append(s.texts, &strings.Builder{})
			s.inputs = append(s.inputs, &strings.Builder{})
		}
		s.blocks[ev.Index] = ev.ContentBlock
	case "content_block_delta":
		if ev.Index < 0 || ev.Index >= len(s.blocks) || s.blocks[ev.Index] == nil {
			break
		}
		b := s.blocks[ev.Index]
		switch ev.Delta.Type {
		case "text_delta":
			s.texts[ev.Index].WriteString(ev.Delta.Text)
		case "thinking_delta":
			s.texts[ev.Index].WriteString(ev.Delta.Thinking)
		case "compaction_delta":
			s.texts[ev.Index].WriteString(ev.Delta.Content)
			if ev.Delta.Encrypted != "" {
				b["encrypted_content"] = ev.Delta.Encrypted // the latest stands
			}
		case "input_json_delta":
			s.inputs[ev.Index].WriteString(ev.Delta.PartialJSON)
		case "signature_delta":
			sig, _ := b["signature"].(string)
			b["signature"] = sig + ev.Delta.Signature
		}
	case "message_delta":
		if ev.Usage != nil {
			s.final = true
			s.u.OutputTokens = ev.Usage.OutputTokens
			if ev.Usage.InputTokens > 0 {
				s.u.InputTokens = ev.Usage.InputTokens
			}
			if ev.Usage.CacheReadInputTokens > 0 {
				s.u.CacheReadInputTokens = ev.Usage.CacheReadInputTokens
			}
			if ev.Usage.CacheCreationInputTokens > 0 {
				s.u.CacheCreationInputTokens = ev.Usage.CacheCreationInputTokens
			}
		}
	case "message_stop":
		s.done = true
		return true, true
	}
	return true, false
}

func (s *anStream) result() (usage, []chat.Message, bool) {
	if !s.done {
		return usage{}, nil, false
	}
	var content []map[string]any
	for i, b := range s.blocks {
		if b == nil {
			continue
		}
		switch b["type"] {
		case "text":
			b["text"] = s.texts[i].String()
		case "thinking":
			b["thinking"] = s.texts[i].String()
		case "compaction":
			if s.texts[i].Len() > 0 {
				b["content"] = s.texts[i].String()
			}
		case "tool_use", "server_tool_use":
			in := s.inputs[i].String()
			if !json.Valid([]byte(in)) {
				in = "{}"
			}
			b["input"] = json.RawMessage(in)
		}
		content = append(content, b)
	}
	raw, _ := json.Marshal(content)
	return s.u.usage(), anReply(raw), true
}

// partial is what a cut stream carried: message_start's usage (input and
// cache fields; its output is a placeholder, which message_delta's
// cumulative count replaces) is the input the provider billed, never its
// whole usage; the text is every block's text, thinking and input so far,
// none once message_delta came: its output is the provider's final count,
// which contextd's count of the text (approximate for Claude) must not
// replace by a larger one.
func (s *anStream) partial() (usage, string) {
	u := s.u.usage()
	u.ok = false // never all of it: cutUsage estimates the rest
	if s.final {
		return u, ""
	}
	var b relayedText
	for i := range s.texts {
		b.add(s.texts[i].String())
		b.add(s.inputs[i].String())
	}
	return u, b.String()
}

// toolJSON writes a client tool definition as Messages has it.
func (anthropicMessages) toolJSON(t chat.Tool) json.RawMessage {
	return mustJSON(map[string]any{"name": t.Name, "description": t.Description, "input_schema": json.RawMessage(t.Parameters)})
}

func (anthropicMessages) toolChoiceNone() json.RawMessage { return json.RawMessage(`{"type":"none"}`) }

// expandSeen looks for contextd_expand tool_use blocks in a message or one
// of its events; ok is false when the data is neither.
func (anthropicMessages) expandSeen(data []byte) (first, other, ok bool) {
	type block struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	var v struct {
		Content      []block `json:"content"`
		ContentBlock *block  `json:"content_block"`
		Message      *struct {
			Content []block `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &v) != nil {
		return false, false, false
	}
	blocks := v.Content
	if v.ContentBlock != nil {
		blocks = append(blocks, *v.ContentBlock)
	}
	if v.Message != nil {
		blocks = append(blocks, v.Message.Content...)
	}
	for _, b := range blocks {
		first = first || b.Name == engine.ExpandToolName
	}
	return first, false, true
}

// echo: Messages does not echo the request's tools.
func (anthropicMessages) echo(data []byte, _, _ json.RawMessage) ([]byte, bool) { return data, true }

// keepBlocks records, for each of e's messages, the client's blocks it was
// made of (all of raws, in order), without cache marks (build places
// them).
func (c *conversation) keepBlocks(e memoEntry, raws []json.RawMessage) {
	total := 0
	for _, n := range e.blocks {
		total += n
	}
	if total != len(raws) || len(e.blocks) != len(e.msgs) {
		return
	}
	if c.blocks == nil {
		c.blocks = map[[32]byte][]json.RawMessage{}
	}
	at := 0
	for i, n := range e.blocks {
		run := raws[at : at+n : at+n]
		cloned := false
		for j, b := range run {
			if bytes.Contains(b, []byte(`"cache_control"`)) {
				if !cloned {
					run, cloned = slices.Clone(run), true
				}
				run[j] = withoutCacheControl(b)
			}
		}
		keepOwn(c.blocks, storedDigest(&e.msgs[i]), run, sameRaws)
		at += n
	}
}

// clientBlocks records the client's blocks of a message the memo held
// (raw, without cache marks): its content's elements, split without
// decoding them; a string content is its one text block.
func (c *conversation) clientBlocks(e memoEntry, raw []byte) {
	var content []byte
	eachMember(raw, func(name, v []byte) {
		if bytes.EqualFold(name, []byte("content")) {
			content = v
		}
	})
	var blocks []json.RawMessage
	switch {
	case len(content) > 0 && content[0] == '[':
		s := &jsonScanner{b: content}
		if _, ok := s.array(&blocks); !ok {
			return
		}
		if blocks == nil {
			blocks = []json.RawMessage{}
		}
	case len(content) > 0 && content[0] == '"':
		var text string
		if json.Unmarshal(content, &text) != nil {
			return
		}
		b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
		blocks = []json.RawMessage{b}
	default:
		return
	}
	c.keepBlocks(e, blocks)
}
