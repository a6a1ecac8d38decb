package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// sessionArg and idArg are the columns naming r (NULL: none).
func sessionArg(r store.SharedBody) any {
	if r.ID == "" {
		return nil
	}
	return r.SessionID
}

func idArg(r store.SharedBody) any {
	if r.ID == "" {
		return nil
	}
	return r.ID
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
