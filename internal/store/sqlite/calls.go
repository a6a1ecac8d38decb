package sqlite

import (
	"context"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/store"
)

// FindCalls: one statement (the gateway asks for at most a few ids), each
// id reading at most limit rows of the index tool_calls_by_id (migration
// 00014); the limit is written into the statement, as FindHistory's is.
func (s *Store) FindCalls(ctx context.Context, tenant string, ids []string, limit int) ([]store.CallHit, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	q, args := perKey(`SELECT t.session_id, t.call_id, t.position FROM tool_calls t
			JOIN sessions s ON s.tenant = t.tenant AND s.id = t.session_id AND s.deleted_at IS NULL
			WHERE t.tenant = ? AND t.call_id = ?`, tenant, ids, limit)
	rows, err := reads{s}.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ReadCallHits(rows)
}

// perKey is one statement of the rows of query (its parameters tenant and
// a key) for each of keys, at most limit each (the limit written into the
// statement, as FindHistory's is), and its arguments.
func perKey(query, tenant string, keys []string, limit int) (string, []any) {
	parts := make([]string, len(keys))
	args := make([]any, 0, 2*len(keys))
	for i, k := range keys {
		parts[i] = `SELECT * FROM (` + query + ` LIMIT ` + strconv.Itoa(limit) + `)`
		args = append(args, tenant, k)
	}
	return strings.Join(parts, " UNION ALL "), args
}
