package engine

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// maxCallHits bounds the sessions one FindCalls returns.
const maxCallHits = 64

// FindCalls returns the tenant's live sessions whose logs hold one of the
// tool calls ids, at most limit rows (capped at 64): one indexed read.
func (e *Engine) FindCalls(ctx context.Context, tenant string, ids []string, limit int) ([]store.CallHit, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if limit <= 0 || limit > maxCallHits {
		limit = maxCallHits
	}
	return e.store.FindCalls(ctx, tenant, ids, limit)
}
