package engine_test

import (
	"context"

	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// compactionsOf reads every compaction of a session, page by page.
func compactionsOf(e *engine.Engine, ctx context.Context, tenant, id string) ([]store.Compaction, error) {
	var out []store.Compaction
	for token := ""; ; {
		page, err := e.ListCompactions(ctx, tenant, id, engine.Page{Token: token})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Compactions...)
		if token = page.Next; token == "" {
			return out, nil
		}
	}
}
