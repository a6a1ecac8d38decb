package compaction

import (
	"strconv"

	"github.com/contextd/contextd/internal/chat"
)

// cutOversizedResults is the last step before a request is refused as too
// large. The newest tool results are protected from pruning (the model
// needs what its latest calls returned), so one larger than the window
// (an agent loop that does not cut its outputs: a `cat` of a 1 MB file)
// kept every request of the conversation past the window for good. Such a
// result, largest first, while the request does not fit, keeps its head
// and tail around a placeholder that says how to read the rest (as a long
// old message does, headTail); it is reversible like any pruning.
// Results contextd replaced already, and the protected messages (the
// original task, pinned ones, the latest user message), are left alone.
// Work: one pass over the view per result cut.
func (p *planner) cutOversizedResults() {
	keep := p.protected()
	names := callNames(p.view)
	for p.used() > p.req.Usable() {
		largest := -1
		for i := range p.view {
			m := &p.view[i]
			if toolResultOf(m) == nil || keep[m.ID] || m.Kind != chat.KindNormal || m.Tokens < minPruneTokens {
				continue
			}
			if largest < 0 || m.Tokens > p.view[largest].Tokens {
				largest = i
			}
		}
		if largest < 0 {
			return
		}
		m := &p.view[largest]
		repl, ok := headTailResult(m, names, p.req.Policy.ExposeExpandTool)
		if !ok {
			repl = placeholderFor(m, "", false, names, p.req.Policy.ExposeExpandTool)
		}
		p.replace(largest, repl, TierPrune, "tool output larger than the window: kept head and tail")
	}
}

// headTailResult keeps the head and tail of a tool result's output around
// a placeholder; false when the output is too short to cut.
func headTailResult(m *chat.Message, names map[string]string, tool bool) (chat.Message, bool) {
	tr := toolResultOf(m)
	if tr == nil || len(tr.Content) <= headChars+tailChars+200 {
		return chat.Message{}, false
	}
	name := names[tr.ToolCallID]
	if name == "" {
		name = "a tool"
	}
	head, tail := safePrefix(tr.Content, headChars), safeSuffix(tr.Content, tailChars)
	// Plain concatenation, not fmt: the output may be megabytes.
	text := head + "\n[contextd pruned " + strconv.Itoa(len(tr.Content)-len(head)-len(tail)) +
		" characters of this output of " + name + " here (it was larger than the window). " +
		expandCall(tool, m.ID) + " to read them.]\n" + tail
	out := chat.Message{Role: m.Role, Name: m.Name, Kind: chat.KindPlaceholder, Metadata: m.Metadata,
		Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: tr.ToolCallID, Content: text, IsError: tr.IsError}}}}
	return out, true
}
