package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// bodyArg is col, a column naming r (r.SessionID or r.ID), or NULL when
// r names no row.
func bodyArg(col string, r store.SharedBody) any {
	if r.ID == "" {
		return nil
	}
	return col
}

// sharedBodyQuery finds the row holding the parts of the parent's message
// at a position, if they are the given ones: the parent's own row, or the
// row it shares them from.
const sharedBodyQuery = `SELECT o.session_id, o.id FROM messages p JOIN messages o
	ON o.tenant = p.tenant AND o.session_id = coalesce(p.body_session, p.session_id) AND o.id = coalesce(p.body_id, p.id)
	WHERE p.tenant = ? AND p.session_id = ? AND p.position > 0 AND p.position = ? AND o.body_session IS NULL AND o.parts = ?`

// InsertForkMessages implements store.ForkTx: one in-process indexed
// read a candidate; the single writer holds the rows it names until it
// commits.
func (t *txn) InsertForkMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message, p store.SharedPrefix) error {
	refs, err := store.ShareBodies(msgs, sessionID, p, func(positions []int64, parts []string) (map[int64]store.SharedBody, error) {
		found := make(map[int64]store.SharedBody, len(positions))
		for i, pos := range positions {
			var r store.SharedBody
			err := t.tx.QueryRowContext(ctx, sharedBodyQuery, tenant, p.SessionID, pos, parts[i]).Scan(&r.SessionID, &r.ID)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return nil, err
			}
			found[pos] = r
		}
		return found, nil
	})
	if err != nil {
		return err
	}
	return t.insertMessages(ctx, tenant, sessionID, msgs, refs)
}

// purgeDeletedSessions deletes the sessions deleted before cutoff and
// their messages (cascade) in one write transaction. Their rows that name
// another row's parts (a fork's) go first: otherwise, SQLite's cascade
// going a session at a time, a purged row that purged forks name would be
// copied into one of them (migration 00013's heir) and the others renamed
// to it, only for the heir's session to go next, and so on: work quadratic
// in the forks purged together (TestForksPurgedTogetherIsLinear). What is
// left names rows of sessions that stay, each renamed or copied into at
// most once.
func (s *Store) purgeDeletedSessions(ctx context.Context, cutoff time.Time) (int64, error) {
	unlock, err := s.lockWriter(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE body_session IS NOT NULL AND (tenant, session_id) IN
		(SELECT tenant, id FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at < ?)`, cutoff.UnixNano()); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at < ?`, cutoff.UnixNano())
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}
