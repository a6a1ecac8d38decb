package sqlite

import (
	"context"
	"errors"

	"database/sql"

	"github.com/contextd/contextd/internal/store"
)

// AddLedger adds to a session's ledger with one atomic upsert: concurrent
// reports increment the same row and never lose one another. Totals
// saturate at store.LedgerCap instead of overflowing.
func (t *txn) AddLedger(ctx context.Context, tenant, sessionID string, kind store.LedgerKind, l store.LedgerTotals) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO session_ledger AS l (tenant, session_id, kind, calls, input_tokens,
			cache_read_tokens, cache_write_tokens, output_tokens, cost_nano_usd, unpriced_calls)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, session_id, kind) DO UPDATE SET
			calls = MIN(l.calls + excluded.calls, 4000000000000000000),
			input_tokens = MIN(l.input_tokens + excluded.input_tokens, 4000000000000000000),
			cache_read_tokens = MIN(l.cache_read_tokens + excluded.cache_read_tokens, 4000000000000000000),
			cache_write_tokens = MIN(l.cache_write_tokens + excluded.cache_write_tokens, 4000000000000000000),
			output_tokens = MIN(l.output_tokens + excluded.output_tokens, 4000000000000000000),
			cost_nano_usd = MIN(l.cost_nano_usd + excluded.cost_nano_usd, 4000000000000000000),
			unpriced_calls = MIN(l.unpriced_calls + excluded.unpriced_calls, 4000000000000000000)`,
		tenant, sessionID, string(kind), l.Calls, l.Input, l.CacheRead, l.CacheWrite, l.Output, l.CostNanoUSD, l.Unpriced)
	return err
}

// GetLedger returns a session's ledger.
func (s *Store) GetLedger(ctx context.Context, tenant, sessionID string) (store.Ledger, error) {
	var out store.Ledger
	rows, err := reads{s}.QueryContext(ctx, `SELECT kind, calls, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
		cost_nano_usd, unpriced_calls FROM session_ledger WHERE tenant = ? AND session_id = ?`, tenant, sessionID)
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
	var v store.PreparedView
	var ids string
	err := t.tx.QueryRowContext(ctx, `SELECT fixed, message_ids, view_token FROM prepared_views WHERE tenant = ? AND session_id = ?`,
		tenant, sessionID).Scan(&v.Fixed, &ids, &v.ViewToken)
	if errors.Is(err, sql.ErrNoRows) {
		return v, store.ErrNotFound
	}
	v.IDs = store.DecodeIDRuns(ids)
	return v, err
}

func (t *txn) PutPreparedView(ctx context.Context, tenant, sessionID string, v store.PreparedView) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO prepared_views (tenant, session_id, fixed, message_ids, view_token) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, session_id) DO UPDATE SET fixed = excluded.fixed, message_ids = excluded.message_ids,
			view_token = excluded.view_token`,
		tenant, sessionID, v.Fixed, store.EncodeIDRuns(v.IDs), v.ViewToken)
	return err
}
