package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/contextd/contextd/internal/store"
)

const jobCols = `tenant, session_id, id, state, epoch, fingerprint, owner, lease_until, attempts, not_before, result, created_at, updated_at`

func scanJob(row scanner) (store.Job, error) {
	var j store.Job
	var state string
	var lease, notBefore, created, updated int64
	err := row.Scan(&j.Tenant, &j.SessionID, &j.ID, &state, &j.Epoch, &j.Fingerprint, &j.Owner, &lease, &j.Attempts,
		&notBefore, &j.Result, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return j, store.ErrNotFound
	}
	j.State = store.JobState(state)
	j.LeaseUntil, j.NotBefore = time.Unix(0, lease).UTC(), time.Unix(0, notBefore).UTC()
	j.CreatedAt, j.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return j, err
}

// GetJob reads a session's job; SQLite's one writer holds it.
func (t *txn) GetJob(ctx context.Context, tenant, sessionID string) (store.Job, error) {
	return scanJob(t.tx.QueryRowContext(ctx, `SELECT `+jobCols+` FROM compaction_jobs WHERE tenant = ? AND session_id = ?`,
		tenant, sessionID))
}

// GetJob reads a session's job without the writer.
func (s *Store) GetJob(ctx context.Context, tenant, sessionID string) (store.Job, error) {
	return scanJob(reads{s}.QueryRowContext(ctx, `SELECT `+jobCols+` FROM compaction_jobs WHERE tenant = ? AND session_id = ?`,
		tenant, sessionID))
}

func (t *txn) PutJob(ctx context.Context, j *store.Job) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO compaction_jobs (`+jobCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, session_id) DO UPDATE SET id = excluded.id, state = excluded.state, epoch = excluded.epoch,
			fingerprint = excluded.fingerprint, owner = excluded.owner, lease_until = excluded.lease_until,
			attempts = excluded.attempts, not_before = excluded.not_before, result = excluded.result,
			created_at = excluded.created_at, updated_at = excluded.updated_at`,
		j.Tenant, j.SessionID, j.ID, string(j.State), j.Epoch, j.Fingerprint, j.Owner, j.LeaseUntil.UnixNano(), j.Attempts,
		j.NotBefore.UnixNano(), j.Result, j.CreatedAt.UnixNano(), j.UpdatedAt.UnixNano())
	return err
}

func (t *txn) DeleteJob(ctx context.Context, tenant, sessionID, id string) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM compaction_jobs WHERE tenant = ? AND session_id = ? AND (? = '' OR id = ?)`,
		tenant, sessionID, id, id)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// NextJob picks the next job to lease (see store.JobTx). The running count
// of a tenant is read from the (tenant, state) index, once for the filter
// and once for the order: the work is O(q log q) for q jobs waiting.
func (t *txn) NextJob(ctx context.Context, now time.Time, perTenant int) (store.Job, error) {
	n := now.UnixNano()
	return scanJob(t.tx.QueryRowContext(ctx, `SELECT `+jobCols+` FROM (
		SELECT j.*, (SELECT count(*) FROM compaction_jobs r WHERE r.tenant = j.tenant AND r.state = 'running' AND r.lease_until >= ?) AS busy
		FROM compaction_jobs j
		WHERE (j.state = 'queued' OR (j.state = 'running' AND j.lease_until < ?)) AND j.not_before <= ?)
		WHERE busy < ? ORDER BY busy, updated_at LIMIT 1`, n, n, n, perTenant))
}

func (t *txn) CountJobs(ctx context.Context, tenant string) (int, int, error) {
	var mine, all int
	err := t.tx.QueryRowContext(ctx, `SELECT coalesce(sum(CASE WHEN tenant = ? THEN 1 ELSE 0 END), 0), count(*)
		FROM compaction_jobs WHERE state IN ('queued', 'running')`, tenant).Scan(&mine, &all)
	return mine, all, err
}

// HasDueJob probes for a due job without the writer: NextJob's filter.
func (s *Store) HasDueJob(ctx context.Context, now time.Time, perTenant int) (bool, error) {
	n := now.UnixNano()
	var due bool
	err := reads{s}.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM compaction_jobs j
		WHERE (j.state = 'queued' OR (j.state = 'running' AND j.lease_until < ?)) AND j.not_before <= ?
			AND (SELECT count(*) FROM compaction_jobs r WHERE r.tenant = j.tenant AND r.state = 'running' AND r.lease_until >= ?) < ?)`,
		n, n, n, perTenant).Scan(&due)
	return due, err
}

func (t *txn) DeleteIdleJobs(ctx context.Context, before time.Time, limit int) (int, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM compaction_jobs WHERE rowid IN (SELECT rowid FROM compaction_jobs
		WHERE updated_at < ? LIMIT ?)`, before.UnixNano(), limit)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
