package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// Group commit. SQLite has one writer and every commit waits for an fsync
// (synchronous=FULL): with one transaction per call, concurrent calls of
// different sessions queue for the write lock and each pays its own fsync.
// Instead, InTx queues its function; whoever holds the write turn runs
// every function queued at that moment (at most maxGroup) in one
// transaction, each inside a savepoint, and commits once. A function that
// fails is rolled back to its savepoint: it changes nothing and its caller
// gets its error, while the others commit. A caller is answered only once
// the group's commit is durable, so InTx keeps its contract (durable when
// it returns nil); when the commit itself fails, every caller of the group
// gets that error and nothing of the group is stored (when the WAL's sync
// after it fails, walsync.go, the group is stored but its callers get
// store.ErrUnavailable: its outcome unknown, it is not known to be on disk).
//
// What a function sees is what the functions before it in the group wrote
// (as if they had committed just before), which is the order the write lock
// would have given them.

// maxGroup bounds the calls one transaction holds, and groupHold the time
// its functions may take before the rest of the queue waits for the next
// group: a caller waits for at most maxGroup functions (and at most
// groupHold plus its own function's time) and one fsync after its turn
// comes.
const (
	maxGroup  = 32
	groupHold = 10 * time.Millisecond
)

// txCall is one queued InTx.
type txCall struct {
	ctx  context.Context
	fn   func(context.Context, store.Tx) error
	done chan error // buffered: the leader never blocks on it
}

// commitQueue holds the calls waiting for a group.
type commitQueue struct {
	mu      sync.Mutex
	pending []*txCall
	// hold is groupHold (tests lengthen it).
	hold time.Duration
	// groups and calls count transactions committed (or tried) and the
	// functions they ran, for BenchmarkGroupCommit and the tests.
	groups, calls int64
}

// take removes and returns up to maxGroup queued calls.
func (q *commitQueue) take() []*txCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.pending), maxGroup)
	group := q.pending[:n:n]
	q.pending = q.pending[n:]
	return group
}

// putBack returns calls a group did not reach to the front of the queue.
func (q *commitQueue) putBack(calls []*txCall) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(calls[:len(calls):len(calls)], q.pending...)
}

// remove takes c out of the queue; false when a leader already took it.
func (q *commitQueue) remove(c *txCall) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, p := range q.pending {
		if p == c {
			q.pending = append(q.pending[:i:i], q.pending[i+1:]...)
			return true
		}
	}
	return false
}

// GroupStats returns the write transactions run by InTx and the calls
// they held, since the store was opened.
func (s *Store) GroupStats() (transactions, calls int64) {
	s.queue.mu.Lock()
	defer s.queue.mu.Unlock()
	return s.queue.groups, s.queue.calls
}

// InTx runs fn in a read-write transaction, possibly shared with other
// concurrent calls (group commit, above); it returns once fn's writes are
// durable, or fn's error with nothing of fn stored.
func (s *Store) InTx(ctx context.Context, fn func(context.Context, store.Tx) error) error {
	c := &txCall{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.queue.mu.Lock()
	s.queue.pending = append(s.queue.pending, c)
	s.queue.mu.Unlock()
	cancelled := ctx.Done()
	for {
		select {
		case err := <-c.done:
			return err
		case s.writer <- struct{}{}:
			start := time.Now()
			s.runGroup()
			s.clock.held(start)
			<-s.writer
		case <-cancelled:
			if s.queue.remove(c) {
				return fmt.Errorf("waiting to write: %w", ctx.Err())
			}
			// A group holds it: its answer is coming, unless the group puts
			// it back (its hold spent); then this caller may have to take
			// the turn itself to have it answered (a leader answers a
			// cancelled call without running it), so it keeps waiting for
			// either.
			cancelled = nil
		}
	}
}

// runGroup runs the queued calls in one transaction; the caller holds the
// write turn.
func (s *Store) runGroup() {
	group := s.queue.take()
	if len(group) == 0 {
		return
	}
	// The transaction is not any caller's: a caller that goes away must not
	// interrupt it (SQLite would roll back the whole group), so statements
	// run without cancellation; a caller already gone is skipped.
	ctx := context.Background()
	tx, pool, err := s.begin(ctx)
	if err != nil {
		for _, c := range group {
			c.done <- fmt.Errorf("begin: %w", err)
		}
		return
	}
	if len(group) == 1 { // alone: no savepoint
		c := group[0]
		err := c.ctx.Err()
		if err != nil {
			err = fmt.Errorf("waiting to write: %w", err)
		} else {
			err = s.runCall(c, tx, pool)
		}
		s.counted() // COMMIT or ROLLBACK
		if err == nil {
			s.count(1)
			if err = tx.Commit(); err != nil {
				err = fmt.Errorf("commit: %w", err)
			} else {
				s.committed()
				err = s.syncUnlessResendable(group)
			}
		} else {
			_ = tx.Rollback()
		}
		c.done <- err
		return
	}
	var committed []*txCall
	abort := func(err error) {
		s.counted()
		_ = tx.Rollback()
		for _, c := range committed {
			c.done <- err
		}
	}
	start := time.Now()
	for i, c := range group {
		if i > 0 && time.Since(start) > s.queue.hold {
			s.queue.putBack(group[i:])
			break
		}
		if err := c.ctx.Err(); err != nil {
			c.done <- fmt.Errorf("waiting to write: %w", err)
			continue
		}
		s.counted()
		if _, err := tx.ExecContext(ctx, `SAVEPOINT call`); err != nil {
			c.done <- err
			abort(fmt.Errorf("savepoint: %w", err))
			failRest(group[i+1:], err)
			return
		}
		if err := s.runCall(c, tx, pool); err != nil {
			// The call changes nothing; if the savepoint is gone (SQLite
			// rolled the whole transaction back on an I/O error), nothing
			// of the group is stored.
			c.done <- err
			s.counted()
			s.counted()
			if rerr := undo(ctx, tx); rerr != nil {
				abort(fmt.Errorf("rolling back a failed call: %w", rerr))
				failRest(group[i+1:], rerr)
				return
			}
			continue
		}
		s.counted()
		if _, err := tx.ExecContext(ctx, `RELEASE call`); err != nil {
			committed = append(committed, c)
			abort(fmt.Errorf("release: %w", err))
			failRest(group[i+1:], err)
			return
		}
		committed = append(committed, c)
	}
	s.counted() // COMMIT or ROLLBACK
	if len(committed) == 0 {
		_ = tx.Rollback()
		return
	}
	s.count(len(committed))
	err = tx.Commit()
	if err != nil {
		err = fmt.Errorf("commit: %w", err)
	} else {
		s.committed()
		err = s.syncUnlessResendable(committed)
	}
	for _, c := range committed {
		c.done <- err
	}
}

// count records a transaction of n committed calls.
func (s *Store) count(n int) {
	s.queue.mu.Lock()
	defer s.queue.mu.Unlock()
	s.queue.groups++
	s.queue.calls += int64(n)
}

// runCall runs one call's function; a panic is its error (the group goes
// on without it). The function gets its caller's context (its own waits
// end with it), its statements run uncancelled.
func (s *Store) runCall(c *txCall, tx *sql.Tx, pool *prepared) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("transaction function panicked: %v", p)
		}
	}()
	t := &txn{tx: uncancelled{s: s, pool: pool, tx: tx}}
	if err := c.fn(c.ctx, t); err != nil {
		return err
	}
	return t.finish(c.ctx)
}

// uncancelled runs a transaction's statements whatever their context: a
// statement interrupted by its caller's cancellation makes SQLite roll back
// the whole transaction, the other calls of the group with it. Statements
// go through the store's prepared statements (prepared.go), so the writer's
// turn is not spent parsing SQL.
type uncancelled struct {
	s    *Store
	pool *prepared // the transaction's pool's statements
	tx   *sql.Tx
}

func (u uncancelled) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	u.s.counted()
	ctx = context.WithoutCancel(ctx)
	if st := u.pool.txStmt(ctx, u.tx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return u.tx.QueryRowContext(ctx, query, args...)
}

func (u uncancelled) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	u.s.counted()
	ctx = context.WithoutCancel(ctx)
	if st := u.pool.txStmt(ctx, u.tx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return u.tx.QueryContext(ctx, query, args...)
}

func (u uncancelled) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	u.s.counted()
	ctx = context.WithoutCancel(ctx)
	if st := u.pool.txStmt(ctx, u.tx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return u.tx.ExecContext(ctx, query, args...)
}

// undo rolls the transaction back to the current call's savepoint and
// releases it.
func undo(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `ROLLBACK TO call`); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `RELEASE call`)
	return err
}

// failRest answers the calls a failed group did not reach.
func failRest(rest []*txCall, err error) {
	for _, c := range rest {
		c.done <- fmt.Errorf("a call grouped with this one broke the transaction: %w", err)
	}
}

// resendable reports whether every call of a group is marked
// store.Resendable: only then may its commit skip the sync.
func resendable(group []*txCall) bool {
	for _, c := range group {
		if !store.IsResendable(c.ctx) {
			return false
		}
	}
	return true
}

// begin starts a group's transaction on the store's pool of writes (its
// connections opened at synchronous=NORMAL) and returns that pool's
// prepared statements. Every group commits there, whatever its durability:
// SQLite empties a connection's page cache whenever another connection
// committed since its last transaction, so writes split over two pools (the
// gateway's resendable PrepareContext on one, its durable recording on the
// other) re-read every page they touch from the WAL on every request. A
// group that is not wholly resendable is made durable after its commit by
// an fsync of the WAL (walsync.go), what synchronous=FULL does at the end
// of a commit in WAL mode. SQLite refuses to change the level inside a
// transaction, and setting it before BEGIN and back after cost two
// statements a group, parsed each time (TestGatewayStatementsOnSQLite).
func (s *Store) begin(ctx context.Context) (*sql.Tx, *prepared, error) {
	s.counted() // BEGIN
	if err := s.writable(); err != nil {
		return nil, nil, err
	}
	tx, err := s.writes.db.BeginTx(ctx, nil)
	return tx, &s.writes, err
}
