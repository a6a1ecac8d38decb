package tokens

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// PartCount is the tokens of one part's content, without framing.
type PartCount struct {
	Type   chat.PartType
	Tokens int64
}

// MessageCount is the tokens of one message, framing included.
type MessageCount struct {
	Tokens  int64
	Framing int64
	Parts   []PartCount
}

// ToolCount is the tokens of one tool definition.
type ToolCount struct {
	Name   string
	Tokens int64
}

// RequestCount is the token breakdown of a chat request.
type RequestCount struct {
	System   int64 // system prompt, framing included
	Tools    int64 // all tool definitions, shared framing included
	Messages int64 // all messages plus reply priming
	PerMsg   []MessageCount
	PerTool  []ToolCount
}

// Total is system + tools + messages.
func (r RequestCount) Total() int64 { return r.System + r.Tools + r.Messages }

// CountRequest counts a chat request as the model sees it.
//
// With a model's chat template, a leading system message of a request
// without a system prompt is the system prompt, as the templates read it
// (messages[0]), even when it has no text (only an image, or ""): its text
// parts are counted in the system prompt, and its own count is its images'
// (the families here are counted as text models). Only that one message is:
// a second system message is a message of the conversation, as there.
func CountRequest(enc *Encoding, fr Framing, system string, tools []chat.Tool, msgs []chat.Message) RequestCount {
	var rc RequestCount
	present := system != ""
	var lead []MessageCount
	if fr.template != nil && !present && len(msgs) > 0 && msgs[0].Role == chat.RoleSystem {
		system, present = messageText(&msgs[0]), true
		images := imageTokens(&msgs[0])
		if r, ok := fr.template.(systemReader); ok {
			system, images = r.leadingSystem(&msgs[0])
		}
		dropped := []chat.PartType{chat.PartText, chat.PartToolCall, chat.PartToolResult}
		if images == 0 { // not rendered (Gemma 3), or none
			dropped = append(dropped, chat.PartImage)
		}
		lead = []MessageCount{templateMessageCount(enc, &msgs[0], images, dropped...)}
		rc.Messages = lead[0].Tokens
		msgs = msgs[1:]
	}
	if s, ok := fr.template.(toolScoped); ok {
		fr.template = s.withTools(tools)
	}
	if s, ok := fr.template.(requestScoped); ok {
		fr.template = s.forRequest(msgs)
	}
	if fr.template != nil {
		rc.System, rc.Tools, rc.PerTool = fr.template.prefix(enc, system, present, tools)
	} else {
		rc.System = CountSystem(enc, fr, system)
		rc.Tools, rc.PerTool = CountTools(enc, fr, system, tools)
	}
	rc.PerMsg = make([]MessageCount, len(lead)+len(msgs))
	copy(rc.PerMsg, lead)
	// The provider reads nothing before its latest compaction block
	// (chat/providercompaction.go).
	from := chat.ProviderReadsFrom(msgs)
	for i := range msgs {
		mc := &rc.PerMsg[len(lead)+i]
		if i < from || msgs[i].ProviderDropped() {
			*mc = droppedCount(&msgs[i])
			continue
		}
		if fr.template != nil {
			*mc = fr.template.message(enc, msgs, i, true)
			addCarried(enc, fr, &msgs[i], mc)
		} else {
			*mc = CountMessage(enc, fr, &msgs[i])
		}
		rc.Messages += mc.Tokens
	}
	rc.Messages += int64(fr.ReplyPriming)
	return rc
}

// CountSystem counts a system prompt sent as the first message; empty costs 0.
func CountSystem(enc *Encoding, fr Framing, system string) int64 {
	if fr.template != nil {
		sys, _, _ := fr.template.prefix(enc, system, system != "", nil)
		return sys
	}
	if system == "" {
		return 0
	}
	return int64(fr.PerMessage + enc.Count(string(chat.RoleSystem)) + enc.Count(system))
}

// CountMessage counts one message: per-message framing, its role, its name,
// every part and what it carries beyond its parts (chat.MetaCarried).
//
// With a model's chat template, the message is counted as it renders in the
// middle of a conversation; see docs/tokens.md for the few cases where a whole
// request renders it differently.
func CountMessage(enc *Encoding, fr Framing, m *chat.Message) MessageCount {
	if m.ProviderDropped() {
		return droppedCount(m)
	}
	if fr.template != nil {
		mc := fr.template.message(enc, []chat.Message{*m}, 0, false)
		addCarried(enc, fr, m, &mc)
		return mc
	}
	mc := MessageCount{Parts: make([]PartCount, len(m.Parts))}
	framing := int64(fr.PerMessage + enc.Count(string(m.Role)))
	if m.Name != "" {
		framing += int64(fr.PerName + enc.Count(m.Name))
	}
	content := int64(0)
	for i, p := range m.Parts {
		var n int64
		switch p.Type {
		case chat.PartText:
			n = int64(enc.Count(p.Text))
		case chat.PartToolCall:
			n = int64(enc.Count(p.ToolCall.Name) + enc.Count(p.ToolCall.Arguments))
			framing += int64(fr.PerToolCall)
		case chat.PartToolResult:
			n = int64(enc.Count(p.ToolResult.Content))
		case chat.PartImage:
			n = ImageTokens(p.Image)
		}
		mc.Parts[i] = PartCount{Type: p.Type, Tokens: n}
		content += n
	}
	mc.Framing = framing
	mc.Tokens = framing + content
	addCarried(enc, fr, m, &mc)
	return mc
}

// addCarried adds to mc what m carries beyond its parts (chat.MetaCarried:
// reasoning items, thinking blocks): its text, and a message's framing for
// a piece the provider frames as an item of its own.
//
// A piece's estimate (chat.CarriedText.Tokens) counts, all pieces together,
// at most the bytes of m's metadata, where what it stands for is kept (the
// gateway's raw: a token stands for at least a byte of what is sent), so
// an API client's contextd.carried cannot wrap a count negative.
func addCarried(enc *Encoding, fr Framing, m *chat.Message, mc *MessageCount) {
	budget := int64(-1) // the metadata's bytes, summed once a piece estimates
	for _, c := range m.Carried() {
		if c.Item {
			mc.Framing += int64(fr.PerMessage)
			mc.Tokens += int64(fr.PerMessage)
		}
		mc.Tokens += int64(enc.Count(c.Text))
		if c.Tokens > 0 {
			if budget < 0 {
				budget = 0
				for k, v := range m.Metadata {
					budget += int64(len(k) + len(v))
				}
			}
			n := min(c.Tokens, budget)
			mc.Tokens += n
			budget -= n
		}
	}
}

// ImageTokens follows OpenAI's vision rule: "low" detail costs 85 tokens;
// otherwise the image is scaled to fit 2048×2048, then its short side to 768,
// and costs 85 + 170 per 512-pixel tile. Unknown sizes count as 1024×1024
// (765 tokens).
func ImageTokens(img *chat.Image) int64 {
	if img.Detail == "low" {
		return 85
	}
	w, h := float64(img.Width), float64(img.Height)
	if w <= 0 || h <= 0 {
		w, h = 1024, 1024
	}
	if m := math.Max(w, h); m > 2048 {
		w, h = w*2048/m, h*2048/m
	}
	if s := math.Min(w, h); s > 768 {
		w, h = w*768/s, h*768/s
	}
	tiles := math.Ceil(w/512) * math.Ceil(h/512)
	return 85 + 170*int64(tiles)
}

// CountTools counts tool definitions with OpenAI's published rule for
// function definitions (name and description, then each top-level property's
// name, type, description and enum values, each with fixed overheads), and
// counts any nested schema (items, nested properties, ...) as compact JSON.
// Parameters must already be validated as JSON objects.
//
// With a model's chat template, tools are what declaring them adds to the
// system turn, which depends on the system prompt.
func CountTools(enc *Encoding, fr Framing, system string, tools []chat.Tool) (int64, []ToolCount) {
	if fr.template != nil {
		_, n, per := fr.template.prefix(enc, system, system != "", tools)
		return n, per
	}
	if len(tools) == 0 {
		return 0, nil
	}
	per := make([]ToolCount, len(tools))
	total := int64(fr.FuncEnd)
	if fr.ToolsJSON {
		total = 0
	}
	for i, t := range tools {
		var n int
		if fr.ToolsJSON {
			n = enc.Count(toolDefinitionJSON(t))
		} else {
			n = openAITool(fr, t, func(s string) int { return enc.Count(s) })
		}
		per[i] = ToolCount{Name: t.Name, Tokens: int64(max(n, 0))}
		total += per[i].Tokens
	}
	return total, per
}

// ToolBytes is the bytes of text that declaring tools hands to the
// tokenizer for this framing, as rendered (a chat template's tool block,
// OpenAI's rule's pieces), and never less than the definitions' own bytes
// (they are parsed whatever is rendered). It is what a request's tools are
// charged against the count limits: a deeply nested schema renders larger
// than it is sent. A rendering is bounded by a fixed multiple of its input
// (templateJSON, harmonyParameters), so this is too.
func ToolBytes(fr Framing, tools []chat.Tool) int {
	given := 0
	for _, t := range tools {
		given += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	if len(tools) == 0 {
		return 0
	}
	rendered := 0
	switch r := fr.template.(type) {
	case nil:
		for _, t := range tools {
			if fr.ToolsJSON {
				rendered += len(toolDefinitionJSON(t))
				continue
			}
			openAITool(fr, t, func(s string) int { rendered += len(s); return 0 })
		}
	case toolRenderer:
		rendered = r.toolBytes(tools)
	}
	return max(given, rendered)
}

// toolRenderer is a chatTemplate that renders tool declarations; toolBytes
// is the size of what it renders for tools.
type toolRenderer interface {
	toolBytes(tools []chat.Tool) int
}

// toolDefinitionJSON is a tool definition as a provider that reads its
// JSON sees it (Framing.ToolsJSON): {"description","input_schema","name"}
// with keys sorted, compact; parameters that are not JSON are a string.
func toolDefinitionJSON(t chat.Tool) string {
	def := map[string]any{"name": t.Name, "description": t.Description}
	if t.Parameters != "" {
		var schema any
		if json.Unmarshal([]byte(t.Parameters), &schema) == nil {
			def["input_schema"] = schema
		} else {
			def["input_schema"] = t.Parameters
		}
	}
	b, _ := json.Marshal(def)
	return string(b)
}

// openAITool is OpenAI's published rule for one function definition: the
// fixed overheads it returns plus count of each text (name and
// description, each top-level property's name, type, description and enum
// values, the rest of a property as compact JSON).
func openAITool(fr Framing, t chat.Tool, count func(string) int) int {
	n := fr.FuncInit + count(t.Name+":"+strings.TrimSuffix(t.Description, "."))
	var schema map[string]any
	if t.Parameters != "" {
		if err := json.Unmarshal([]byte(t.Parameters), &schema); err != nil {
			n += count(t.Parameters)
		}
	}
	if props, _ := schema["properties"].(map[string]any); len(props) > 0 {
		n += fr.PropInit
		for key, v := range props {
			n += fr.PropKey + countProperty(fr, key, v, count)
		}
	}
	return n
}

func countProperty(fr Framing, key string, v any, count func(string) int) int {
	p, ok := v.(map[string]any)
	if !ok {
		b, _ := json.Marshal(v)
		return count(key + ":" + string(b))
	}
	n := 0
	if values, ok := p["enum"].([]any); ok {
		n += fr.EnumInit
		for _, item := range values {
			n += fr.EnumItem + count(scalarText(item))
		}
	}
	desc, _ := p["description"].(string)
	n += count(key + ":" + scalarText(p["type"]) + ":" + strings.TrimSuffix(desc, "."))
	rest := make(map[string]any, len(p))
	for k, val := range p {
		if k != "type" && k != "description" && k != "enum" {
			rest[k] = val
		}
	}
	if len(rest) > 0 {
		b, _ := json.Marshal(rest)
		n += count(string(b))
	}
	return n
}

// scalarText writes a type or enum value as OpenAI's rule reads it: a
// string as is, an array as its items joined with "|" (nested arrays
// flattened), anything else as JSON. It writes into one builder in one
// pass: joining at every level of nested arrays copied the whole text
// once per level.
func scalarText(v any) string {
	var b strings.Builder
	writeScalarText(&b, v)
	return b.String()
}

func writeScalarText(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
	case string:
		b.WriteString(x)
	case []any:
		for i, e := range x {
			if i > 0 {
				b.WriteByte('|')
			}
			writeScalarText(b, e)
		}
	default:
		j, err := json.Marshal(x)
		if err != nil {
			fmt.Fprint(b, x)
			return
		}
		b.Write(j)
	}
}

// droppedCount is the count of a message the provider no longer reads
// (chat.MetaProviderDropped): nothing, part by part.
func droppedCount(m *chat.Message) MessageCount {
	mc := MessageCount{Parts: make([]PartCount, len(m.Parts))}
	for i, p := range m.Parts {
		mc.Parts[i] = PartCount{Type: p.Type}
	}
	return mc
}
