package tokens

import (
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// deepseekV3Template is DeepSeek V3's chat template (tokenizer_config.json of
// DeepSeek-V3): <｜begin▁of▁sentence｜>, the system prompt as bare text,
// <｜User｜> and <｜Assistant｜> turns closed by <｜end▁of▁sentence｜>, tool
// results between <｜tool▁output▁begin｜> and <｜tool▁output▁end｜>. Tools are
// not declared. The template renders an assistant message's tool calls only
// when its content is null and the arguments a string; servers pass the
// content as a string (vLLM: the joined text parts, "" for none) and the
// arguments parsed, so what is rendered, and counted, is the content alone.
//
// Every neighbour-dependent piece costs the same either way — the first tool
// result opens the outputs block (<｜tool▁outputs▁begin｜>) where a later one
// has "\n"; the turn after results opens with <｜tool▁outputs▁end｜> instead of
// <｜Assistant｜> — so a message counts the same alone as in a request. The
// begin-of-sentence token is counted with the system prompt, which every
// request has, empty or not. A system message later in the conversation
// joins the system prompt at the top ("\n\n" between them); a request
// counts the joined prompt, a stored message "\n\n" and its text.
type deepseekV3Template struct{}

const (
	deepseekBOS = "<｜begin▁of▁sentence｜>"
	deepseekEOS = "<｜end▁of▁sentence｜>"
)

func (deepseekV3Template) replyPriming() int { return 1 } // <｜Assistant｜> (or <｜tool▁outputs▁end｜>)

// prefix: the template concatenates the system prompts, so an empty one
// adds nothing by itself (but a later one then follows "\n\n").
func (deepseekV3Template) prefix(enc *Encoding, system string, _ bool, tools []chat.Tool) (int64, int64, []ToolCount) {
	return int64(enc.Count(deepseekBOS + system)), 0, make([]ToolCount, len(tools))
}

// forRequest gathers the request's later system messages, which the
// template moves into the system prompt.
func (t deepseekV3Template) forRequest(msgs []chat.Message) chatTemplate {
	var r deepseekRequest
	for i := range msgs {
		if isSystemLike(msgs[i].Role) {
			r.later = append(r.later, messageText(&msgs[i]))
		}
	}
	return r
}

func isSystemLike(r chat.Role) bool {
	return r != chat.RoleUser && r != chat.RoleAssistant && r != chat.RoleTool
}

// deepseekRequest is DeepSeek V3's template for one request.
type deepseekRequest struct {
	deepseekV3Template
	later []string // the texts of later system messages
}

func (r deepseekRequest) prefix(enc *Encoding, system string, present bool, tools []chat.Tool) (int64, int64, []ToolCount) {
	if len(r.later) == 0 {
		return r.deepseekV3Template.prefix(enc, system, present, tools)
	}
	var b strings.Builder
	b.WriteString(deepseekBOS + system)
	for i, s := range r.later {
		if i > 0 || present {
			b.WriteString("\n\n")
		}
		b.WriteString(s)
	}
	return int64(enc.Count(b.String())), 0, make([]ToolCount, len(tools))
}

func (r deepseekRequest) message(enc *Encoding, msgs []chat.Message, i int, context bool) MessageCount {
	if isSystemLike(msgs[i].Role) { // counted in the system prompt
		return templateMessageCount(enc, &msgs[i], 0, chat.PartText, chat.PartImage)
	}
	return r.deepseekV3Template.message(enc, msgs, i, context)
}

func (deepseekV3Template) message(enc *Encoding, msgs []chat.Message, i int, _ bool) MessageCount {
	m := &msgs[i]
	var text string
	switch m.Role {
	case chat.RoleUser:
		text = "<｜User｜>" + messageText(m)
	case chat.RoleAssistant:
		text = "<｜Assistant｜>" + messageText(m) + deepseekEOS
	case chat.RoleTool:
		text = "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>" + llamaContent(m) + "<｜tool▁output▁end｜>"
	default:
		// A later system message joins the system prompt at the top,
		// after "\n\n".
		text = "\n\n" + messageText(m)
	}
	return templateMessageCount(enc, m, int64(enc.Count(text))+imageTokens(m), chat.PartToolCall)
}
