package postgres

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// FindCalls: one statement; each id reads at most limit rows of the index
// tool_calls_by_id (migration 00014).
func (s *Store) FindCalls(ctx context.Context, tenant string, ids []string, limit int) (_ []store.CallHit, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT x.session_id, x.call_id, x.position
		FROM unnest($2::text[]) AS c(id) CROSS JOIN LATERAL (
			SELECT t.session_id, t.call_id, t.position FROM tool_calls t
			JOIN sessions s ON s.tenant = t.tenant AND s.id = t.session_id AND s.deleted_at IS NULL
			WHERE t.tenant = $1 AND t.call_id = c.id LIMIT $3) x`, tenant, ids, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ReadCallHits(rows)
}
