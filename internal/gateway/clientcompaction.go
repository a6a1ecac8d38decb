package gateway

import (
	"context"
	"slices"
	"strconv"

	"github.com/contextd/contextd/internal/chat"
)

// Client compactions (engine/clientcompaction.go): a client that compacts
// its own history — Codex CLI's auto-compaction (the initial context, the
// user messages it kept, its summary as a user message), a Responses
// input after /v1/responses/compact (the kept user messages, the
// `compaction` item, the next prompt), Claude Code's /compact (a history
// whose first user message is the summary) — sends a history that no
// longer extends its session's log. In the session its signal names
// (sig.id) that request is a client compaction, recorded in the same
// session, when (clientCompacts)
//
//   - it neither extends nor repeats the log, holds no more messages than
//     the log, and is much shorter than what the session holds: at most
//     1/compactedShare of the log's messages, or its text at most
//     1/compactedShare of the session's active view, or the view is empty
//     (nothing to weigh the text against; a twin of the request, a retry
//     or another replica, never leaves it so: its record and its append
//     are one transaction, and this request, matched again after it,
//     extends the compacted history it appended);
//   - and either it carries a summary the log does not hold, or holds only
//     among the messages its latest client compaction appended (the same
//     summary again, whatever the client kept around it: Codex keeps the
//     user messages typed since and puts its initial context after those
//     it kept before; not when the request repeats more of the log than
//     the compacted history: a rewind; nor where the request still shares
//     it with the log, or after a message the log does not hold: an edit
//     of a message after it or before it) (a provider
//     compaction item, a compaction block, or a user message with a
//     client's summary preamble, clientSummaryMarkers), or the messages it
//     keeps from the log (by identity) start with the log's first, are in
//     the log's order, come before the client's own and leave out a
//     message of the log before the last of them (not a prefix of it), or
//     it is the compacted history again (compactsAgain): the log restarted
//     at a client compaction, and the request repeats the messages that
//     compaction appended (the same kept messages, the same summary: a
//     client that compacts to the same history twice — a model that
//     writes the same summary, Codex's compaction with nothing new to
//     keep), then goes on or not, or fewer of them with the summary and
//     nothing else.
//
// A rewind or an edit (the log's first messages, then new ones: the
// client dropped or edited its last message(s) and goes on; after a
// restart, an edit of a message of the compacted history, or a rewind to
// the history before it, which starts as the compacted history does) is
// neither,
// and starts a session of its own as before (historyRewound, Edited,
// Forked). A request without a signal is looked up by its history only:
// a compacted history is a new conversation there (historyForked or new).
//
// Recorded: the whole active view is covered, in one transaction, as a
// compaction of tier engine.ClientCompactionTier (the originals stay in
// the log), and the request's whole history is appended as new, the first
// message marked metaHistoryRestart: the session's client history (the
// log cache's identities, logCache.get) restarts there, and the history
// index's heads are the new history's chains, so the client's next
// request, which extends the compacted history, extends this session
// (historyExtended). The record goes with the append of the compacted
// history, in one transaction (engine.ViewEdit.Compaction): a request that
// fails records neither. Work: one pass over the log's identities (held by
// the log cache) and at most two sets of the request's, only for a signalled
// request that no longer extends its session and is much shorter than it;
// then the record, planned on the view PrepareContext reads anyway.

// historyCompacted: the request is the client's compaction of its
// history, recorded in the same session (X-Contextd-History).
const historyCompacted = "compacted"

// metaHistoryRestart marks the first message of a client's compacted
// history in the log: the session's client history starts again there.
// Its value is how many messages the compacted history holds (restartLen;
// "1" in logs written before it said).
const metaHistoryRestart = chat.MetaGatewayPrefix + "history_restart"

// metaCompactionItem marks a message carrying a provider compaction item
// or block (carried.go), read or not.
const metaCompactionItem = chat.MetaGatewayPrefix + "compaction_item"

// compactedShare: a client compaction's request holds at most 1/2 of the
// log's messages, or at most 1/2 of the session's active view's tokens
// (its estimate, at 4 bytes a token).
const compactedShare = 2

// clientSummaryMarkers are the preambles with which clients introduce the
// summary of their compacted history.
var clientSummaryMarkers = []string{
	// Codex CLI (codex-rs core/templates/compact/summary_prefix.md).
	"Another language model started to solve this problem and produced a summary",
	// Claude Code's /compact and auto-compact.
	"This session is being continued from a previous conversation",
	// Qwen Code's chat compression (RESUME_TRAILER, after its
	// <state_snapshot>).
	"Resume the prior task using the summary above.",
}

// clientCompacts reports whether the request c, which neither extends nor
// repeats the session's log as m matched them, is the client's compaction
// of that history (the rule above).
func clientCompacts(m *logMatch, c *conversation) bool {
	if m == nil || m.extends || m.repeat || len(c.msgs) == 0 || len(c.msgs) > len(m.log) {
		return false
	}
	if !muchShorter(m, c) {
		return false
	}
	if compactsAgain(m, c) {
		return true
	}
	in, own := heldByLog(m, c)
	// The latest compaction's summary again counts only when the client
	// wrote it again, not where the request still shares it with the log
	// (before m.k: an edit of a later message), and only when the request
	// still holds every message that came before it in the compacted
	// history (keptBefore): a request that replaces one of them (an edit
	// of the compacted history's first message) and keeps the summary
	// after it is an edit, a fork as anywhere else; one that keeps them
	// and adds messages of its own before the summary (Codex compacting
	// again: the user's messages, a new prompt among them, then the
	// summary) is a compaction.
	var kept map[[32]byte]bool
	for i := range c.msgs {
		if !carriesSummary(&c.msgs[i]) {
			continue
		}
		if !in[c.ids[i]] {
			return true
		}
		if own[c.ids[i]] && i >= m.k {
			if kept == nil {
				kept = keptBefore(m, in)
			}
			if kept[c.ids[i]] {
				return true
			}
		}
	}
	// Without a summary, a kept subset starts with the log's opening (a
	// client keeps its initial context): a short request that quotes one
	// of the log's later messages (a client's side request — a title, a
	// topic — on a prompt typed before) is not one.
	return m.k > 0 && skipsLog(m.log, in, c.ids)
}

// muchShorter reports whether the request is much shorter than what the
// session holds: half the log's messages or half the view's tokens
// (contextd may have compacted the view already, and a client keeps
// files it read: Claude Code's /compact). An empty view (a cleared
// session) has nothing to weigh the request against: short enough.
func muchShorter(m *logMatch, c *conversation) bool {
	return len(c.msgs)*compactedShare <= len(m.log) || m.s.ActiveCount == 0 || approxTokens(c.msgs)*compactedShare <= m.s.ActiveTokens
}

// heldByLog is which of the request's identities the log holds (in), and
// which of them only the latest client compaction's messages hold (own:
// that compaction's own summary again counts as not held, unless the
// request goes on past the compacted history as the log does — a rewind
// that keeps more than it: a fork). Sets of the request's identities
// (bounded by the request, not by the log, which a short request may name
// however long it is), read in one pass over the log.
func heldByLog(m *logMatch, c *conversation) (in, own map[[32]byte]bool) {
	in = make(map[[32]byte]bool, len(c.ids))
	for _, d := range c.ids {
		in[d] = false
	}
	again := m.restart > 0 && m.k <= m.restart
	if again {
		own = make(map[[32]byte]bool)
	}
	for i, d := range m.log {
		if _, ok := in[d]; ok {
			in[d] = true
			if again && i < m.restart {
				own[d] = true
			}
		}
	}
	return in, own
}

// keptBefore is the latest client compaction's messages (the log's first
// m.restart) up to the first one the request (in: its identities) does
// not hold, that one included: a summary among them has every message
// before it kept. One pass over those messages, once a request; the set
// is bounded by the request's messages.
func keptBefore(m *logMatch, in map[[32]byte]bool) map[[32]byte]bool {
	kept := make(map[[32]byte]bool)
	for _, l := range m.log[:min(m.restart, len(m.log))] {
		kept[l] = true
		if _, ok := in[l]; !ok {
			break
		}
	}
	return kept
}

// compactsAgain reports whether the request, which neither extends nor
// repeats the log and is much shorter than it, is the client's compacted
// history again: the log (the client history since its latest restart)
// starts with the messages a client compaction appended (m.restart), and
// the request repeats them, its own messages after that or none, or fewer
// of them with the summary and nothing after. A rewind that keeps more of
// the history since the restart goes on past them (m.k > m.restart): a
// fork, as a rewind that is not much shorter; one that leaves them before
// their end and goes on is an edit of one of them (m.k < m.restart).
// A request that asks for a summary (asksSummary) is not one: it is the
// client's summary request, an aside or an extension (summaryrequest.go).
func compactsAgain(m *logMatch, c *conversation) bool {
	if m.restart == 0 || m.k == 0 || m.k > m.restart || asksSummary(&c.msgs[len(c.msgs)-1]) {
		return false
	}
	// The whole compacted history again, then the client's own or nothing;
	// or fewer of its messages, with its summary, and nothing after them.
	// A request that leaves the compacted history before its end and goes
	// on (an edit of the prompt that came with it, a rewind to the history
	// before the restart, which starts as the compacted history does) is
	// an edit or a fork, as anywhere else.
	return m.k == m.restart || m.k == len(c.msgs) && slices.ContainsFunc(c.msgs, func(x chat.Message) bool { return carriesSummary(&x) })
}

// restartLen is how many messages the client compaction whose first
// message is m appended (compacted's mark; 1 when the mark does not say).
func restartLen(m *chat.Message) int {
	if n, err := strconv.Atoi(m.Metadata[metaHistoryRestart]); err == nil && n > 0 {
		return n
	}
	return 1
}

// carriesSummary reports whether m carries a compacted history's summary:
// a provider compaction item or block, or a user message with a client's
// summary preamble.
func carriesSummary(m *chat.Message) bool {
	return m.Metadata[metaCompactionItem] != "" || userSays(m, clientSummaryMarkers)
}

// skipsLog reports whether the messages of ids the log holds (in) come
// first, are in the log's order and leave out a message of the log before
// the last of them: the client kept some of its history, not a prefix of
// it, then wrote its own.
func skipsLog(log [][32]byte, in map[[32]byte]bool, ids [][32]byte) bool {
	j, kept, skipped, own := 0, 0, false, false
	for _, id := range ids {
		if !in[id] {
			own = true
			continue
		}
		if own {
			// One of the log's messages after the client's own: a history
			// of its own that reads like the log here and there (a rewind
			// to before the restart whose reply says what a later one
			// said), not what a client kept.
			return false
		}
		from := j
		for j < len(log) && log[j] != id {
			j++
		}
		if j == len(log) {
			return false // out of the log's order
		}
		skipped = skipped || j > from
		j++
		kept++
	}
	return kept > 0 && skipped
}

// approxTokens estimates msgs' tokens at 4 bytes a token: what they say
// (messageSize) and what they carry.
func approxTokens(msgs []chat.Message) int64 {
	var n, carried int64
	for i := range msgs {
		n += messageSize(&msgs[i])
		for _, t := range msgs[i].Carried() {
			n += int64(len(t.Text))
			carried += t.Tokens
		}
	}
	return n/4 + carried
}

// compacted resolves the request to session id as its client's
// compaction (ok), when m says it is one (clientCompacts): the request's
// whole history is new, its first message restarts the client history.
// The compaction itself is recorded with the append, in PrepareContext's
// transaction (viewEdits: engine.ViewEdit.Compaction).
func (g *Gateway) compacted(ctx context.Context, tenant, id string, c *conversation, sig signal, m *logMatch) (res resolved, ok bool, err error) {
	if !clientCompacts(m, c) {
		return resolved{}, false, nil
	}
	return g.compactIn(ctx, tenant, id, c, sig, m)
}

// compactIn resolves the request to session id as its client's
// compaction of the history m matched.
func (g *Gateway) compactIn(ctx context.Context, tenant, id string, c *conversation, sig signal, m *logMatch) (res resolved, ok bool, err error) {
	res = resolved{id: id, created: m.s.CreatedAt, version: m.s.Version, named: sig.owns(id), row: &m.s,
		history: historyCompacted}
	if moved, err := g.follow(ctx, tenant, m.s, c); err != nil {
		return resolved{}, false, err
	} else if moved != nil {
		res.version, res.created, res.row = moved.Version, moved.CreatedAt, moved
	}
	// A copy: the restart's mark stays on this attempt, never on the
	// request's messages another attempt (after a conflict) matches.
	res.fresh = slices.Clone(c.msgs)
	historyStamp(c, res.fresh, 0)
	setMeta(&res.fresh[0], metaHistoryRestart, strconv.Itoa(len(res.fresh)))
	return res, true, nil
}

// restarts reports whether a log message starts a client's compacted
// history (logCache.get).
func restarts(m *chat.Message) bool {
	return m.Metadata[metaHistoryRestart] != ""
}
