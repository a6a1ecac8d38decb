package sqlite

import (
	"context"
	"database/sql"
	"sync"

	"github.com/contextd/contextd/internal/store"
)

// idleConns is how many connections the pool keeps open between calls.
// database/sql keeps 2 by default: 16 concurrent readers then opened and
// closed a connection (and ran its four pragmas) on most calls, 13 % of
// GetContextUsage's CPU (BenchmarkUsageVsHealth). A connection costs its
// page cache (about 2 MB at SQLite's default cache_size) once used.
const idleConns = 8

// writesIdleConns is how many connections the pool of writes keeps open:
// the writer's, and a few for the gateway's reads that come while it
// writes (readPool), each with its page cache (about 2 MB once used).
const writesIdleConns = 4

// prepared holds prepared statements by their text, prepared once per
// connection by database/sql instead of parsed on every call: the pure-Go
// SQLite spent 28 % of GetContextUsage's CPU, and a quarter of the CPU
// inside the gateway's write transactions, in sqlite3_prepare
// (docs/performance.md). Reads outside transactions (reads) and the
// statements of transactions (groupcommit.go) go through it. A statement
// belongs to its pool (db): the store keeps one cache per pool.
type prepared struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

// stmt returns the prepared statement of query, preparing it on first use.
// A failed prepare is not kept (the next call tries again).
func (p *prepared) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.stmts[query]; ok {
		return st, nil
	}
	st, err := p.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if p.stmts == nil {
		p.stmts = map[string]*sql.Stmt{}
	}
	p.stmts[query] = st
	return st, nil
}

// A statement is prepared when its text is at most maxPreparedBytes and
// the cache holds fewer than maxPrepared (batched inserts have a text per
// row count: long ones are parsed each time).
const (
	maxPrepared      = 512
	maxPreparedBytes = 4096
)

// cached is query's prepared statement, or nil when it is not cached (too
// long, the cache full, or the prepare failed: the caller runs the query as
// is, and meets the error then).
func (p *prepared) cached(ctx context.Context, query string) *sql.Stmt {
	if len(query) > maxPreparedBytes {
		return nil
	}
	p.mu.Lock()
	st, ok := p.stmts[query]
	full := len(p.stmts) >= maxPrepared
	p.mu.Unlock()
	if ok {
		return st
	}
	if full {
		return nil
	}
	st, err := p.stmt(ctx, query)
	if err != nil {
		return nil
	}
	return st
}

// txStmt is query prepared for the transaction tx of p's pool (reused on
// the transaction's connection once prepared there), or nil (see cached).
func (p *prepared) txStmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	if st := p.cached(ctx, query); st != nil {
		return tx.StmtContext(ctx, st)
	}
	return nil
}

// close closes the prepared statements (before the database).
func (p *prepared) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.stmts {
		_ = st.Close()
	}
	p.stmts = nil
}

// reads runs the store's reads outside transactions through the prepared
// statements.
type reads struct{ s *Store }

func (r reads) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	r.s.counted()
	p := r.s.readPool(ctx)
	if st := p.cached(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.db.QueryRowContext(ctx, query, args...)
}

func (r reads) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	r.s.counted()
	p := r.s.readPool(ctx)
	if st := p.cached(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.db.QueryContext(ctx, query, args...)
}

// queryRow is QueryRowContext through the prepared statement of query; a
// failed prepare is the row's error.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) scanner {
	s.counted()
	st, err := s.readPool(ctx).stmt(ctx, query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// errRow is a row whose Scan answers err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// readPool is the pool a read outside transactions runs on. A gateway
// request's reads (its context marked store.Resendable, or made Durable
// since, as the recording's: store.MarkedDurability; the history lookup,
// the session row) run on the pool of writes (begin), whose
// connection that committed last still holds its pages in its cache
// (database/sql hands out the connection returned last); on the API's
// pool they found their cache emptied by each of those commits and read
// the pages again from the WAL. The API's reads stay on their own pool, so
// that many concurrent readers never open and close connections of the
// pool of writes. Either way a read is never blocked by the writer: the
// pool opens another connection when the writer holds its idle one.
func (s *Store) readPool(ctx context.Context) *prepared {
	if store.MarkedDurability(ctx) {
		return &s.writes
	}
	return &s.prepared
}
