package gateway

import (
	"context"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// A client's request for the summary it compacts its history with.
// Claude Code's /compact asks for it with its history up to its last tool
// result and the compaction prompt instead of its final reply: a history
// that no longer extends the session's log, a fork until now (a session
// of its own, holding a copy, for one call whose answer never comes back
// as a reply: the client puts the summary into the first message of its
// compacted history). In the session the request's signal names, a
// request whose last message asks for a summary (summaryPrompts), that
// shares a prefix with the log and leaves out at most maxRepeatTail of
// the log's last messages, is answered from that session, nothing stored
// (historyAside): the view without the messages the request leaves out
// (as a repeat's, stripReplies), then the request's own messages after
// the prefix, as the client sent them, with the request's own model,
// system prompt and tools (the session's stay as they are). The call goes
// into the session's ledger. When the left-out messages are not the view's tail (a
// compaction moved them), the request is a fork as before. Codex asks
// with its whole history and the prompt as a new message: an extension,
// recorded as usual. Qwen Code asks so too, without a signal: an aside
// (unsignalled.go), nothing stored, so the log still ends with the call
// its compacted history keeps.

// historyAside: the request asks for a summary of the session's history
// (a client about to compact it): answered from the session, nothing
// stored.
const historyAside = "aside"

// maxAsideTail bounds the request's own messages after the shared prefix
// that an aside sends (the compaction prompt, and what a client puts
// beside it).
const maxAsideTail = 4

// summaryPrompts are the clients' requests for a summary of their history.
var summaryPrompts = []string{
	// Claude Code's /compact and auto-compact.
	"Your task is to create a detailed summary of the conversation so far",
	// Codex CLI (codex-rs core/templates/compact/prompt.md).
	"CONTEXT CHECKPOINT COMPACTION",
	// Qwen Code's chat compression (COMPRESSION_REQUEST_DIRECTIVE).
	"produce the <state_snapshot> XML",
}

// asksSummary reports whether m is a user message asking for a summary
// of the conversation (summaryPrompts).
func asksSummary(m *chat.Message) bool { return userSays(m, summaryPrompts) }

// userSays reports whether m is a user message with a text part that
// contains one of texts.
func userSays(m *chat.Message, texts []string) bool {
	if m.Role != chat.RoleUser {
		return false
	}
	for _, p := range m.Parts {
		for _, s := range texts {
			if p.Type == chat.PartText && strings.Contains(p.Text, s) {
				return true
			}
		}
	}
	return false
}

// aside resolves the request to session id as a summary request (ok),
// when its last message asks for one (summaryPrompts), after at most
// maxAsideTail messages of its own past the prefix it shares with the log
// (asideAt says where that prefix may end): the session's view is sent
// without the log's messages after the shared prefix (none when the
// request extends the log), and the request's own after it.
func aside(id string, c *conversation, sig signal, m *logMatch) (resolved, bool) {
	n := len(c.msgs)
	if m.noRepeat || !asideAt(m, sig, n) || n-m.k > maxAsideTail || !asksSummary(&c.msgs[n-1]) {
		return resolved{}, false
	}
	// Not followed (the session's model, system prompt and tools stay
	// its own): nothing is stored, and the request goes upstream with
	// its own (the door builds it from the request).
	return resolved{id: id, created: m.s.CreatedAt, version: m.s.Version, named: sig.owns(id), row: &m.s,
		history: historyAside, repeat: len(m.log) - m.k, repeatD: m.log[m.k:], tail: c.msgs[m.k:]}, true
}

// asideAt reports whether the request, of n messages, may leave the log
// where m says it does as a summary request: short of the log's end by at
// most maxRepeatTail messages (Claude Code asks with its history up to its
// last tool result), or past its end without a session signal (Qwen Code
// asks with its whole history; with a signal such an extension is
// recorded: Codex asks so, and its compaction is found by its signal). A
// request that is the log, repeats it or picks its last reply is not one.
func asideAt(m *logMatch, sig signal, n int) bool {
	switch {
	case m.extends:
		return sig.id == "" && n > m.k
	case m.repeat || m.pick != nil:
		return false
	default:
		return m.k > 0 && len(m.log)-m.k <= maxRepeatTail
	}
}

// asideFits reports whether an aside's own messages (tail) fit what its
// view leaves free of the usable window, with the room of the log's
// replies it leaves out (stripped from the view). The view
// was compacted to fit without them: Qwen Code's summary request carries
// its latest tool result and its directive, a few thousand tokens, and
// with a view near the compaction threshold the request went upstream
// past the window (the provider's 400; TestAsideOverTheWindow). One that
// does not fit goes as an extension (prepare's noRepeat): recorded, and
// compacted with its new messages like any request.
//
// The aside goes with the request's own model, system prompt and tools
// (c's), the view's usage counts the session's: what the request's take
// beyond the session's is counted with the tail
// (TestAsideOverTheWindowWithItsOwnTools), and so is what its model's
// window lacks of the session's model's. The view's usage is the
// provider's count where a report anchored or calibrated it, and the
// session's encoding counts less than the provider for an approximate
// model: what is counted here is scaled by the view's own ratio (its
// usage to its count with the encoding), never below 1
// (TestAsideOverTheWindowByTheProvidersCount: by the encoding's count the
// tail fit, by the provider's it went past the window). Counting the view
// again is bounded by the window: one count of the view, the replies left
// out, the tail and the request's system prompt and tools (countEach).
func (g *Gateway) asideFits(ctx context.Context, c *conversation, prep engine.PrepareResult, tail, stripped []chat.Message) (bool, error) {
	u := prep.Status.Usage
	// One count of the request's system prompt and tools, the view, the
	// replies left out and the tail (in the order they would be sent: a
	// provider's compaction block in the view hides what is before it
	// only), each read from its breakdown.
	own, n, err := g.countEach(ctx, u.Encoding, c.system, c.tools, prep.Messages, stripped, tail)
	if err != nil {
		return false, err
	}
	kept, freed, need := n[0], n[1], n[2]
	if local := kept + freed; local > 0 && u.MessagesTokens > local {
		need = need * u.MessagesTokens / local
		freed = freed * u.MessagesTokens / local
		own = own * u.MessagesTokens / local
	}
	need += max(own-u.SystemTokens-u.ToolsTokens, 0)
	if m, ok := g.cfg.Models.Lookup(c.model); ok && m.ContextWindow < u.ContextWindow {
		need += u.ContextWindow - m.ContextWindow // a model of a smaller window (TestAsideOverItsOwnModelsWindow)
	}
	return need <= u.Free+freed, nil
}

// countEach counts a system prompt and tools, and each group of messages,
// in one count of them all (the groups in order, as one request): own is
// the system prompt's and tools' tokens, each[i] the messages of group i
// (their framing, not the reply's priming). When that cannot count, each
// is counted by bytes, as count does. A provider's compaction block hides,
// in one count, what is before it, the earlier groups too: when a group
// after the first carries one, each group is counted alone
// (TestCountEach).
func (g *Gateway) countEach(ctx context.Context, encoding, system string, tools []chat.Tool, groups ...[]chat.Message) (own int64, each []int64, err error) {
	for _, msgs := range groups[min(1, len(groups)):] {
		if slices.ContainsFunc(msgs, func(m chat.Message) bool { return m.ProviderCompacted() }) {
			return g.countApart(ctx, encoding, system, tools, groups)
		}
	}
	return g.countTogether(ctx, encoding, system, tools, groups...)
}

// countApart is countEach with each group counted alone, and the system
// prompt and tools.
func (g *Gateway) countApart(ctx context.Context, encoding, system string, tools []chat.Tool, groups [][]chat.Message) (own int64, each []int64, err error) {
	each = make([]int64, len(groups))
	if own, _, err = g.countTogether(ctx, encoding, system, tools); err != nil {
		return 0, nil, err
	}
	for i, msgs := range groups {
		_, n, err := g.countTogether(ctx, encoding, "", nil, msgs)
		if err != nil {
			return 0, nil, err
		}
		each[i] = n[0]
	}
	return own, each, nil
}

// countTogether is countEach in one count.
func (g *Gateway) countTogether(ctx context.Context, encoding, system string, tools []chat.Tool, groups ...[]chat.Message) (own int64, each []int64, err error) {
	var all []chat.Message
	for _, msgs := range groups {
		all = append(all, msgs...)
	}
	each = make([]int64, len(groups))
	n, err := g.cfg.Engine.CountTokens(ctx, engine.CountInput{Encoding: encoding, System: system, Tools: tools, Messages: all})
	if err == nil && len(n.Breakdown.PerMsg) == len(all) {
		per := n.Breakdown.PerMsg
		for i, msgs := range groups {
			for _, m := range per[:len(msgs)] {
				each[i] += m.Tokens
			}
			per = per[len(msgs):]
		}
		return n.Breakdown.System + n.Breakdown.Tools, each, nil
	}
	if ctx.Err() != nil {
		return 0, nil, ctx.Err()
	}
	for i, msgs := range groups {
		each[i] = bytesTokens("", nil, msgs)
	}
	return bytesTokens(system, tools, nil), each, nil
}
