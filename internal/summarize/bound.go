package summarize

import (
	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// MaxExtractiveChars bounds the text the extractive summarizer reads, as
// MaxTranscriptChars bounds an LLM's prompt: each text, tool call's
// arguments and tool result is cut to its head and tail at MaxSectionChars
// (the first lines and sentences it extracts stay), the original task and
// the previous summary likewise, and when the messages still hold more than
// this, the oldest are left out (the previous summary carries them). Its
// work is then linear in at most this much text, whatever the view.
const MaxExtractiveChars = 1 << 20

// boundInput returns in with its texts cut as MaxExtractiveChars says;
// messages that need no cut are shared, not copied.
func boundInput(in compaction.SummaryInput) compaction.SummaryInput {
	in.OriginalTask = cut(in.OriginalTask, MaxSectionChars)
	in.Previous = cut(in.Previous, MaxSectionChars)
	msgs := make([]chat.Message, len(in.Messages))
	total, first := 0, 0
	for i := len(in.Messages) - 1; i >= 0; i-- {
		m, n := boundMessage(in.Messages[i])
		if total+n > MaxExtractiveChars && i < len(in.Messages)-1 {
			first = i + 1
			break
		}
		total += n
		msgs[i] = m
	}
	in.Messages = msgs[first:]
	return in
}

// boundMessage cuts m's texts to MaxSectionChars each and returns it with
// the bytes of text it keeps.
func boundMessage(m chat.Message) (chat.Message, int) {
	n, long := 0, false
	for _, p := range m.Parts {
		l := len(p.Text)
		if p.ToolCall != nil {
			l = len(p.ToolCall.Arguments)
		}
		if p.ToolResult != nil {
			l = len(p.ToolResult.Content)
		}
		long = long || l > MaxSectionChars
		n += min(l, MaxSectionChars)
	}
	if !long {
		return m, n
	}
	parts := make([]chat.Part, len(m.Parts))
	for i, p := range m.Parts {
		p.Text = cut(p.Text, MaxSectionChars)
		if c := p.ToolCall; c != nil {
			cc := *c
			cc.Arguments = cut(cc.Arguments, MaxSectionChars)
			p.ToolCall = &cc
		}
		if r := p.ToolResult; r != nil {
			rr := *r
			rr.Content = cut(rr.Content, MaxSectionChars)
			p.ToolResult = &rr
		}
		parts[i] = p
	}
	m.Parts = parts
	return m, n
}
