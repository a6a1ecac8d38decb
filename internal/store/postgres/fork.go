package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// sharedBodyQuery finds and locks the row holding the parts of the
// parent's message at a position, if they are the given ones: the
// parent's own row, or the row it shares them from. FOR SHARE makes a
// concurrent delete of that row wait until the fork commits, and then
// copy the parts into the fork's rows (migration 00013's trigger); a row
// deleted first is not found, and the fork stores its own copy.
const sharedBodyQuery = `SELECT o.session_id, o.id FROM messages p JOIN messages o
	ON o.tenant = p.tenant AND o.session_id = coalesce(p.body_session, p.session_id) AND o.id = coalesce(p.body_id, p.id)
	WHERE p.tenant = $1 AND p.session_id = $2 AND p.position > 0 AND p.position = $3 AND o.body_session IS NULL AND o.parts = $4
	FOR SHARE OF o`

// InsertForkMessages implements store.ForkTx.
func (t *txn) InsertForkMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message, p store.SharedPrefix) error {
	refs, err := store.ShareBodies(msgs, sessionID, p, func(pos int64, parts string) (r store.SharedBody, ok bool, err error) {
		err = t.tx.QueryRow(ctx, sharedBodyQuery, tenant, p.SessionID, pos, parts).Scan(&r.SessionID, &r.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return r, false, nil
		}
		return r, err == nil, err
	})
	if err != nil {
		return err
	}
	return t.insertMessages(ctx, tenant, sessionID, msgs, refs)
}
