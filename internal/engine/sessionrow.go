package engine

import (
	"context"
	"errors"
	"fmt"

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

// HistoryAndRow is FindHistory of chains and SessionRow of id together:
// one round trip on a store that reads both at once
// (store.HistoryRowFinder, PostgreSQL), two reads otherwise. A missing
// session is store.ErrNotFound, naming it.
func (e *Engine) HistoryAndRow(ctx context.Context, tenant string, chains []string, id string) ([]store.HistoryHit, store.Session, error) {
	if f, ok := e.store.(store.HistoryRowFinder); ok && len(chains) > 0 {
		hits, s, err := f.FindHistoryAndSession(ctx, tenant, chains, maxHistoryHits, id)
		if errors.Is(err, store.ErrNotFound) {
			err = fmt.Errorf("session %q: %w", id, store.ErrNotFound)
		}
		return hits, s, err
	}
	hits, err := e.FindHistory(ctx, tenant, chains, 0)
	if err != nil {
		return nil, store.Session{}, err
	}
	s, err := e.readSession(ctx, tenant, id)
	return hits, s, err
}
