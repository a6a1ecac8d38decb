package tokens

import (
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// TemplateGemma3 is Gemma 3's chat template (Model.Template).
const TemplateGemma3 = "gemma3"

// gemma3Template is Gemma 3's chat template (tokenizer_config.json of
// google/gemma-3-*-it): <bos>, then each message a turn
// <start_of_turn>role\n content (trimmed) <end_of_turn>\n with the assistant
// as "model", the system prompt folded into the first turn as its text plus
// "\n\n", and the generation prompt <start_of_turn>model\n. The <bos> is
// counted with the reply priming, which every request has.
//
// The template has no tools: it renders neither tool declarations nor tool
// calls (an assistant turn is its text alone). It raises unless the roles
// alternate user/assistant from the first, so a request with a tool result
// after a tool call, or a system message mid-conversation, is refused by a
// server that serves Gemma 3 with its own template (vLLM answers 400). We
// count such a request as the template renders it without that check — a
// tool result a turn of role "tool" with the result as content, a later
// system message a "system" turn — so that sessions of agents that use
// tools with a Gemma deployment whose template does (a custom one) are still
// counted; the golden set checks every request the template renders, and
// that it raises for exactly the others.
type gemma3Template struct{}

func gemmaTurn(role, content string) string {
	return "<start_of_turn>" + role + "\n" + content + "<end_of_turn>\n"
}

func (gemma3Template) replyPriming() int { return 1 + 3 } // <bos>; <start_of_turn> model \n

// prefix counts the system prompt as folded into the first turn. A stored
// session's prompt is counted so even before its first message; a request
// without messages has no turn for it (gemma3Request).
func (gemma3Template) prefix(enc *Encoding, system string, present bool, tools []chat.Tool) (int64, int64, []ToolCount) {
	var sys int64
	if present {
		// The system prompt follows the first turn's "\n", which it joins
		// when it starts with a newline (a run of newlines is one token).
		// An empty one still adds its "\n\n" (the template tests the
		// role, and concatenates the content as it is).
		sys = int64(enc.Count("\n"+system+"\n\n") - enc.Count("\n"))
	}
	return sys, 0, make([]ToolCount, len(tools)) // the template ignores tools
}

// forRequest notes whether the request has a message: the system prompt
// is folded into the first turn, so without one it is not rendered.
func (t gemma3Template) forRequest(msgs []chat.Message) chatTemplate {
	return gemma3Request{gemma3Template: t, noTurn: len(msgs) == 0}
}

// gemma3Request is Gemma 3's template for one request.
type gemma3Request struct {
	gemma3Template
	noTurn bool // no message: the system prompt has no turn to go in
}

func (r gemma3Request) prefix(enc *Encoding, system string, present bool, tools []chat.Tool) (int64, int64, []ToolCount) {
	if r.noTurn {
		present = false
	}
	return r.gemma3Template.prefix(enc, system, present, tools)
}

func (gemma3Template) message(enc *Encoding, msgs []chat.Message, i int, _ bool) MessageCount {
	m := &msgs[i]
	role := string(m.Role)
	if m.Role == chat.RoleAssistant {
		role = "model"
	}
	text := gemmaTurn(role, gemmaContent(m))
	mc := templateMessageCount(enc, m, int64(enc.Count(text))+imageTokens(m), chat.PartToolCall)
	// The turn is short (5 tokens), so a part whose trimmed white space
	// counts more than that (byte-fallback characters) would leave the
	// framing negative: the breakdown then counts the parts as rendered.
	for i := 0; mc.Framing < 0 && i < len(mc.Parts); i++ {
		take := min(mc.Parts[i].Tokens, -mc.Framing)
		mc.Parts[i].Tokens -= take
		mc.Framing += take
	}
	return mc
}

// gemmaContent is a message's content as Gemma 3's template renders it
// when the server passes content as a list of parts, as vLLM does for this
// template (it iterates over message['content']): each text part trimmed,
// run together with nothing between. A tool result is a string content,
// trimmed whole.
func gemmaContent(m *chat.Message) string {
	if m.Role == chat.RoleTool {
		return llamaTrim(llamaContent(m))
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == chat.PartText {
			b.WriteString(llamaTrim(p.Text))
		}
	}
	return b.String()
}

// leadingSystem is a leading system message as Gemma 3's template reads
// it: messages[0]['content'][0]['text'], the first part's text untrimmed;
// later parts, images included, are not rendered. A first part that is not
// text makes the template raise under vLLM; it is counted as an empty
// system prompt.
func (gemma3Template) leadingSystem(m *chat.Message) (string, int64) {
	if len(m.Parts) > 0 && m.Parts[0].Type == chat.PartText {
		return m.Parts[0].Text, 0
	}
	return "", 0
}
