package store

import (
	"context"
	"errors"
)

type readAheadKey struct{}

// ReadAhead names the reads of a session that a transaction will make
// after it locks the session (GetSession), whatever the row says: a store
// that pipelines (PostgreSQL) sends them with the lock, in the same round
// trip, and answers the transaction's next such read of that session from
// them when the transaction wrote nothing in between (a write, sent or
// queued, drops them: the read then goes to the database as before). They
// run after the lock is granted, so they see what a read after
// GetSession sees; a read the transaction then does not make costs the
// database its work and no round trip. Other stores ignore it.
type ReadAhead struct {
	OpenToolCalls bool // OpenToolCalls
	PreparedView  bool // GetPreparedView
	// Held lets a store that pipelines (PostgreSQL) answer the lock and
	// the open tool calls from the row its own last transaction of the
	// session committed, checked by the server: the lock goes queued with
	// the writes and COMMIT, failing the transaction when the row moved
	// since, and fn then runs again on the row read under the lock. So fn
	// must be one that can run twice (its state set anew each time), as
	// any fn given to InTx should.
	Held bool
	// NoHeads are history chains (store.HistoryEntry.Chain) that no
	// session may hold as its head: the transaction fails with
	// ErrLongerSession, writing nothing, when one does (checked with the
	// lock, so once it is granted). Only a store that holds rows
	// (HeldRowReader) checks them; PrepareContext checks them itself on
	// the others.
	NoHeads []string
}

// Any says whether r names anything.
func (r ReadAhead) Any() bool {
	return r.OpenToolCalls || r.PreparedView || r.Held || len(r.NoHeads) > 0
}

// WithReadAhead marks the transactions run with ctx as ones that make the
// reads r names after they lock a session.
func WithReadAhead(ctx context.Context, r ReadAhead) context.Context {
	return context.WithValue(ctx, readAheadKey{}, r)
}

// ReadAheadOf returns what ctx was marked with (the zero ReadAhead: none).
func ReadAheadOf(ctx context.Context) ReadAhead {
	r, _ := ctx.Value(readAheadKey{}).(ReadAhead)
	return r
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
