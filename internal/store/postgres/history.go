package postgres

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// indexHistory adds a batch's entries to the history index; the last
// becomes the session's head. Same transaction as the messages' insert.
func (t *txn) indexHistory(ctx context.Context, tenant, sessionID string, entries []store.HistoryEntry) error {
	if len(entries) == 0 {
		return nil
	}
	if _, err := t.tx.Exec(ctx, `UPDATE history_index SET head = false WHERE tenant = $1 AND session_id = $2 AND head`, tenant, sessionID); err != nil {
		return err
	}
	lengths, chains, heads := make([]int64, len(entries)), make([]string, len(entries)), make([]bool, len(entries))
	for i, e := range entries {
		lengths[i], chains[i], heads[i] = e.Length, e.Chain, i == len(entries)-1
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO history_index (tenant, session_id, length, chain, head)
		SELECT $1, $2, * FROM unnest($3::bigint[], $4::text[], $5::boolean[])
		ON CONFLICT (tenant, session_id, length) DO UPDATE SET chain = excluded.chain, head = excluded.head`,
		tenant, sessionID, lengths, chains, heads)
	return err
}

// FindHistory: one statement; each chain reads at most limit rows of the
// index (tenant, chain, head), heads first, so a chain that many sessions
// share (a popular opening) costs limit rows, not one per session.
func (s *Store) FindHistory(ctx context.Context, tenant string, chains []string, limit int) ([]store.HistoryHit, error) {
	rows, err := s.pool.Query(ctx, `SELECT x.chain, x.session_id, x.length, x.head
		FROM unnest($2::text[]) AS c(chain) CROSS JOIN LATERAL (
			SELECT h.chain, h.session_id, h.length, h.head FROM history_index h
			JOIN sessions s ON s.tenant = h.tenant AND s.id = h.session_id AND s.deleted_at IS NULL
			WHERE h.tenant = $1 AND h.chain = c.chain ORDER BY h.head DESC LIMIT $3) x
		ORDER BY x.head DESC, x.length DESC LIMIT $3`, tenant, chains, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.HistoryHit
	for rows.Next() {
		var h store.HistoryHit
		if err := rows.Scan(&h.Chain, &h.SessionID, &h.Length, &h.Head); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}
