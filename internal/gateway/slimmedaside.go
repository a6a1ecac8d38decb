package gateway

import "github.com/contextd/contextd/internal/engine"

// Qwen Code's other summary request. When its history does not fit beside
// the 20,000-token summary (or its provider shares no prompt cache), Qwen
// Code asks for the summary under its compression system prompt with a
// slimmed history: its history with the images and files of its messages
// replaced by placeholders, and, after a payload overflow, long tool
// outputs and call arguments cut (slimCompactionInput), then its
// directive. Without images or files in a user message the slimmed
// history is the history (a tool result is identified by its call, a call
// by its id and name: identityOf), and the request extends the session:
// an aside already (aside, summaryrequest.go). With one, it extends no session's log
// and, looked up by its history, was a fork: a session for one call.
//
// It keeps the session's calls as a compacted history does, and asks for
// a summary: a request without a signal whose latest calls are one live
// session's only (unsignalledCompaction's lookup, the latest among its
// log's last maxKeptAge messages), that neither extends nor repeats that
// log and whose last message asks for a summary (summaryPrompts), is an
// aside of that session (slimmedAside): nothing is stored, the call goes
// into the session's ledger (neither anchored nor calibrating: no count of
// contextd's is of what was sent, engine.ReportInput.Own), its answer is recorded as the session's latest
// summary (unsignalledsummary.go), and what goes upstream is the request
// as the client sent it (resolved.own), nothing of the session's view (nor
// contextd_expand, which would read the session's messages into it). The
// calls it keeps are the session's as for a compacted history, so a
// request that copies them gets no more than its own request answered, on
// that session's ledger, and the session named in no header.

// slimmedAside resolves a request without a signal that keeps the latest
// calls of session id, which m matched, and asks for a summary, as an
// aside answered with the request's own messages (ok).
func slimmedAside(id string, c *conversation, sig signal, m *logMatch) (resolved, bool) {
	n := len(c.msgs)
	if sig.id != "" || m.noRepeat || m.extends || m.repeat || m.pick != nil || !asksSummary(&c.msgs[n-1]) {
		return resolved{}, false
	}
	return resolved{id: id, created: m.s.CreatedAt, version: m.s.Version, named: sig.owns(id), row: &m.s,
		history: historyAside, tail: c.msgs, own: true}, true
}

// sendOwn makes prep send the request's own messages (res.tail) alone,
// without cache hints for the view and without the tools contextd adds
// (resolved.own): contextd_expand reads the session's stored messages,
// and the request is not its view
// (TestSlimmedSummaryRequestGoesWithoutExpandTool).
func sendOwn(prep *engine.PrepareResult, res resolved) {
	prep.Messages, prep.Delta, prep.Tools = res.tail, false, nil
	prep.Cache = engine.CacheHints{CompactionChangedFrom: -1}
}
