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

// InsertForkMessages implements store.ForkTx: the single writer holds
// the rows it names until it commits.
func (t *txn) InsertForkMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message, p store.SharedPrefix) error {
	refs, err := store.ShareBodies(msgs, sessionID, p, func(pos int64, parts string) (r store.SharedBody, ok bool, err error) {
		err = t.tx.QueryRowContext(ctx, sharedBodyQuery, tenant, p.SessionID, pos, parts).Scan(&r.SessionID, &r.ID)
		if errors.Is(err, sql.ErrNoRows) {
			return r, false, nil
		}
		return r, err == nil, err
	})
	if err != nil {
		return err
	}
	return t.insertMessages(ctx, tenant, sessionID, msgs, refs)
}
