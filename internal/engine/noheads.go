package engine

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// HeldSession is the session's row as this replica's store last committed
// it (store.HeldRowReader: PostgreSQL), when it holds one: a guess that
// PrepareContext's lock checks (a stale one is a version conflict for a
// call that expects the version, and read again otherwise). ok false on
// a store that holds none.
func (e *Engine) HeldSession(tenant, id string) (store.Session, bool) {
	if h, ok := e.store.(store.HeldRowReader); ok {
		return h.HeldSession(tenant, id)
	}
	return store.Session{}, false
}

// noHeads is what PrepareContext's transaction checks of in.NoHeads: all
// of them with its lock on a store that checks them
// (store.HeldRowReader), none on another, which reads the index for
// them now (before the transaction, as the gateway's match did).
func (e *Engine) noHeads(ctx context.Context, tenant string, chains []string) ([]string, error) {
	if len(chains) == 0 {
		return nil, nil
	}
	if _, ok := e.store.(store.HeldRowReader); ok {
		return chains, nil
	}
	hits, err := e.FindHistory(ctx, tenant, chains, 0)
	if err != nil {
		return nil, err
	}
	for _, h := range hits {
		if h.Head {
			return nil, store.ErrLongerSession
		}
	}
	return nil, nil
}
