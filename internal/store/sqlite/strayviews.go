package sqlite

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// StrayViewGens returns the view generations that are not their
// session's current one, of at most sessions sessions after after in key
// order (a range of the primary key), at most two a session: the nearest
// below and above the current one, each a probe of the key (tenant,
// session_id, gen, ord).
func (s *Store) StrayViewGens(ctx context.Context, after store.StrayCursor, sessions int) ([]store.ViewGen, store.StrayCursor, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT s.tenant, s.id,
		(SELECT v.gen FROM view_entries v WHERE v.tenant = s.tenant AND v.session_id = s.id
			AND v.gen < s.view_gen ORDER BY v.gen DESC LIMIT 1),
		(SELECT v.gen FROM view_entries v WHERE v.tenant = s.tenant AND v.session_id = s.id
			AND v.gen > s.view_gen ORDER BY v.gen LIMIT 1)
		FROM sessions s WHERE (s.tenant, s.id) > (?, ?) ORDER BY s.tenant, s.id LIMIT ?`, after.Tenant, after.ID, sessions)
	if err != nil {
		return nil, store.StrayCursor{}, err
	}
	defer rows.Close()
	return store.ScanStrayViewGens(rows, sessions)
}

// DropViewGen deletes at most limit rows of generation g, unless it is its
// session's current one, in one transaction (SQLite's writer orders it
// with any flip).
func (s *Store) DropViewGen(ctx context.Context, g store.ViewGen, limit int) (int, error) {
	var n int64
	err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		res, err := tx.(*txn).tx.ExecContext(ctx, `DELETE FROM view_entries WHERE tenant = ?1 AND session_id = ?2 AND gen = ?3 AND ord IN (SELECT v.ord FROM view_entries v
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
