package sqlite

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// RecordSummary: one upsert of the session's row (migrations 00017, 00019), in a
// write turn of its own, which replaces it only with a newer record
// (store.SummaryRecord: the row comparison orders by version, then
// seq).
func (s *Store) RecordSummary(ctx context.Context, tenant, sessionID string, sum store.SummaryRecord) error {
	return s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.(*txn).tx.ExecContext(ctx, `INSERT INTO summaries_by_digest AS t (tenant, session_id, digest, version, seq) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (tenant, session_id) DO UPDATE SET digest = excluded.digest, version = excluded.version, seq = excluded.seq
			WHERE (excluded.version, excluded.seq) > (t.version, t.seq)`, tenant, sessionID, sum.Digest, sum.Version, sum.Seq)
		return err
	})
}

// FindSummaries: one statement, each digest reading at most limit rows of
// the index summaries_by_digest_digest (perKey), and their sessions' rows
// (every record has one, deleted or not, until it is purged).
func (s *Store) FindSummaries(ctx context.Context, tenant string, digests []string, limit int) ([]store.SummaryHit, error) {
	if len(digests) == 0 {
		return nil, nil
	}
	q, args := perKey(`SELECT t.session_id, t.digest, s.deleted_at IS NULL FROM summaries_by_digest t
			JOIN sessions s ON s.tenant = t.tenant AND s.id = t.session_id
			WHERE t.tenant = ? AND t.digest = ?`, tenant, digests, limit)
	rows, err := reads{s}.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ReadSummaryHits(rows)
}
