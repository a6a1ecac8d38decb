package sqlite

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// A session's open tool calls were read in both transactions of a gateway
// request (to pair the tool results an append brings), two statements a
// request even for a session that has none. Migration 00016's triggers
// count them on the session row (open_calls), which a transaction reads
// with the row: a call's txn remembers the count of each session it read,
// and OpenToolCalls answers none without a statement while that count is
// 0 and the call has not written the session's tool calls since
// (PutToolCalls, InsertSession forget it). TestOpenCallsCounted.

// getSessionInTx is getSessionQuery with the open calls' count.
const getSessionInTx = `SELECT ` + sessionCols + `, open_calls FROM sessions WHERE tenant = ? AND id = ? AND deleted_at IS NULL`

func (t *txn) GetSession(ctx context.Context, tenant, id string) (store.Session, error) {
	var open int64
	s, err := scanSession(multiScanner{t.tx.QueryRowContext(ctx, getSessionInTx, tenant, id), []any{&open}})
	if err == nil {
		if t.openCalls == nil {
			t.openCalls = map[sessionKey]int64{}
		}
		t.openCalls[sessionKey{tenant, id}] = open
	}
	return s, err
}

func (t *txn) OpenToolCalls(ctx context.Context, tenant, sessionID string) ([]store.ToolCall, error) {
	if n, ok := t.openCalls[sessionKey{tenant, sessionID}]; ok && n == 0 {
		return nil, nil
	}
	rows, err := t.tx.QueryContext(ctx, `SELECT call_id, position FROM tool_calls
		WHERE tenant = ? AND session_id = ? AND result_position = 0 ORDER BY position, call_id`, tenant, sessionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.ToolCall
	for rows.Next() {
		var c store.ToolCall
		if err := rows.Scan(&c.CallID, &c.Position); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

type sessionKey struct{ tenant, id string }

// callsWritten forgets what the call knew of the session's open calls.
func (t *txn) callsWritten(tenant, sessionID string) {
	delete(t.openCalls, sessionKey{tenant, sessionID})
}
