package tokens

import "github.com/contextd/contextd/internal/chat"

// qwen25Template is the chat template of Qwen 2.5 (and Qwen2.5-Coder): the
// ChatML turns and tool block of Qwen3's template without its reasoning
// rules, and a default system prompt when the request has none.
type qwen25Template struct{}

// qwen25DefaultSystem is the system prompt the template supplies when the
// conversation does not start with one.
const qwen25DefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

func (qwen25Template) replyPriming() int { return 3 } // <|im_start|> assistant \n

func (qwen25Template) prefix(enc *Encoding, system string, present bool, tools []chat.Tool) (int64, int64, []ToolCount) {
	if !present {
		system, present = qwen25DefaultSystem, true
	}
	return qwenPrefix(enc, system, present, tools)
}

func (qwen25Template) message(enc *Encoding, msgs []chat.Message, i int, context bool) MessageCount {
	return qwenMessage(enc, msgs, i, context, false, len(msgs))
}

func (qwen25Template) toolBytes(tools []chat.Tool) int { return qwenToolBytes(tools) }
