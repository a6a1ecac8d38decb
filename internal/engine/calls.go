package engine

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// maxCallIDs and maxCallHitsPerID bound one FindCalls: at most 8 ids,
// at most 8 rows each, 64 rows in all.
const (
	maxCallIDs       = 8
	maxCallHitsPerID = 8
)

// FindCalls returns the tenant's live sessions whose logs hold one of the
// tool calls ids (the first 8 of them), at most limit rows per id (capped
// at 8): one indexed read of at most 64 rows. A caller that needs every
// id held passes at most 8 (an id left out is not found).
func (e *Engine) FindCalls(ctx context.Context, tenant string, ids []string, limit int) ([]store.CallHit, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ids = ids[:min(len(ids), maxCallIDs)]
	if limit <= 0 || limit > maxCallHitsPerID {
		limit = maxCallHitsPerID
	}
	return e.store.FindCalls(ctx, tenant, ids, limit)
}
