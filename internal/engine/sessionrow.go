package engine

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// SessionRow is a session's stored row alone: one indexed read, without
// what GetSession adds to it (the usage, which reads the model's
// calibration, and the ledger and newest compaction, the summary row's
// join). The gateway matches a request against a session by its row and
// its log (identify.go): the summary row was 8 % of the gateway's CPU per
// request at 16 conversations of 100 messages (docs/performance.md). A
// missing session is store.ErrNotFound, naming it.
func (e *Engine) SessionRow(ctx context.Context, tenant, id string) (store.Session, error) {
	return e.readSession(ctx, tenant, id)
}
