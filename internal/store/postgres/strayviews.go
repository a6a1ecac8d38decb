package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/store"
)

// StrayViewGens returns at most limit view generations that are not their
// session's current one, at most two a session: the nearest below and
// above the current one, each a probe of the key (tenant, session_id,
// gen, ord).
func (s *Store) StrayViewGens(ctx context.Context, limit int) ([]store.ViewGen, error) {
	rows, err := s.pool.Query(ctx, `SELECT s.tenant, s.id, g.gen FROM sessions s CROSS JOIN LATERAL (
		(SELECT v.gen FROM view_entries v WHERE v.tenant = s.tenant AND v.session_id = s.id
			AND v.gen < s.view_gen ORDER BY v.gen DESC LIMIT 1)
		UNION ALL
		(SELECT v.gen FROM view_entries v WHERE v.tenant = s.tenant AND v.session_id = s.id
			AND v.gen > s.view_gen ORDER BY v.gen LIMIT 1)) g LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ViewGen, error) {
		var g store.ViewGen
		err := r.Scan(&g.Tenant, &g.SessionID, &g.Gen)
		return g, err
	})
}

// DropViewGen deletes at most limit rows of generation g, unless it is its
// session's current one. The current generation is read holding the
// session's row (FOR SHARE) to the end, as in SweepViews: a flip of g
// open meanwhile commits first, and then g is left alone.
func (s *Store) DropViewGen(ctx context.Context, g store.ViewGen, limit int) (n int, err error) {
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
