package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
// per transaction (store.Retained decides what stays), holding that
// session's row lock, so no transaction spans more than one session.
func (s *Store) Purge(ctx context.Context, cutoff, now time.Time) (_ store.Purged, err error) {
	defer unavailable(&err)
	var p store.Purged
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at < $1`, cutoff)
	if err != nil {
		return p, err
	}
	p.Sessions = tag.RowsAffected()
	var afterTenant, afterID string
	for {
		// Only sessions with a message old enough to go (the primary key
		// finds each session's messages).
		rows, err := s.pool.Query(ctx, `SELECT tenant, id FROM sessions s WHERE (tenant, id) > ($1, $2)
			AND EXISTS (SELECT 1 FROM messages m WHERE m.tenant = s.tenant AND m.session_id = s.id AND m.created_at < $3)
			ORDER BY tenant, id LIMIT $4`, afterTenant, afterID, cutoff, purgeListBatch)
		if err != nil {
			return p, err
		}
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
			var k [2]string
			return k, r.Scan(&k[0], &k[1])
		})
		if err != nil {
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
	tag, err = s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE created_at < $1`, now.Add(-24*time.Hour))
	if err != nil {
		return p, err
	}
	p.IdempotencyKeys = tag.RowsAffected()
	return p, nil
}

// purgeSession deletes one session's old messages that store.Retained does
// not keep. What is kept is read in one transaction holding the session's
// row lock (as every write to the session does); the doomed messages then
// go purgeDeleteBatch a statement, each its own transaction. A message
// found doomed stays doomed (nothing can bring it back into reach), so
// deleting in batches loses nothing, and a purge cut short between
// batches is finished by the next. Its reads and work are linear in the
// session's view, its revertible compactions' views, its compaction items
// and its old messages.
func (s *Store) purgeSession(ctx context.Context, tenant, sessionID string, cutoff, now time.Time) (deleted, work int64, err error) {
	var doomed []string
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM sessions WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, sessionID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // purged meanwhile
		}
		if err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `SELECT message_id FROM view_entries v WHERE tenant = $1 AND session_id = $2 AND gen = `+currentGen, tenant, sessionID)
		roots, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		rows, _ = tx.Query(ctx, `SELECT items, CASE WHEN reverted_at IS NULL AND expires_at > $1 THEN view_before ELSE '[]' END
			FROM compactions WHERE tenant = $2 AND session_id = $3`, now, tenant, sessionID)
		var items []store.CompactionItem
		var itemsText, viewText string
		if _, err := pgx.ForEachRow(rows, []any{&itemsText, &viewText}, func() error {
			roots, items, err = store.AppendRetentionInputs(roots, items, itemsText, viewText)
			return err
		}); err != nil {
			return err
		}
		rows, _ = tx.Query(ctx, `SELECT id FROM messages WHERE tenant = $1 AND session_id = $2 AND created_at < $3`,
			tenant, sessionID, cutoff)
		old, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		doomed, work = store.Doomed(roots, items, old)
		return nil
	})
	for err == nil && len(doomed) > 0 {
		n := min(len(doomed), purgeDeleteBatch)
		var tag pgconn.CommandTag
		if tag, err = s.pool.Exec(ctx, `DELETE FROM messages WHERE tenant = $1 AND session_id = $2 AND id = ANY($3)`,
			tenant, sessionID, doomed[:n]); err == nil {
			deleted += tag.RowsAffected()
			doomed = doomed[n:]
		}
	}
	return deleted, work, err
}

func (s *Store) CloseIdleSessions(ctx context.Context, label string, idleBefore, now time.Time, limit int) (_ int64, err error) {
	defer unavailable(&err)
	var total int64
	for {
		// One batch per statement; rows a request holds are skipped (it
		// is using them) and the update re-checks that they are idle.
		tag, err := s.pool.Exec(ctx, `UPDATE sessions SET deleted_at = $3, version = version + 1
			WHERE (tenant, id) IN (SELECT tenant, id FROM sessions WHERE deleted_at IS NULL AND updated_at < $1
				AND labels ? $2 LIMIT $4 FOR UPDATE SKIP LOCKED)
			AND deleted_at IS NULL AND updated_at < $1`, idleBefore, label, now, limit)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(limit) {
			return total, nil
		}
	}
}
