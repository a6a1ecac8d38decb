package sqlite

import (
	"context"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// purgeListBatch is how many sessions one listing read returns;
// purgeDeleteBatch how many message ids one DELETE names.
const (
	purgeListBatch   = 100
	purgeDeleteBatch = 500
)

// Purge deletes what retention no longer keeps. Deleted sessions and old
// idempotency records go in one statement each; messages go one session
// per transaction (store.Retained decides what stays), so the writer is
// held for one session's work at a time and appends to other sessions run
// between them.
func (s *Store) Purge(ctx context.Context, cutoff, now time.Time) (store.Purged, error) {
	var p store.Purged
	var err error
	if p.Sessions, err = s.purgeDeletedSessions(ctx, cutoff); err != nil { // fork.go
		return p, err
	}
	var afterTenant, afterID string
	for {
		// Only sessions with a message old enough to go (the primary key
		// finds each session's messages).
		rows, err := s.db.QueryContext(ctx, `SELECT tenant, id FROM sessions s WHERE (tenant, id) > (?, ?)
			AND EXISTS (SELECT 1 FROM messages m WHERE m.tenant = s.tenant AND m.session_id = s.id AND m.created_at < ?)
			ORDER BY tenant, id LIMIT ?`, afterTenant, afterID, cutoff.UnixNano(), purgeListBatch)
		if err != nil {
			return p, err
		}
		var batch [][2]string
		for rows.Next() {
			var k [2]string
			if err := rows.Scan(&k[0], &k[1]); err != nil {
				rows.Close()
				return p, err
			}
			batch = append(batch, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return p, err
		}
		p.Examined += int64(len(batch))
		for _, k := range batch {
			n, work, err := s.purgeSession(ctx, k[0], k[1], cutoff, now)
			if err != nil {
				return p, err
			}
			p.Messages += n
			p.Examined += work
		}
		if len(batch) < purgeListBatch {
			break
		}
		afterTenant, afterID = batch[len(batch)-1][0], batch[len(batch)-1][1]
	}
	p.IdempotencyKeys, err = s.purgeExec(ctx, `DELETE FROM idempotency_keys WHERE created_at < ?`, now.Add(-24*time.Hour).UnixNano())
	return p, err
}

// purgeExec runs one delete in its own write turn.
func (s *Store) purgeExec(ctx context.Context, query string, args ...any) (int64, error) {
	unlock, err := s.lockWriter(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// purgeSession deletes one session's old messages that store.Retained does
// not keep. What is kept is read in one transaction (a consistent view of
// the session); the doomed messages then go purgeDeleteBatch a statement,
// each in a write turn of its own, so the writer is never held for a large
// session's whole purge. A message found doomed stays doomed: nothing can
// bring it back into reach (a compaction replaces messages of the view, a
// revert restores a view that was a root), so deleting in batches loses
// nothing, and a purge cut short between batches is finished by the next.
// Its reads and work are linear in the session's view, its revertible
// compactions' views, its compaction items and its old messages.
func (s *Store) purgeSession(ctx context.Context, tenant, sessionID string, cutoff, now time.Time) (deleted, work int64, err error) {
	doomed, work, err := s.doomed(ctx, tenant, sessionID, cutoff, now)
	if err != nil {
		return 0, 0, err
	}
	for len(doomed) > 0 {
		n := min(len(doomed), purgeDeleteBatch)
		args := []any{tenant, sessionID}
		for _, id := range doomed[:n] {
			args = append(args, id)
		}
		k, err := s.purgeExec(ctx, `DELETE FROM messages WHERE tenant = ? AND session_id = ? AND id IN (?`+
			strings.Repeat(", ?", n-1)+`)`, args...)
		if err != nil {
			return deleted, work, err
		}
		deleted += k
		doomed = doomed[n:]
	}
	return deleted, work, nil
}

// doomed reads, in one transaction, which of a session's messages older
// than cutoff retention no longer keeps.
func (s *Store) doomed(ctx context.Context, tenant, sessionID string, cutoff, now time.Time) ([]string, int64, error) {
	unlock, err := s.lockWriter(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, err
	}
	defer tx.Rollback()
	roots, err := queryStrings(ctx, tx, `SELECT message_id FROM view_entries v WHERE tenant = ? AND session_id = ? AND gen = `+currentGen, tenant, sessionID)
	if err != nil {
		return nil, 0, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT items, CASE WHEN reverted_at IS NULL AND expires_at > ? THEN view_before ELSE '[]' END
		FROM compactions WHERE tenant = ? AND session_id = ?`, now.UnixNano(), tenant, sessionID)
	if err != nil {
		return nil, 0, err
	}
	var items []store.CompactionItem
	for rows.Next() {
		var itemsText, viewText string
		if err := rows.Scan(&itemsText, &viewText); err != nil {
			rows.Close()
			return nil, 0, err
		}
		if roots, items, err = store.AppendRetentionInputs(roots, items, itemsText, viewText); err != nil {
			rows.Close()
			return nil, 0, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	old, err := queryStrings(ctx, tx, `SELECT id FROM messages WHERE tenant = ? AND session_id = ? AND created_at < ?`,
		tenant, sessionID, cutoff.UnixNano())
	if err != nil {
		return nil, 0, err
	}
	doomed, work := store.Doomed(roots, items, old)
	return doomed, work, nil
}

// queryStrings reads one text column.
func queryStrings(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (s *Store) CloseIdleSessions(ctx context.Context, label string, idleBefore, now time.Time, limit int) (int64, error) {
	var total int64
	for {
		// One batch per statement, so the writer is held briefly.
		n, err := s.purgeExec(ctx, `UPDATE sessions SET deleted_at = ?, version = version + 1
			WHERE rowid IN (SELECT rowid FROM sessions WHERE deleted_at IS NULL AND updated_at < ?
				AND EXISTS (SELECT 1 FROM json_each(sessions.labels) WHERE json_each.key = ?) LIMIT ?)`,
			now.UnixNano(), idleBefore.UnixNano(), label, limit)
		total += n
		if err != nil || n < int64(limit) {
			return total, err
		}
	}
}
