package engine

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// maxHistoryHits bounds the sessions one FindHistory returns.
const maxHistoryHits = 64

// FindHistory returns the tenant's live sessions that hold one of chains
// (store.HistoryMetadata), heads first and the longest first, at most
// limit (capped at 64). One indexed read per 500 chains.
func (e *Engine) FindHistory(ctx context.Context, tenant string, chains []string, limit int) ([]store.HistoryHit, error) {
	if len(chains) == 0 {
		return nil, nil
	}
	if limit <= 0 || limit > maxHistoryHits {
		limit = maxHistoryHits
	}
	return e.store.FindHistory(ctx, tenant, chains, limit)
}
