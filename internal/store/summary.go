package store

// SessionSummary is a row of a listing: a session without its system prompt
// and tools (SystemPrompt is empty and Tools nil; SystemTokens and
// ToolsTokens still say what they cost), its newest compaction and its
// ledger. Its size does not grow with the session: a listing or a status
// reads a bounded row whatever the session holds.
type SessionSummary struct {
	Session
	// LastCompaction is the newest compaction (reverted or not), with only
	// ID, Round, Tiers, TokensBefore, TokensAfter, CreatedAt, ExpiresAt and
	// RevertedAt set (no items, summary or views); nil when there is none.
	LastCompaction *Compaction
	Ledger         Ledger
}

// SummaryJoins is the FROM clause both backends list summaries with, the
// session table aliased s: the newest compaction is the one of the
// session's compaction_round (a unique index on tenant, session_id, round),
// and each ledger kind is one primary-key lookup. Placeholders follow.
const SummaryJoins = ` FROM sessions s
	LEFT JOIN compactions c ON c.tenant = s.tenant AND c.session_id = s.id AND c.round = s.compaction_round AND s.compaction_round > 0
	LEFT JOIN session_ledger lc ON lc.tenant = s.tenant AND lc.session_id = s.id AND lc.kind = 'calls'
	LEFT JOIN session_ledger lo ON lo.tenant = s.tenant AND lo.session_id = s.id AND lo.kind = 'overhead'
	LEFT JOIN session_ledger le ON le.tenant = s.tenant AND le.session_id = s.id AND le.kind = 'estimated'`

// SummaryExtraCols are the columns a summary adds to the session's: the
// compaction (NULL when there is none) and the three ledger kinds (0 when
// nothing was recorded).
const SummaryExtraCols = `, c.id, c.round, c.tiers, c.tokens_before, c.tokens_after, c.created_at, c.expires_at, c.reverted_at,
	COALESCE(lc.calls, 0), COALESCE(lc.input_tokens, 0), COALESCE(lc.cache_read_tokens, 0), COALESCE(lc.cache_write_tokens, 0),
	COALESCE(lc.output_tokens, 0), COALESCE(lc.cost_nano_usd, 0), COALESCE(lc.unpriced_calls, 0),
	COALESCE(lo.calls, 0), COALESCE(lo.input_tokens, 0), COALESCE(lo.cache_read_tokens, 0), COALESCE(lo.cache_write_tokens, 0),
	COALESCE(lo.output_tokens, 0), COALESCE(lo.cost_nano_usd, 0), COALESCE(lo.unpriced_calls, 0),
	COALESCE(le.calls, 0), COALESCE(le.input_tokens, 0), COALESCE(le.cache_read_tokens, 0), COALESCE(le.cache_write_tokens, 0),
	COALESCE(le.output_tokens, 0), COALESCE(le.cost_nano_usd, 0), COALESCE(le.unpriced_calls, 0)`

// LedgerDest returns scan destinations for SummaryExtraCols' ledger
// columns, in order.
func (r *SessionSummary) LedgerDest() []any {
	c, o, e := &r.Ledger.Calls, &r.Ledger.Overhead, &r.Ledger.Estimated
	return []any{&c.Calls, &c.Input, &c.CacheRead, &c.CacheWrite, &c.Output, &c.CostNanoUSD, &c.Unpriced,
		&o.Calls, &o.Input, &o.CacheRead, &o.CacheWrite, &o.Output, &o.CostNanoUSD, &o.Unpriced,
		&e.Calls, &e.Input, &e.CacheRead, &e.CacheWrite, &e.Output, &e.CostNanoUSD, &e.Unpriced}
}
