package postgres

import (
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/contextd/contextd/internal/store"
)

// A transaction given store.ReadAhead.NoHeads checks them with its first
// lock: a statement of its own after the lock's (the held row's guards,
// or the FOR UPDATE read), so its snapshot is taken once the lock is
// granted, and before any write. When a live session holds one of the
// chains as its head, it fails (division by zero) and the transaction
// answers store.ErrLongerSession whatever fn made of the error (inTx),
// having written nothing. The gateway's match of a conversation this
// replica served last names the request's new chains this way, so the
// index's lookup goes with PrepareContext's lock instead of a round trip
// of its own (docs/performance.md, the eighth pass).
const noHeadsGuard = `SELECT 1 / (NOT EXISTS (SELECT 1 FROM history_index h
	JOIN sessions s ON s.tenant = h.tenant AND s.id = h.session_id AND s.deleted_at IS NULL
	WHERE h.tenant = $1 AND h.chain = ANY($2::text[]) AND h.head))::int`

// headsGuard is a transaction's NoHeads check: sent once (with its first
// lock), failed when the server found a head.
type headsGuard struct {
	sent, failed bool
}

// due says whether the lock being made carries the guard (the
// transaction's first, when ra names chains), and marks it sent.
func (h *headsGuard) due(ra store.ReadAhead) bool {
	if h.sent || len(ra.NoHeads) == 0 {
		return false
	}
	h.sent = true
	return true
}

// answer is the guard's error as the transaction's: store.ErrLongerSession
// for a head found.
func (h *headsGuard) answer(err error) error {
	if isDivisionByZero(err) {
		h.failed = true
		return store.ErrLongerSession
	}
	return err
}

// check is answer as a queued statement's check.
func (h *headsGuard) check(_ pgconn.CommandTag, err error) error {
	return h.answer(err)
}
