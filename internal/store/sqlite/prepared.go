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
