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

// startingRow is the row PrepareContext starts from: read, when the
// caller has just read it (PrepareInput.Read) for this session, or read
// now.
func (e *Engine) startingRow(ctx context.Context, tenant, id string, read *store.Session) (store.Session, error) {
	if read != nil && read.Tenant == tenant && read.ID == id {
		return *read, nil
	}
	return e.readSession(ctx, tenant, id)
}
