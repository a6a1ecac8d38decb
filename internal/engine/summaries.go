package engine

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// maxSummaryDigests and maxSummaryHitsPerDigest bound one FindSummaries:
// at most 8 digests, at most 2 rows each, 16 rows in all.
const (
	maxSummaryDigests       = 8
	maxSummaryHitsPerDigest = 2
)

// RecordSummary records sum as the latest summary the session answered,
// unless the session's record is newer (one upsert of the session's row).
func (e *Engine) RecordSummary(ctx context.Context, tenant, sessionID string, sum store.SummaryRecord) error {
	return e.store.RecordSummary(ctx, tenant, sessionID, sum)
}

// FindSummaries returns the tenant's sessions, live or deleted (not yet
// purged), whose latest summary's digest is one of digests (the first 8),
// at most 2 rows per digest: one indexed read of at most 16 rows.
func (e *Engine) FindSummaries(ctx context.Context, tenant string, digests []string) ([]store.SummaryHit, error) {
	if len(digests) == 0 {
		return nil, nil
	}
	digests = digests[:min(len(digests), maxSummaryDigests)]
	return e.store.FindSummaries(ctx, tenant, digests, maxSummaryHitsPerDigest)
}
