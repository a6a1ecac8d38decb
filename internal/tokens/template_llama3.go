package tokens

import (
	"strings"
	"unicode"

	"github.com/contextd/contextd/internal/chat"
)

// Llama 3's turns: <|start_header_id|>role<|end_header_id|>\n\n, the
// content trimmed, <|eot_id|>.
const (
	llamaBOS = "<|begin_of_text|>"
	llamaEOT = "<|eot_id|>"
)

func llamaHeader(role string) string {
	return "<|start_header_id|>" + role + "<|end_header_id|>\n\n"
}

// llamaTrim is Jinja's trim filter (Python's str.strip): Unicode white space
// and the separators U+001C–U+001F.
func llamaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) })
}

// llama3Template is Llama 3.0's chat template (Meta-Llama-3-*-Instruct):
// every message is a turn, the first one opens with <|begin_of_text|>, and
// tools, tool calls and tool-call ids are not rendered (a tool result is a
// turn of role "tool"). The <|begin_of_text|> is counted with the reply
// priming, which every request has.
type llama3Template struct{}

func (llama3Template) replyPriming() int { return 1 + 4 } // BOS; <|start_header_id|> assistant <|end_header_id|> \n\n

func (llama3Template) prefix(enc *Encoding, system string, present bool, tools []chat.Tool) (int64, int64, []ToolCount) {
	var sys int64
	if present { // an empty or blank system message is an empty turn
		sys = int64(enc.Count(llamaHeader("system") + llamaTrim(system) + llamaEOT))
	}
	return sys, 0, make([]ToolCount, len(tools)) // the template ignores tools
}

func (llama3Template) message(enc *Encoding, msgs []chat.Message, i int, _ bool) MessageCount {
	m := &msgs[i]
	text := llamaHeader(string(m.Role)) + llamaTrim(llamaContent(m)) + llamaEOT
	return templateMessageCount(enc, m, int64(enc.Count(text))+imageTokens(m), chat.PartToolCall)
}

// llamaContent is a message's content as the template reads it: its text,
// or for a tool message its result.
func llamaContent(m *chat.Message) string {
	if m.Role != chat.RoleTool {
		return messageText(m)
	}
	var texts []string
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartToolResult:
			texts = append(texts, p.ToolResult.Content)
		case chat.PartText:
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// llama31Template is the chat template of Llama 3.1, 3.2 and 3.3: a system
// turn that always states "Cutting Knowledge Date: December 2023" and
// "Today Date: <date>" (every date counts the same: day and month are one
// token each, the year two), tools declared as indented JSON at the head of
// the first user turn (tools_in_user_message, the default), a tool call
// rendered as {"name": ..., "parameters": ...} instead of the message's
// content, and tool results in "ipython" turns as JSON strings.
type llama31Template struct{}

const (
	llama31Dates = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
	llama31Tools = "Given the following functions, please respond with a JSON for a function call " +
		"with its proper arguments that best answers the given prompt.\n\n" +
		"Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}." +
		"Do not use variables.\n\n"
)

func (llama31Template) replyPriming() int { return 4 } // <|start_header_id|> assistant <|end_header_id|> \n\n

// prefix: the system turn is always there; an empty system message only
// leaves its text empty.
func (llama31Template) prefix(enc *Encoding, system string, _ bool, tools []chat.Tool) (int64, int64, []ToolCount) {
	system = llamaTrim(system)
	sys := int64(enc.Count(llamaBOS + llamaHeader("system") + llama31Dates + system + llamaEOT))
	if len(tools) == 0 {
		return sys, 0, nil
	}
	withEnv := int64(enc.Count(llamaBOS + llamaHeader("system") + "Environment: ipython\n" + llama31Dates + system + llamaEOT))
	// The tool block opens the first user turn, before its content: what it
	// adds is the turn with it less the turn without.
	var b strings.Builder
	b.WriteString(llamaHeader("user"))
	b.WriteString(llama31Tools)
	per := make([]ToolCount, len(tools))
	for i, t := range tools {
		js := templateJSONIndent(toolJSON(t), 4)
		b.WriteString(js)
		b.WriteString("\n\n")
		per[i] = ToolCount{Name: t.Name, Tokens: int64(enc.Count(js))}
	}
	b.WriteString(llamaEOT)
	block := int64(enc.Count(b.String()) - enc.Count(llamaHeader("user")+llamaEOT))
	return sys, withEnv - sys + block, per
}

func (llama31Template) message(enc *Encoding, msgs []chat.Message, i int, _ bool) MessageCount {
	m := &msgs[i]
	var b strings.Builder
	calls := 0
	for _, p := range m.Parts {
		if p.Type != chat.PartToolCall {
			continue
		}
		// The template takes one call per message and raises on more; more
		// are counted as consecutive turns. The content is not rendered.
		calls++
		b.WriteString(llamaHeader("assistant") + `{"name": "` + p.ToolCall.Name + `", "parameters": `)
		b.WriteString(templateJSON(p.ToolCall.Arguments))
		b.WriteString("}" + llamaEOT)
	}
	var dropped []chat.PartType
	switch {
	case calls > 0:
		dropped = append(dropped, chat.PartText)
	case m.Role == chat.RoleTool:
		b.WriteString(llamaHeader("ipython"))
		writeJSString(&b, llamaContent(m))
		b.WriteString(llamaEOT)
	default:
		b.WriteString(llamaHeader(string(m.Role)) + llamaTrim(messageText(m)) + llamaEOT)
	}
	return templateMessageCount(enc, m, int64(enc.Count(b.String()))+imageTokens(m), dropped...)
}

func (llama31Template) withTools(tools []chat.Tool) chatTemplate {
	if len(tools) == 0 {
		return llama31Template{}
	}
	return llama31WithTools{}
}

// llama31WithTools is Llama 3.1's template for a request that declares
// tools: the template takes the first message (after the system prompt),
// whatever its role, as the user turn it declares them in — its content
// trimmed, a tool result's unquoted, its tool calls not rendered (and
// several do not raise there). prefix counts the declaration.
type llama31WithTools struct{ llama31Template }

func (t llama31WithTools) message(enc *Encoding, msgs []chat.Message, i int, context bool) MessageCount {
	if !context || i != 0 {
		return t.llama31Template.message(enc, msgs, i, context)
	}
	m := &msgs[0]
	text := llamaHeader("user") + llamaTrim(llamaContent(m)) + llamaEOT
	return templateMessageCount(enc, m, int64(enc.Count(text))+imageTokens(m), chat.PartToolCall)
}

// toolBytes is the tool block Llama 3.1 renders, in bytes: each
// declaration is tokenized twice (on its own for the breakdown, and in the
// block).
func (llama31Template) toolBytes(tools []chat.Tool) int {
	n := len(llama31Tools)
	for _, t := range tools {
		n += 2 + 2*len(templateJSONIndent(toolJSON(t), 4))
	}
	return n
}
