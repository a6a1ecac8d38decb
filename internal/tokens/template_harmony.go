package tokens

import (
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// harmonyTemplate is gpt-oss's harmony format, as OpenAI's renderer
// (openai-harmony, which vLLM serves gpt-oss with) renders the conversation
// the model's chat template builds: a system message with the template's
// defaults (model identity, knowledge cutoff 2024-06, reasoning effort
// medium, the three channels), the system prompt and tools in a developer
// message (tools as a TypeScript namespace), user turns, assistant text on
// the final channel, each tool call an assistant message to=functions.<name>
// on the commentary channel with content type <|constrain|>json, each tool
// result from functions.<name of its call>, and the text of a message that
// makes calls as analysis. Every text is tokenized on its own, special-token
// look-alikes as plain text (encode_ordinary); the formatting tokens are one
// each.
type harmonyTemplate struct{}

const (
	// harmonyDate is the date the golden set renders; servers put today's
	// in, and every date counts the same (a test checks 2024–2039).
	harmonyDate   = "2025-06-28"
	harmonySystem = "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: " +
		harmonyDate + "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message."
	harmonyToolsLine = "\nCalls to these tools must go to the commentary channel: 'functions'."
)

// harmonyText counts text as harmony renders it: ordinary tokens only.
func harmonyText(enc *Encoding, s string) int {
	if enc.normalize != nil {
		s = enc.normalize(s)
	}
	return enc.countOrdinary(s)
}

func (harmonyTemplate) replyPriming() int { return 2 } // <|start|> assistant

func (harmonyTemplate) prefix(enc *Encoding, system string, _ bool, tools []chat.Tool) (int64, int64, []ToolCount) {
	// <|start|> system <|message|> ... <|end|>, and the developer message's
	// <|start|> developer <|message|> ... <|end|>.
	head := func(withTools bool) int {
		text := harmonySystem
		if withTools {
			text += harmonyToolsLine
		}
		return 3 + harmonyText(enc, "system") + harmonyText(enc, text)
	}
	developer := func(body string) int { return 3 + harmonyText(enc, "developer") + harmonyText(enc, body) }
	sys := int64(head(false))
	// The template tests `if developer_message`: an empty system prompt,
	// present or not, renders no instructions (a blank one does).
	if system != "" {
		sys += int64(developer("# Instructions\n\n" + system))
	}
	if len(tools) == 0 {
		return sys, 0, nil
	}
	body, spans := harmonyTools(system, tools)
	per := make([]ToolCount, len(tools))
	for i, t := range tools {
		per[i] = ToolCount{Name: t.Name, Tokens: int64(harmonyText(enc, body[spans[i][0]:spans[i][1]]))}
	}
	total := int64(head(true) + developer(body))
	return sys, total - sys, per
}

// harmonyTools renders the developer message that declares tools: the
// instructions, then each tool as a TypeScript type in the functions
// namespace; spans[i] is where tool i's declaration is in body.
func harmonyTools(system string, tools []chat.Tool) (body string, spans [][2]int) {
	var b strings.Builder
	if system != "" {
		b.WriteString("# Instructions\n\n" + system + "\n\n")
	}
	b.WriteString("# Tools\n\n## functions\n\nnamespace functions {\n\n")
	spans = make([][2]int, len(tools))
	for i, t := range tools {
		start := b.Len()
		for _, line := range rustLines(t.Description) {
			b.WriteString("// " + line + "\n")
		}
		b.WriteString("type " + t.Name + " = ")
		b.WriteString(harmonyParameters(t.Parameters))
		spans[i] = [2]int{start, b.Len()}
	}
	b.WriteString("} // namespace functions")
	return b.String(), spans
}

// harmonyParameters renders a tool's parameters: (_: TypeScript) => any, or
// () => any for none or a schema that is not JSON or nested deeper than
// maxSchemaDepth. A schema whose TypeScript would outgrow
// harmonySchemaGrowth times its JSON plus templateJSONSlack (indentation
// grows with depth: 60 levels of one-line properties are 240 spaces a line)
// is written as its JSON text as given, so what is counted stays within a
// fixed multiple of what was sent.
func harmonyParameters(params string) string {
	schema, ok := parseSchema(params)
	if !ok || params == "" {
		return "() => any;\n\n"
	}
	w := newTSWriter(harmonySchemaGrowth*len(params) + templateJSONSlack)
	w.WriteString("(_: ")
	writeTypeScript(w, &schema, "")
	w.WriteString(") => any;\n\n")
	if w.over {
		return "(_: " + params + ") => any;\n\n"
	}
	return w.String()
}

// harmonySchemaGrowth bounds how much larger than its JSON a schema's
// TypeScript may be (see harmonyParameters).
const harmonySchemaGrowth = 4

// toolBytes is the text declaring tools hands to the tokenizer, in bytes:
// the developer message, and each declaration again on its own.
func (harmonyTemplate) toolBytes(tools []chat.Tool) int {
	if len(tools) == 0 {
		return 0
	}
	body, spans := harmonyTools("", tools)
	n := len(body)
	for _, s := range spans {
		n += s[1] - s[0]
	}
	return n
}

// rustLines splits text as Rust's str::lines does: on "\n", without a "\r"
// before it, and without a last empty line.
func rustLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

func (t harmonyTemplate) message(enc *Encoding, msgs []chat.Message, i int, context bool) MessageCount {
	r := harmonyRequest{names: map[string]string{}, dropBefore: -1}
	if context {
		r = t.forRequest(msgs).(harmonyRequest)
	}
	return r.message(enc, msgs, i, context)
}

// forRequest finds, once, what messages render differently in a whole
// request: the names of the calls tool results answer, and which analysis
// the renderer drops (all before the first final answer, when the last
// assistant message is a final answer).
func (t harmonyTemplate) forRequest(msgs []chat.Message) chatTemplate {
	r := harmonyRequest{names: map[string]string{}, dropBefore: -1}
	firstFinal, lastIsFinal := -1, false
	for i := range msgs {
		if msgs[i].Role != chat.RoleAssistant {
			continue
		}
		final := true
		for _, p := range msgs[i].Parts {
			if p.Type == chat.PartToolCall {
				final = false
				r.names[p.ToolCall.ID] = p.ToolCall.Name
			}
		}
		if final && firstFinal < 0 {
			firstFinal = i
		}
		lastIsFinal = final
	}
	if lastIsFinal {
		r.dropBefore = firstFinal
	}
	return r
}

// harmonyRequest is the harmony template for one request's messages.
type harmonyRequest struct {
	harmonyTemplate
	names      map[string]string // tool call id → name
	dropBefore int               // analysis before this message is dropped
}

func (r harmonyRequest) message(enc *Encoding, msgs []chat.Message, i int, _ bool) MessageCount {
	m := &msgs[i]
	n := 0
	var dropped []chat.PartType
	switch m.Role {
	case chat.RoleAssistant:
		text := messageText(m)
		calls := 0
		for _, p := range m.Parts {
			if p.Type != chat.PartToolCall {
				continue
			}
			calls++
			// <|start|> assistant to=functions.x <|channel|> commentary " "
			// <|constrain|> json <|message|> arguments <|call|>
			n += 5 + harmonyText(enc, "assistant") + harmonyText(enc, " to=functions."+p.ToolCall.Name) +
				harmonyText(enc, "commentary") + harmonyText(enc, " ") + harmonyText(enc, "json") +
				harmonyText(enc, p.ToolCall.Arguments)
		}
		channel := "final"
		if calls > 0 {
			channel = "analysis"
		}
		if calls == 0 || (text != "" && i >= r.dropBefore) {
			// <|start|> assistant <|channel|> channel <|message|> text <|end|>
			n += 4 + harmonyText(enc, "assistant") + harmonyText(enc, channel) + harmonyText(enc, text)
		} else {
			dropped = append(dropped, chat.PartText)
		}
	case chat.RoleTool:
		// <|start|> functions.x <|channel|> commentary <|message|> result <|end|>
		name := ""
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult {
				name = r.names[p.ToolResult.ToolCallID]
			}
		}
		n = 4 + harmonyText(enc, "functions."+name) + harmonyText(enc, "commentary") + harmonyText(enc, llamaContent(m))
	default:
		// <|start|> role <|message|> text <|end|>
		n = 3 + harmonyText(enc, string(m.Role)) + harmonyText(enc, messageText(m))
	}
	return templateMessageCount(enc, m, int64(n)+imageTokens(m), dropped...)
}
