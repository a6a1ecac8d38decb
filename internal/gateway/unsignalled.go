package gateway

import (
	"context"
	"time"

	"github.com/contextd/contextd/internal/chat"
)

// Client compactions without a session signal. A client that compacts
// its own history and says nothing that names its session (Qwen Code's
// chat compression, talking to any OpenAI-compatible URL but its
// vendor's: docs/gateway.md) sends a history that extends no session's
// log: a summary as its first user message, a canned acknowledgement,
// and its latest tool call and result kept. Looked up by its history it
// was a new conversation, and the old session was left behind: a fork per
// compression. The calls it kept are the session's own: their ids were
// made by the provider for that conversation and are in its log only
// (store.CallFinder, one indexed read). A request without a session
// signal (a grouping hint is no session) that no session's log is a
// prefix of is that session's client compaction (unsignalledCompacts)
// when
//
//   - its latest calls (the ids of its assistant tool calls and tool
//     results, at most maxKeptCalls of them, the latest) are all held by
//     one live session of the tenant and by no other — an id two sessions
//     hold (a provider that numbers its calls from 0 in each conversation,
//     a fork's shared prefix) is no one's, and the request stays a new
//     conversation: a false match is worse than a fork;
//   - the latest of those calls is among the session log's last
//     maxKeptAge messages (a client compacts the history it is in);
//   - the request holds, before the first message that names a kept
//     call, a user message the log does not hold that carries a summary
//     (carriesSummary: Qwen Code's resume trailer; the latest client
//     compaction's own summary again counts as not held, heldByLog) — a
//     rewind repeats the log's opening up to the calls, and an edit of
//     an earlier user message that keeps the calls after it says no
//     summary: a fork as before (TestUnsignalledEditKeepingCallsForks).
//     Neither "much shorter" nor "no longer", as a signalled compaction
//     must be: Qwen Code compresses
//     after its first round as soon as its history passes its threshold
//     (its summary, the acknowledgement, the call and its result: more
//     messages than the log's two), and restores the files it read after
//     its summary; the calls it kept already say whose history it is.
//
// It is recorded as a signalled client compaction is (compactIn): in the
// same session, the whole view covered, the compacted history appended
// as the client's history restarting there. Two conversations that start
// alike and both compress stay two sessions: the calls each kept are its
// own (TestUnsignalledCompactionsStayApart).
//
// The client's summary request comes first: its whole history (extending
// the session's log) and a prompt asking for the summary
// (summaryPrompts). Without a signal it is an aside (summaryrequest.go):
// answered from the session's view and the request's own new messages,
// nothing stored, so the log still ends with the call the compacted
// history keeps. (With a signal, such an extension is recorded as before:
// Codex asks so, and its compaction is found by its signal.)
//
// Work, for a request without a session signal that extends no session
// only: one pass over its messages for at most maxKeptCalls ids; one
// indexed read of at most maxKeptSessions rows per id; then, for one session,
// its row and its log's identities (the log cache) and two sets bounded
// by the request, as for a signalled compaction. The index is the store's
// (migration 00014), so every replica finds the same session.

// maxKeptCalls bounds the call ids of a request that the lookup asks for.
const maxKeptCalls = 8

// maxKeptSessions bounds the rows the lookup reads per call id. Two
// sessions tell that the id is not one session's, but one session may
// hold a kept call twice (a compacted history makes it again,
// pairToolCalls), so the bound is the engine's, not 2.
const maxKeptSessions = 8

// maxKeptAge: the latest call a compacted history keeps is among its
// session log's last maxKeptAge messages.
const maxKeptAge = 16

// keptCalls is the ids of the latest calls the request names (its
// assistant tool calls and tool results), at most maxKeptCalls, and the
// index of the first message that names one of them.
func keptCalls(c *conversation) (ids []string, first int) {
	seen := make(map[string]bool)
	first = -1
	for i := len(c.msgs) - 1; i >= 0 && len(ids) < maxKeptCalls; i-- {
		m := &c.msgs[i]
		var named []string
		if id := resultOf(m); id != "" {
			named = append(named, id)
		}
		if m.Role == chat.RoleAssistant {
			for _, p := range m.Parts {
				if p.Type == chat.PartToolCall && p.ToolCall.ID != "" {
					named = append(named, p.ToolCall.ID)
				}
			}
		}
		for _, id := range named {
			if !seen[id] && len(ids) < maxKeptCalls {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		if len(named) > 0 {
			first = i
		}
	}
	return ids, first
}

// unsignalledCompaction resolves a request without a session signal, which
// extends no session, as its session's client compaction (ok), when the
// rule above holds. A request with a grouping hint (prompt_cache_key,
// user, metadata.user_id: a scope without a session) is not looked up:
// the lookups search the tenant's sessions, whatever their signal, and
// conversations of different signals never meet.
func (g *Gateway) unsignalledCompaction(ctx context.Context, tenant string, c *conversation, sig signal, noRepeat bool, until time.Time) (resolved, bool, error) {
	if sig.id != "" || sig.scope != "" || len(c.msgs) < 2 || c.msgs[0].Role != chat.RoleUser {
		return resolved{}, false, nil
	}
	ids, first := keptCalls(c)
	if len(ids) == 0 {
		return g.summarizedIn(ctx, tenant, c, sig, noRepeat, until) // unsignalledsummary.go
	}
	if first < 1 {
		return resolved{}, false, nil
	}
	hits, err := g.cfg.Engine.FindCalls(ctx, tenant, ids, maxKeptSessions)
	if err != nil {
		return resolved{}, false, err
	}
	id, latest, held := "", int64(0), make(map[string]bool, len(ids))
	for _, h := range hits {
		if id != "" && h.SessionID != id {
			return resolved{}, false, nil // not one session's calls
		}
		id, latest, held[h.CallID] = h.SessionID, max(latest, h.Position), true
	}
	if len(held) != len(ids) || g.busy(ctx, tenant, id, "", until) {
		return resolved{}, false, nil
	}
	m, err := g.match(ctx, tenant, id, c, noRepeat)
	if err != nil || m == nil {
		return resolved{}, false, hideSession(err, resolved{id: id, named: sig.owns(id)})
	}
	if m.s.LogCount-latest >= maxKeptAge {
		return resolved{}, false, nil
	}
	if res, ok := slimmedAside(id, c, sig, m); ok { // slimmedaside.go
		return res, true, nil
	}
	if !unsignalledCompacts(m, c, first, true) {
		return resolved{}, false, nil
	}
	res, ok, err := g.compactIn(ctx, tenant, id, c, sig, m)
	return res, ok, hideSession(err, resolved{id: id, named: sig.owns(id)})
}

// unsignalledCompacts reports whether the request, whose first message
// naming a kept call is c.msgs[first], is the client's compaction of the
// history m matched: neither an extension, a repeat nor a pick of it, and
// with a user message the log does not hold before that message (one
// carrying a summary, when summary says so).
func unsignalledCompacts(m *logMatch, c *conversation, first int, summary bool) bool {
	if m.extends || m.repeat || m.pick != nil {
		return false
	}
	in, own := heldByLog(m, c)
	for i := range first {
		if c.msgs[i].Role == chat.RoleUser && (!in[c.ids[i]] || own[c.ids[i]]) && (!summary || carriesSummary(&c.msgs[i])) {
			return true
		}
	}
	return false
}

// notStored reports whether the request's session is only read: a repeat
// or an aside, whose reply is not the session's.
func (r resolved) notStored() bool { return r.repeat > 0 || r.history == historyAside }
