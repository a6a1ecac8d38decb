package postgres

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// AddLedger adds to a session's ledger with one atomic upsert: concurrent
// reports increment the same row and never lose one another. Totals
// saturate at store.LedgerCap instead of overflowing.
func (t *txn) AddLedger(ctx context.Context, tenant, sessionID string, kind store.LedgerKind, l store.LedgerTotals) error {
	return t.writeAside(ctx, nil, `INSERT INTO session_ledger AS l (tenant, session_id, kind, calls, input_tokens,
			cache_read_tokens, cache_write_tokens, output_tokens, cost_nano_usd, unpriced_calls)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (tenant, session_id, kind) DO UPDATE SET
			calls = LEAST(l.calls + excluded.calls, 4000000000000000000),
			input_tokens = LEAST(l.input_tokens + excluded.input_tokens, 4000000000000000000),
			cache_read_tokens = LEAST(l.cache_read_tokens + excluded.cache_read_tokens, 4000000000000000000),
			cache_write_tokens = LEAST(l.cache_write_tokens + excluded.cache_write_tokens, 4000000000000000000),
			output_tokens = LEAST(l.output_tokens + excluded.output_tokens, 4000000000000000000),
			cost_nano_usd = LEAST(l.cost_nano_usd + excluded.cost_nano_usd, 4000000000000000000),
			unpriced_calls = LEAST(l.unpriced_calls + excluded.unpriced_calls, 4000000000000000000)`,
		tenant, sessionID, string(kind), l.Calls, l.Input, l.CacheRead, l.CacheWrite, l.Output, l.CostNanoUSD, l.Unpriced)
}

// GetLedger returns a session's ledger.
func (s *Store) GetLedger(ctx context.Context, tenant, sessionID string) (_ store.Ledger, err error) {
	defer unavailable(&err)
	var out store.Ledger
	rows, err := s.pool.Query(ctx, `SELECT kind, calls, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
		cost_nano_usd, unpriced_calls FROM session_ledger WHERE tenant = $1 AND session_id = $2`, tenant, sessionID)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var l store.LedgerTotals
		if err := rows.Scan(&kind, &l.Calls, &l.Input, &l.CacheRead, &l.CacheWrite, &l.Output, &l.CostNanoUSD, &l.Unpriced); err != nil {
			return out, err
		}
		switch store.LedgerKind(kind) {
		case store.LedgerCalls:
			out.Calls = l
		case store.LedgerOverhead:
			out.Overhead = l
		case store.LedgerEstimated:
			out.Estimated = l
		}
	}
	return out, rows.Err()
}

func (t *txn) GetPreparedView(ctx context.Context, tenant, sessionID string) (store.PreparedView, error) {
	if v, ok, err := t.aheadView(tenant, sessionID); ok {
		return v, err
	}
	return scanPreparedView(t.tx.QueryRow(ctx, preparedView, tenant, sessionID))
}

func (t *txn) PutPreparedView(ctx context.Context, tenant, sessionID string, v store.PreparedView) error {
	t.track.putHints(heldKey{tenant, sessionID}, v)
	return t.write(ctx, nil, `INSERT INTO prepared_views (tenant, session_id, fixed, message_ids, view_token) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant, session_id) DO UPDATE SET fixed = excluded.fixed, message_ids = excluded.message_ids,
			view_token = excluded.view_token`,
		tenant, sessionID, v.Fixed, store.EncodeIDRuns(v.IDs), v.ViewToken)
}
