package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/store"
)

// StrayViewGens returns the view generations that are not their
// session's current one, of at most sessions sessions after after in key
// order (a range of the primary key), at most two a session: the nearest
// below and above the current one, each a probe of the key (tenant,
// session_id, gen, ord).
func (s *Store) StrayViewGens(ctx context.Context, after store.StrayCursor, sessions int) (_ []store.ViewGen, _ store.StrayCursor, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT s.tenant, s.id,
		(SELECT v.gen FROM view_entries v WHERE v.tenant = s.tenant AND v.session_id = s.id
			AND v.gen < s.view_gen ORDER BY v.gen DESC LIMIT 1),
		(SELECT v.gen FROM view_entries v WHERE v.tenant = s.tenant AND v.session_id = s.id
			AND v.gen > s.view_gen ORDER BY v.gen LIMIT 1)
		FROM sessions s WHERE (s.tenant, s.id) > ($1, $2) ORDER BY s.tenant, s.id LIMIT $3`, after.Tenant, after.ID, sessions)
	if err != nil {
		return nil, store.StrayCursor{}, err
	}
	defer rows.Close()
	return store.ScanStrayViewGens(rows, sessions)
}

// DropViewGen deletes at most limit rows of generation g, unless it is its
// session's current one. The current generation is read holding the
// session's row (FOR SHARE) to the end, as in SweepViews: a flip of g
// open meanwhile commits first, and then g is left alone.
func (s *Store) DropViewGen(ctx context.Context, g store.ViewGen, limit int) (n int, err error) {
	defer unavailable(&err)
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		cur := int64(-1)
		err := tx.QueryRow(ctx, `SELECT view_gen FROM sessions WHERE tenant = $1 AND id = $2 FOR SHARE`, g.Tenant, g.SessionID).Scan(&cur)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if cur == g.Gen {
			return nil
		}
		tag, err := tx.Exec(ctx, `DELETE FROM view_entries WHERE ctid = ANY (ARRAY(SELECT v.ctid FROM view_entries v
			WHERE v.tenant = $1 AND v.session_id = $2 AND v.gen = $3 LIMIT $4))`, g.Tenant, g.SessionID, g.Gen, limit)
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
}
