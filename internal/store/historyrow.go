package store

import (
	"context"
	"errors"
)

// HistoryRowFinder is a store that reads a history lookup and a session's
// row together, in one round trip (PostgreSQL: one pipeline), where two
// reads would take two. The gateway confirms the session it served a
// conversation in last by both (the request's new chains, which no
// session should hold as its head, and the row it matches the request
// against); the two answers are each as fresh as a read of its own.
type HistoryRowFinder interface {
	// FindHistoryAndSession is FindHistory(tenant, chains, limit) and
	// the session row of id, read without a lock; a missing session is
	// ErrNotFound (the hits are then nil).
	FindHistoryAndSession(ctx context.Context, tenant string, chains []string, limit int, id string) ([]HistoryHit, Session, error)
}

// ErrLongerSession: a transaction given ReadAhead.NoHeads found a session
// holding one of them as its head (a longer session than the one the
// transaction locked exists for that history). Nothing was written.
var ErrLongerSession = errors.New("a longer session holds the history")

// HeldRowReader is a store that keeps the session rows its own last
// transactions committed (PostgreSQL: ReadAhead.Held) and checks
// ReadAhead.NoHeads with a transaction's lock.
type HeldRowReader interface {
	// HeldSession is the row of tenant's session id this store's last
	// transaction of it committed, if it holds one: a guess, checked by
	// the lock of a transaction marked ReadAhead.Held (a stale one costs
	// that transaction a run again, or the caller a version conflict).
	HeldSession(tenant, id string) (Session, bool)
}
