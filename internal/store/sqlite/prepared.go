package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// idleConns is how many connections the pool keeps open between calls.
// database/sql keeps 2 by default: 16 concurrent readers then opened and
// closed a connection (and ran its four pragmas) on most calls, 13 % of
// GetContextUsage's CPU (BenchmarkUsageVsHealth). A connection costs its
// page cache (about 2 MB at SQLite's default cache_size) once used.
const idleConns = 8

// prepared holds the statements of the hot single-row reads outside
// transactions, prepared once per connection by database/sql instead of
// parsed on every call: the pure-Go SQLite spent 28 % of GetContextUsage's
// CPU in sqlite3_prepare (BenchmarkUsageVsHealth, docs/performance.md).
// Reads inside a transaction still prepare their statements.
type prepared struct {
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

// stmt returns the prepared statement of query, preparing it on first use.
// A failed prepare is not kept (the next call tries again).
func (s *Store) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s.prepared.mu.Lock()
	defer s.prepared.mu.Unlock()
	if st, ok := s.prepared.stmts[query]; ok {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if s.prepared.stmts == nil {
		s.prepared.stmts = map[string]*sql.Stmt{}
	}
	s.prepared.stmts[query] = st
	return st, nil
}

// Statements inside transactions are prepared too, when short enough and
// while the cache holds fewer than maxPrepared (batched inserts of many rows
// have a text per row count: those are parsed each time).
const (
	maxPrepared      = 256
	maxPreparedBytes = 4096
)

// txStmt is query prepared for the transaction tx (reused on the
// transaction's connection once prepared there), or nil when it is not
// cached (too long, the cache full, or the prepare failed: the caller runs
// the query as is, and meets the error then).
func (s *Store) txStmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	if len(query) > maxPreparedBytes {
		return nil
	}
	s.prepared.mu.Lock()
	st, ok := s.prepared.stmts[query]
	full := len(s.prepared.stmts) >= maxPrepared
	s.prepared.mu.Unlock()
	if !ok {
		if full {
			return nil
		}
		var err error
		if st, err = s.stmt(ctx, query); err != nil {
			return nil
		}
	}
	return tx.StmtContext(ctx, st)
}

// queryRow is QueryRowContext through the prepared statement of query; a
// failed prepare is the row's error.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) scanner {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// closePrepared closes the prepared statements (before the database).
func (s *Store) closePrepared() {
	s.prepared.mu.Lock()
	defer s.prepared.mu.Unlock()
	for _, st := range s.prepared.stmts {
		_ = st.Close()
	}
	s.prepared.stmts = nil
}

// errRow is a row whose Scan answers err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
