package store

import (
	"context"
	"time"
)

// JobState is where a background compaction job is.
type JobState string

// Job states. A job is one row per session: queued until a worker leases
// it, running while the lease holds (a lease that runs out puts it back in
// reach of any worker), ready once its result is stored, failed when it
// was given up or found nothing to do (a tombstone: the session's calls
// compact themselves until its view moves on). Applying or discarding a
// job deletes its row.
const (
	JobQueued  JobState = "queued"
	JobRunning JobState = "running"
	JobReady   JobState = "ready"
	JobFailed  JobState = "failed"
)

// Job is a background compaction of one session (engine/background.go).
type Job struct {
	Tenant    string
	SessionID string
	// ID is fresh for every scheduling, so that a worker that lost its
	// lease cannot finish the job that replaced its own.
	ID    string
	State JobState
	// Epoch and Fingerprint are the session's view epoch and the engine's
	// digest of what planning depends on (model, policy, system prompt
	// and tools' counts, the session's incarnation) when it was scheduled;
	// the result is only ever applied to a session that still has both.
	Epoch       int
	Fingerprint string
	// Owner is the lease: the server's name and a token fresh for every
	// lease, so that a worker whose lease was taken over (by another
	// server, or another worker of its own) can no longer write the job.
	Owner      string
	LeaseUntil time.Time
	// Attempts counts leases taken; NotBefore delays the next after a
	// failure.
	Attempts  int
	NotBefore time.Time
	// Result is the engine's encoding of the prepared compaction (ready).
	Result    []byte
	CreatedAt time.Time
	UpdatedAt time.Time
}

// JobTx is the work on background jobs a transaction can do; it is part of
// Tx.
type JobTx interface {
	// GetJob reads a session's job, or ErrNotFound, and on PostgreSQL locks
	// it until the transaction ends.
	GetJob(ctx context.Context, tenant, sessionID string) (Job, error)
	// PutJob inserts or replaces a session's job.
	PutJob(ctx context.Context, j *Job) error
	// DeleteJob deletes a session's job if its id is id (any id when id is
	// empty) and reports whether it did.
	DeleteJob(ctx context.Context, tenant, sessionID, id string) (bool, error)
	// NextJob returns the job a worker should lease next at now, or
	// ErrNotFound: queued, or running with a lapsed lease, past its
	// NotBefore, of a tenant with fewer than perTenant unlapsed leases;
	// tenants with the fewest running jobs first, then the longest waiting.
	// On PostgreSQL the row is locked (others skip it) until the
	// transaction ends, and so is the tenant's running count: concurrent
	// leases never put a tenant past perTenant. A concurrent leaser may
	// thus find nothing while a job is due, skipping it for the moment
	// another leaser's pick holds it (one passed over is let go at once);
	// a worker's next look (Background.Poll) finds it.
	NextJob(ctx context.Context, now time.Time, perTenant int) (Job, error)
	// CountJobs returns how many jobs are queued or running, for the
	// tenant and in all.
	CountJobs(ctx context.Context, tenant string) (tenantJobs, allJobs int, err error)
	// DeleteIdleJobs deletes jobs not updated since before, in any state (a
	// running job is updated by every renewal), at most limit, and reports
	// how many.
	DeleteIdleJobs(ctx context.Context, before time.Time, limit int) (int, error)
}
