package sqlite

import (
	"sync/atomic"
)

// counters count the statements the store runs, so that what a call costs
// in SQLite's work is a figure a test can hold (test/gateway's
// TestGatewayStatementsOnSQLite) and an operator can watch
// (contextd_sqlite_statements_total): every statement of a write
// transaction (its BEGIN, savepoints and COMMIT included) and every read
// outside one that goes through reads or queryRow — the hot paths'; the
// statements run on the pool directly are not: a fork's transaction,
// retention's purge, the stray views' scan, GetCompaction's read.
type counters struct {
	statements atomic.Int64
}

// Statements returns the statements the store has run since it was
// opened (see counters).
func (s *Store) Statements() int64 { return s.counts.statements.Load() }

// counted adds one statement to the store's count.
func (s *Store) counted() { s.counts.statements.Add(1) }
