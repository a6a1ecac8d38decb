package sqlite

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// StrayViewGens returns at most limit view generations that are not their
// session's current one, at most two a session: the nearest below and
// above the current one, each a probe of the key (tenant, session_id,
// gen, ord).
func (s *Store) StrayViewGens(ctx context.Context, limit int) ([]store.ViewGen, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT tenant, id, gen FROM (
		SELECT s.tenant, s.id, (SELECT v.gen FROM view_entries v WHERE v.tenant = s.tenant AND v.session_id = s.id
			AND v.gen < s.view_gen ORDER BY v.gen DESC LIMIT 1) AS gen FROM sessions s
		UNION ALL
		SELECT s.tenant, s.id, (SELECT v.gen FROM view_entries v WHERE v.tenant = s.tenant AND v.session_id = s.id
			AND v.gen > s.view_gen ORDER BY v.gen LIMIT 1) AS gen FROM sessions s
	) WHERE gen IS NOT NULL LIMIT ?`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.ViewGen
	for rows.Next() {
		var g store.ViewGen
		if err := rows.Scan(&g.Tenant, &g.SessionID, &g.Gen); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// DropViewGen deletes at most limit rows of generation g, unless it is its
// session's current one, in one transaction (SQLite's writer orders it
// with any flip).
func (s *Store) DropViewGen(ctx context.Context, g store.ViewGen, limit int) (int, error) {
	var n int64
	err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		res, err := tx.(*txn).tx.ExecContext(ctx, `DELETE FROM view_entries WHERE rowid IN (SELECT v.rowid FROM view_entries v
			WHERE v.tenant = ?1 AND v.session_id = ?2 AND v.gen = ?3 AND v.gen IS NOT `+currentGen+` LIMIT ?4)`,
			g.Tenant, g.SessionID, g.Gen, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
