package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/store"
)

const jobCols = `tenant, session_id, id, state, epoch, fingerprint, owner, lease_until, attempts, not_before, result, created_at, updated_at`

func scanJob(row pgx.Row) (store.Job, error) {
	var j store.Job
	var state string
	err := row.Scan(&j.Tenant, &j.SessionID, &j.ID, &state, &j.Epoch, &j.Fingerprint, &j.Owner, &j.LeaseUntil, &j.Attempts,
		&j.NotBefore, &j.Result, &j.CreatedAt, &j.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return j, store.ErrNotFound
	}
	j.State = store.JobState(state)
	j.LeaseUntil, j.NotBefore = j.LeaseUntil.UTC(), j.NotBefore.UTC()
	j.CreatedAt, j.UpdatedAt = j.CreatedAt.UTC(), j.UpdatedAt.UTC()
	return j, err
}

// GetJob reads and locks a session's job.
func (t *txn) GetJob(ctx context.Context, tenant, sessionID string) (store.Job, error) {
	return scanJob(t.tx.QueryRow(ctx, `SELECT `+jobCols+` FROM compaction_jobs WHERE tenant = $1 AND session_id = $2 FOR UPDATE`,
		tenant, sessionID))
}

// GetJob reads a session's job without locking it.
func (s *Store) GetJob(ctx context.Context, tenant, sessionID string) (_ store.Job, err error) {
	defer unavailable(&err)
	return scanJob(s.pool.QueryRow(ctx, `SELECT `+jobCols+` FROM compaction_jobs WHERE tenant = $1 AND session_id = $2`,
		tenant, sessionID))
}

func (t *txn) PutJob(ctx context.Context, j *store.Job) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO compaction_jobs (`+jobCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		ON CONFLICT (tenant, session_id) DO UPDATE SET id = excluded.id, state = excluded.state, epoch = excluded.epoch,
			fingerprint = excluded.fingerprint, owner = excluded.owner, lease_until = excluded.lease_until,
			attempts = excluded.attempts, not_before = excluded.not_before, result = excluded.result,
			created_at = excluded.created_at, updated_at = excluded.updated_at`,
		j.Tenant, j.SessionID, j.ID, string(j.State), j.Epoch, j.Fingerprint, j.Owner, j.LeaseUntil, j.Attempts,
		j.NotBefore, j.Result, j.CreatedAt, j.UpdatedAt)
	return err
}

func (t *txn) DeleteJob(ctx context.Context, tenant, sessionID, id string) (bool, error) {
	tag, err := t.tx.Exec(ctx, `DELETE FROM compaction_jobs WHERE tenant = $1 AND session_id = $2 AND ($3 = '' OR id = $3)`,
		tenant, sessionID, id)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// NextJob picks and locks the next job to lease (see store.JobTx); rows
// other replicas hold are skipped. The running count of a tenant comes from
// the (tenant, state) index: O(q log q) for q jobs waiting.
//
// Under READ COMMITTED that count does not see leases other transactions
// have not committed yet, so concurrent leasers could all count a tenant
// below perTenant. The pick therefore takes the tenant's transaction-scoped
// advisory lock (held until the lease commits) and counts again in a
// statement that starts after it, which sees every lease committed before.
// The lock is only tried: a tenant whose lock another leaser holds, or that
// is at its cap after all, is left out and the pick is made again, so no
// two leasers wait on each other (at most jobPickTries picks). A job so
// passed over is let go at once (a rollback to the savepoint before the
// pick releases its row, and the tenant's lock if it was taken): held to
// the end of the transaction, other leasers skipped it meanwhile and could
// all find nothing while it was due (TestPassedOverJobIsLetGo).
func (t *txn) NextJob(ctx context.Context, now time.Time, perTenant int) (store.Job, error) {
	// The savepoint and each rollback to it are queued: they go with the
	// next statement (the pick), not in a round trip of their own.
	t.tx.queue(`SAVEPOINT next_job`, nil)
	skip := []string{}
	for range jobPickTries {
		j, err := scanJob(t.tx.QueryRow(ctx, `SELECT `+jobCols+` FROM compaction_jobs j
		WHERE (j.state = 'queued' OR (j.state = 'running' AND j.lease_until < $1)) AND j.not_before <= $1
			AND NOT (j.tenant = ANY($3))
			AND (SELECT count(*) FROM compaction_jobs r WHERE r.tenant = j.tenant AND r.state = 'running' AND r.lease_until >= $1) < $2
		ORDER BY (SELECT count(*) FROM compaction_jobs r WHERE r.tenant = j.tenant AND r.state = 'running' AND r.lease_until >= $1), j.updated_at
		LIMIT 1 FOR UPDATE OF j SKIP LOCKED`, now, perTenant, skip))
		if err != nil {
			return j, err
		}
		var locked bool
		if err := t.tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, `+jobLockSeed+`))`, j.Tenant).Scan(&locked); err != nil {
			return store.Job{}, err
		}
		if locked {
			var busy int
			if err := t.tx.QueryRow(ctx, `SELECT count(*) FROM compaction_jobs
				WHERE tenant = $1 AND state = 'running' AND lease_until >= $2`, j.Tenant, now).Scan(&busy); err != nil {
				return store.Job{}, err
			}
			if busy < perTenant {
				return j, nil
			}
		}
		t.tx.queue(`ROLLBACK TO SAVEPOINT next_job`, nil)
		skip = append(skip, j.Tenant)
	}
	return store.Job{}, store.ErrNotFound
}

// jobLockSeed is the hash seed of the tenant's running-jobs lock: the
// other advisory locks hash their text with seed 0 (LockCompaction hashes
// "tenant/session"), so a key of "jobs-running/" || tenant was that of
// tenant "jobs-running" compacting a session named after the tenant, and
// held by it, the tenant's jobs were skipped (TestJobLockIsTheTenants).
// With a seed of its own, a tenant's lock meets another key by a 64-bit
// hash collision only.
const jobLockSeed = "7406"

// jobPickTries bounds NextJob's picks on PostgreSQL: past it the worker
// finds nothing this time and looks again at its next wake.
const jobPickTries = 8

func (t *txn) CountJobs(ctx context.Context, tenant string) (int, int, error) {
	var mine, all int
	err := t.tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE tenant = $1), count(*)
		FROM compaction_jobs WHERE state IN ('queued', 'running')`, tenant).Scan(&mine, &all)
	return mine, all, err
}

// HasDueJob probes for a due job without locking anything: NextJob's
// filter.
func (s *Store) HasDueJob(ctx context.Context, now time.Time, perTenant int) (_ bool, err error) {
	defer unavailable(&err)
	var due bool
	err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM compaction_jobs j
		WHERE (j.state = 'queued' OR (j.state = 'running' AND j.lease_until < $1)) AND j.not_before <= $1
			AND (SELECT count(*) FROM compaction_jobs r WHERE r.tenant = j.tenant AND r.state = 'running' AND r.lease_until >= $1) < $2)`,
		now, perTenant).Scan(&due)
	return due, err
}

func (t *txn) DeleteIdleJobs(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := t.tx.Exec(ctx, `DELETE FROM compaction_jobs WHERE (tenant, session_id) IN (SELECT tenant, session_id
		FROM compaction_jobs WHERE updated_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, limit)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
