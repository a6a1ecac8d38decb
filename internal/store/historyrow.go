package store

import "context"

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
