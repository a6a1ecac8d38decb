package postgres

import (
	"context"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// sharedBodiesQuery finds and locks, for each (position, parts), the row
// holding the parts of the parent's message at that position, if they are
// those parts: the parent's own row, or the row it shares them from; one
// round trip, a primary-key probe per candidate. FOR KEY SHARE makes a
// concurrent delete of that row wait until the fork commits, and then
// copy the parts into the fork's rows (migration 00013's trigger); a row
// deleted first is not found, and the fork stores its own copy. It is the
// weakest lock a delete waits for: the parent's updates of the row (its
// token counts; a row holding its parts never has them changed) do not
// wait for the fork (TestForkLeavesParentWritable).
const sharedBodiesQuery = `SELECT w.pos, o.session_id, o.id
	FROM unnest($3::bigint[], $4::text[]) AS w(pos, parts)
	JOIN messages p ON p.tenant = $1 AND p.session_id = $2 AND p.position > 0 AND p.position = w.pos
	JOIN messages o ON o.tenant = p.tenant AND o.session_id = coalesce(p.body_session, p.session_id) AND o.id = coalesce(p.body_id, p.id)
	WHERE o.body_session IS NULL AND o.parts = w.parts
	FOR KEY SHARE OF o`

// InsertForkMessages implements store.ForkTx.
func (t *txn) InsertForkMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message, p store.SharedPrefix) error {
	refs, err := store.ShareBodies(msgs, sessionID, p, func(positions []int64, parts []string) (map[int64]store.SharedBody, error) {
		rows, err := t.tx.Query(ctx, sharedBodiesQuery, tenant, p.SessionID, positions, parts)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		found := make(map[int64]store.SharedBody, len(positions))
		for rows.Next() {
			var pos int64
			var r store.SharedBody
			if err := rows.Scan(&pos, &r.SessionID, &r.ID); err != nil {
				return nil, err
			}
			found[pos] = r
		}
		return found, rows.Err()
	})
	if err != nil {
		return err
	}
	return t.insertMessages(ctx, tenant, sessionID, msgs, refs)
}
