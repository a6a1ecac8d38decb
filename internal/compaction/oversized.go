package compaction

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

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
// Only results over tokens are cut: planCompaction cuts those larger than
// the usable window first, before the tiers (they can never go whole, and
// pruning, summarizing or dropping the history beside them makes no room
// for them), and any left, largest first, last. The first pass takes only
// the newest, protected results (ProtectRecentToolResults): an older one
// is the prune tier's, which leaves a shorter placeholder with its facts.
// Work: one pass over the view per result cut.
func (p *planner) cutOversizedResults(over int64) {
	keep := p.protected()
	names := callNames(p.view)
	var recent map[int]bool
	if over > 0 {
		recent = recentResults(p.view, p.req.Policy.ProtectRecentToolResults)
	}
	// floor is what no tier shrinks: the fixed part and the protected
	// messages. A head and tail that cannot fit beside it leave the short
	// placeholder instead (a small window, a long system prompt).
	floor := p.req.Fixed
	for i := range p.view {
		if keep[p.view[i].ID] {
			floor += p.view[i].Tokens
		}
	}
	for p.used() > p.req.Usable() {
		largest := -1
		for i := range p.view {
			m := &p.view[i]
			if toolResultOf(m) == nil || keep[m.ID] || m.Kind != chat.KindNormal || m.Tokens < minPruneTokens ||
				over > 0 && (m.Tokens <= over || !recent[i]) {
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
		repl, ok := headTailResult(m, names, p.req.Policy.Expander())
		if ok {
			repl.Tokens = p.req.Count(&repl)
		}
		reason := "tool output past the window: kept head and tail"
		if !ok || floor+repl.Tokens > p.req.Usable() {
			repl = placeholderFor(m, "", false, names, p.req.Policy.Expander())
			reason = "tool output past the window: placeholder"
		}
		p.replace(largest, repl, TierPrune, reason)
	}
}

// headTailResult keeps the head and tail of a tool result's output around
// a placeholder; false when the output is too short to cut.
func headTailResult(m *chat.Message, names map[string]string, via Expander) (chat.Message, bool) {
	tr := toolResultOf(m)
	if tr == nil || len(tr.Content) <= headChars+tailChars+200 {
		return chat.Message{}, false
	}
	name := names[tr.ToolCallID]
	if name == "" {
		name = "a tool"
	}
	head, tail := boundaryHead(tr.Content, headChars), boundaryTail(tr.Content, tailChars)
	// Plain concatenation, not fmt: the output may be megabytes.
	text := head + "\n[contextd pruned " + strconv.Itoa(len(tr.Content)-len(head)-len(tail)) +
		" characters of this output of " + name + " here (the request did not fit the window with it whole). " +
		readOutput(via, m.ID, "them") + "]\n" + tail
	out := chat.Message{Role: m.Role, Name: m.Name, Kind: chat.KindPlaceholder, Metadata: m.Metadata,
		Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: tr.ToolCallID, Content: text, IsError: tr.IsError}}}}
	return out, true
}

// boundaryHead is the first n bytes of s or fewer, ending before a line
// break (a `cat` of a file keeps whole lines), else before a space or tab
// (whole words, identifiers and paths), else at a grapheme boundary (no
// ZWJ sequence or combining mark split), found in the last half of the n
// bytes; at a UTF-8 boundary when there is none. A cut mid-line misleads:
// a tail that starts "345: config" of line 12345. Work: O(n).
func boundaryHead(s string, n int) string {
	h := safePrefix(s, n)
	least := len(h) / 2
	if i := strings.LastIndexByte(h, '\n'); i >= least {
		return h[:i]
	}
	if i := strings.LastIndexAny(h, " \t"); i >= least {
		return h[:i]
	}
	for i := len(h); i > least; {
		if graphemeBreak(s, i) {
			return h[:i]
		}
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return h
}

// boundaryTail is boundaryHead's mirror: the last n bytes of s or fewer,
// starting after a line break, else after a space or tab, else at a
// grapheme boundary, found in the first half of those n bytes.
func boundaryTail(s string, n int) string {
	t := safeSuffix(s, n)
	most := len(t) / 2
	if j := strings.IndexByte(t, '\n'); j >= 0 && j < most {
		return t[j+1:]
	}
	if j := strings.IndexAny(t, " \t"); j >= 0 && j < most {
		return t[j+1:]
	}
	start := len(s) - len(t)
	for i := start; i < start+most; {
		if graphemeBreak(s, i) {
			return s[i:]
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return t
}

// graphemeBreak reports whether s may be cut before byte i without
// splitting what shows as one character: not after a zero-width joiner,
// not before one, a combining mark, a variation selector, an emoji
// modifier or a tag character (regional indicator pairs are not told
// apart).
func graphemeBreak(s string, i int) bool {
	if i <= 0 || i >= len(s) {
		return true
	}
	if prev, _ := utf8.DecodeLastRuneInString(s[:i]); prev == '\u200d' {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == '\u200d', unicode.Is(unicode.M, r), r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF,
		r >= 0x1F3FB && r <= 0x1F3FF, r >= 0xE0020 && r <= 0xE007F:
		return false
	}
	return true
}
