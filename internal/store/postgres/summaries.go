package postgres

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// RecordSummary: one upsert of the session's row (migrations 00017, 00019), which
// replaces it only with a newer record (store.SummaryRecord: the
// row comparison orders by version, then seq).
func (s *Store) RecordSummary(ctx context.Context, tenant, sessionID string, sum store.SummaryRecord) (err error) {
	defer unavailable(&err)
	_, err = s.pool.Exec(ctx, `INSERT INTO summaries_by_digest AS t (tenant, session_id, digest, version, seq) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant, session_id) DO UPDATE SET digest = EXCLUDED.digest, version = EXCLUDED.version, seq = EXCLUDED.seq
		WHERE (EXCLUDED.version, EXCLUDED.seq) > (t.version, t.seq)`, tenant, sessionID, sum.Digest, sum.Version, sum.Seq)
	return err
}

// FindSummaries: one statement; each digest reads at most limit rows of
// the index summaries_by_digest_digest (and their sessions' rows: every
// record has one, deleted or not, until it is purged).
func (s *Store) FindSummaries(ctx context.Context, tenant string, digests []string, limit int) (_ []store.SummaryHit, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT x.session_id, x.digest, x.live
		FROM unnest($2::text[]) AS d(digest) CROSS JOIN LATERAL (
			SELECT t.session_id, t.digest, s.deleted_at IS NULL AS live FROM summaries_by_digest t
			JOIN sessions s ON s.tenant = t.tenant AND s.id = t.session_id
			WHERE t.tenant = $1 AND t.digest = d.digest LIMIT $3) x`, tenant, digests, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ReadSummaryHits(rows)
}
