package tokens

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// qwen3Template is the chat template of Qwen3 (tokenizer_config.json), with
// thinking on, the served default (enable_thinking unset): the generation
// prompt is "<|im_start|>assistant\n" and the model opens its own <think>
// block. Qwen 2.5's template (template_qwen25.go) renders the same ChatML
// turns and tool blocks without the thinking rules.
type qwen3Template struct{}

const (
	qwenToolsHeader = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
	qwenToolsFooter = "\n</tools>\n\nFor each function call, return a json object with function name and " +
		"arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, " +
		"\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
)

func (qwen3Template) replyPriming() int { return 3 } // <|im_start|> assistant \n

func (qwen3Template) prefix(enc *Encoding, system string, present bool, tools []chat.Tool) (int64, int64, []ToolCount) {
	return qwenPrefix(enc, system, present, tools)
}

// qwenPrefix counts the system turn of the Qwen templates: the system prompt
// alone, and with the tool block appended. A present but empty prompt is a
// turn of its own ("<|im_start|>system\n<|im_end|>\n"), and with tools its
// "\n\n" still comes before the block.
func qwenPrefix(enc *Encoding, system string, present bool, tools []chat.Tool) (int64, int64, []ToolCount) {
	var sys int64
	if present {
		sys = int64(enc.Count("<|im_start|>system\n" + system + "<|im_end|>\n"))
	}
	if len(tools) == 0 {
		return sys, 0, nil
	}
	var b strings.Builder
	b.WriteString("<|im_start|>system\n")
	if present {
		b.WriteString(system)
		b.WriteString("\n\n")
	}
	b.WriteString(qwenToolsHeader)
	per := make([]ToolCount, len(tools))
	for i, t := range tools {
		js := toolJSON(t)
		b.WriteString("\n")
		b.WriteString(js)
		per[i] = ToolCount{Name: t.Name, Tokens: int64(enc.Count(js))}
	}
	b.WriteString(qwenToolsFooter)
	return sys, int64(enc.Count(b.String())) - sys, per
}

// qwenLastQuery is the template's ns.last_query_index: the last user message
// that is not a wrapped tool response.
func qwenLastQuery(msgs []chat.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != chat.RoleUser {
			continue
		}
		t := messageText(&msgs[i])
		if !(strings.HasPrefix(t, "<tool_response>") && strings.HasSuffix(t, "</tool_response>")) {
			return i
		}
	}
	return len(msgs) - 1
}

func (qwen3Template) message(enc *Encoding, msgs []chat.Message, i int, context bool) MessageCount {
	lastQuery := len(msgs)
	if context {
		lastQuery = qwenLastQuery(msgs)
	}
	return qwenMessage(enc, msgs, i, context, true, lastQuery)
}

// forRequest finds the last query once per request.
func (t qwen3Template) forRequest(msgs []chat.Message) chatTemplate {
	return qwen3Request{qwen3Template: t, lastQuery: qwenLastQuery(msgs)}
}

// qwen3Request is Qwen3's template for one request's messages.
type qwen3Request struct {
	qwen3Template
	lastQuery int
}

func (r qwen3Request) message(enc *Encoding, msgs []chat.Message, i int, context bool) MessageCount {
	return qwenMessage(enc, msgs, i, context, true, r.lastQuery)
}

// qwenMessage renders one message of the Qwen templates; thinking applies
// Qwen3's rules for reasoning in assistant turns, which need the index of
// the last query.
func qwenMessage(enc *Encoding, msgs []chat.Message, i int, context, thinking bool, lastQuery int) MessageCount {
	m := &msgs[i]
	var b strings.Builder
	adjust := 0
	rendered := messageText(m) // an assistant's text as the template renders it
	switch m.Role {
	case chat.RoleUser, chat.RoleSystem:
		b.WriteString("<|im_start|>" + string(m.Role) + "\n" + messageText(m) + "<|im_end|>\n")
	case chat.RoleAssistant:
		content, reasoning := messageText(m), ""
		if _, after, ok := cutLast(content, "</think>"); ok && thinking {
			before, _, _ := strings.Cut(content, "</think>")
			content = strings.TrimLeft(after, "\n")
			before = strings.TrimRight(before, "\n")
			if _, r, ok := cutLast(before, "<think>"); ok {
				before = r
			}
			reasoning = strings.TrimLeft(before, "\n")
		}
		b.WriteString("<|im_start|>assistant\n")
		start := b.Len()
		// Only a whole request tells whether this turn follows the last
		// query; a stored message is counted as an earlier turn, whose
		// reasoning the template drops.
		if thinking && context && i > lastQuery && (i == len(msgs)-1 || reasoning != "") {
			b.WriteString("<think>\n" + strings.Trim(reasoning, "\n") + "\n</think>\n\n" + strings.TrimLeft(content, "\n"))
		} else {
			b.WriteString(content)
		}
		rendered = b.String()[start:]
		first := true
		for _, p := range m.Parts {
			if p.Type != chat.PartToolCall {
				continue
			}
			if !first || content != "" {
				b.WriteString("\n")
			}
			first = false
			b.WriteString("<tool_call>\n{\"name\": \"" + p.ToolCall.Name + "\", \"arguments\": " + qwenArguments(p.ToolCall.Arguments) + "}\n</tool_call>")
		}
		b.WriteString("<|im_end|>\n")
	case chat.RoleTool:
		// Consecutive tool results share one user turn. Alone, a result
		// opens and closes its turn; after another result, the text between
		// the two is "\n" instead of "<|im_end|>\n<|im_start|>user\n" (4
		// tokens fewer with Qwen3's tokenizer, where the tags are tokens).
		b.WriteString("<|im_start|>user")
		for _, p := range m.Parts {
			var text string
			switch p.Type {
			case chat.PartToolResult:
				text = p.ToolResult.Content
			case chat.PartText:
				text = p.Text
			default:
				continue
			}
			b.WriteString("\n<tool_response>\n" + text + "\n</tool_response>")
		}
		b.WriteString("<|im_end|>\n")
		if context && i > 0 && msgs[i-1].Role == chat.RoleTool {
			adjust = enc.Count("</tool_response>\n<tool_response>") -
				enc.Count("</tool_response><|im_end|>\n<|im_start|>user\n<tool_response>")
		}
	}
	total := int64(enc.Count(b.String())+adjust) + imageTokens(m)
	mc := templateMessageCount(enc, m, total)
	if rendered != messageText(m) {
		// The template dropped (or re-wrapped) the reasoning: the text
		// parts count what is rendered, on the first text part.
		renderedTokens := int64(enc.Count(rendered))
		for j := range mc.Parts {
			if mc.Parts[j].Type == chat.PartText {
				mc.Framing += mc.Parts[j].Tokens - renderedTokens
				mc.Parts[j].Tokens, renderedTokens = renderedTokens, 0
			}
		}
		if mc.Framing < 0 {
			// The rendered text tokenizes differently in context: the
			// text part takes the remainder, never more than the total.
			for j := range mc.Parts {
				if mc.Parts[j].Type == chat.PartText && mc.Parts[j].Tokens > 0 {
					mc.Parts[j].Tokens += mc.Framing
					mc.Framing = 0
					break
				}
			}
		}
	}
	return mc
}

// templateMessageCount splits a message's total into its parts' own counts
// and the framing around them; parts of the dropped types, which the
// template did not render, count 0.
func templateMessageCount(enc *Encoding, m *chat.Message, total int64, dropped ...chat.PartType) MessageCount {
	mc := MessageCount{Tokens: total, Parts: make([]PartCount, len(m.Parts))}
	var content int64
	for i, p := range m.Parts {
		var n int64
		switch {
		case slices.Contains(dropped, p.Type):
		case p.Type == chat.PartText:
			n = int64(enc.Count(p.Text))
		case p.Type == chat.PartToolCall:
			n = int64(enc.Count(p.ToolCall.Name) + enc.Count(p.ToolCall.Arguments))
		case p.Type == chat.PartToolResult:
			n = int64(enc.Count(p.ToolResult.Content))
		case p.Type == chat.PartImage:
			n = ImageTokens(p.Image)
		}
		mc.Parts[i] = PartCount{Type: p.Type, Tokens: n}
		content += n
	}
	mc.Framing = total - content
	return mc
}

// cutLast is strings.Cut at the last occurrence of sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// qwenArguments renders tool-call arguments as Qwen3's template does after
// the server parses them: a JSON string is written raw (its "is string"
// branch), anything else as JSON.
func qwenArguments(args string) string {
	var str string
	if err := json.Unmarshal([]byte(args), &str); err == nil {
		return str
	}
	return templateJSON(args)
}

// qwenToolBytes is the tool block the Qwen templates render, in bytes: each
// declaration is tokenized twice (on its own for the breakdown, and in the
// block).
func qwenToolBytes(tools []chat.Tool) int {
	n := len(qwenToolsHeader) + len(qwenToolsFooter)
	for _, t := range tools {
		n += 1 + 2*len(toolJSON(t))
	}
	return n
}

func (qwen3Template) toolBytes(tools []chat.Tool) int { return qwenToolBytes(tools) }
