package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/contextd/contextd/internal/store"
)

// pipe is one transaction on one pooled connection whose statements are
// pipelined: BEGIN (and SET LOCAL for a store.Resendable write) goes with
// the transaction's first statement, and the writes a store.Pipelined
// transaction queues (txn.write) go with its next statement that must be
// answered (Exec, QueryRow, Query, SendBatch), or with COMMIT — one round
// trip each time, where each statement was one. A read always follows, in
// the same pipeline, every write queued before it, so it sees them; a
// queued write's error is the error of that read (or of the commit), and
// the transaction is rolled back as for any error.
type pipe struct {
	conn   *pgxpool.Conn
	queued []queuedWrite
	begun  bool // something was sent: the connection may be in the transaction
	// opening is how many of the first queued statements open the
	// transaction (BEGIN, SET LOCAL): a transaction with nothing more
	// has nothing to send.
	opening int
	// ahead are the reads sent with the session's lock
	// (store.ReadAhead), until a write that may change what they read.
	ahead *readAhead
	// sends counts the pipelines sent with what was queued.
	sends int
}

// queuedWrite is a statement not sent yet, and what to make of its result
// (nil: its error as it is).
type queuedWrite struct {
	sql   string
	args  []any
	check func(pgconn.CommandTag, error) error
}

func (p *pipe) queue(sql string, check func(pgconn.CommandTag, error) error, args ...any) {
	p.ahead = nil // a write: what was read ahead may have changed
	p.queueAside(sql, check, args...)
}

// queueAside queues a write of a table no store.ReadAhead read reads (the
// ledger, an idempotency key, the calibration, the quota's check, a
// notification): what was read ahead stays.
func (p *pipe) queueAside(sql string, check func(pgconn.CommandTag, error) error, args ...any) {
	p.queued = append(p.queued, queuedWrite{sql: sql, args: args, check: check})
}

// send sends what is queued, then last (when not empty) in the same
// pipeline, and reads the queued statements' results: the first error.
// The batch's results are open for last's when err is nil.
func (p *pipe) send(ctx context.Context, last string, args ...any) (pgx.BatchResults, error) {
	var tail []*pgx.QueuedQuery
	if last != "" {
		tail = []*pgx.QueuedQuery{{SQL: last, Arguments: args}}
	}
	return p.sendWith(ctx, tail)
}

// sendWith is send with the statements of tail last: the batch's results
// are open for theirs when err is nil.
func (p *pipe) sendWith(ctx context.Context, tail []*pgx.QueuedQuery) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	for _, q := range p.queued {
		b.Queue(q.sql, q.args...)
	}
	for _, q := range tail {
		b.Queue(q.SQL, q.Arguments...)
	}
	queued := p.queued
	p.queued, p.begun = nil, true
	p.sends++
	br := p.conn.SendBatch(ctx, b)
	var first error
	for _, q := range queued {
		tag, err := br.Exec()
		if q.check != nil {
			err = q.check(tag, err)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		br.Close()
		return nil, first
	}
	return br, nil
}

func (p *pipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.ahead = nil // may be a write
	if len(p.queued) == 0 {
		p.begun = true
		return p.conn.Exec(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (p *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if len(p.queued) == 0 {
		p.begun = true
		return p.conn.QueryRow(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return batchRow{row: br.QueryRow(), br: br}
}

func (p *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if len(p.queued) == 0 {
		p.begun = true
		return p.conn.Query(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return batchRows{Rows: rows, br: br}, nil
}

// SendBatch sends b with what is queued, in one round trip; its results
// are b's. It may write: what was read ahead is dropped.
func (p *pipe) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	p.ahead = nil
	return p.sendBatch(ctx, b)
}

// sendBatch is SendBatch for a batch of reads: what was read ahead stays.
func (p *pipe) sendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if len(p.queued) == 0 {
		p.begun = true
		return p.conn.SendBatch(ctx, b)
	}
	br, err := p.sendWith(ctx, b.QueuedQueries)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return br
}

// commit sends what is queued with COMMIT. A transaction that sent
// nothing (fn made no statement) has nothing to commit.
func (p *pipe) commit(ctx context.Context) error {
	if !p.begun && len(p.queued) == p.opening {
		p.queued = nil
		return nil
	}
	p.queue("COMMIT", func(tag pgconn.CommandTag, err error) error {
		if err == nil && tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return err
	})
	br, err := p.send(ctx, "")
	if err == nil {
		err = br.Close()
	}
	if err != nil {
		p.rollback(ctx)
	}
	return err
}

// rollbackWait bounds the ROLLBACK of a caller whose context is done.
const rollbackWait = time.Second

// rollback ends the transaction when anything was sent, within the
// caller's context — a ROLLBACK without one would wait for a database the
// network lost as long as TCP does, holding the call and its connection —
// or, when that context is done already, within rollbackWait. If it
// cannot, the connection is left in the transaction (or closed), and the
// pool destroys it on release instead of reusing it.
func (p *pipe) rollback(ctx context.Context) {
	p.queued = nil
	if !p.begun {
		return
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), rollbackWait)
		defer cancel()
	}
	p.conn.Exec(ctx, "ROLLBACK") //nolint:errcheck // see above
}

// inTx runs fn in a pipelined transaction on a connection of pool; rows
// are the Store's held rows (heldrow.go), which it may start from unless
// noHeld, and which it updates once it commits.
func inTx(ctx context.Context, pool *pgxpool.Pool, rows *heldRows, noHeld bool, fn func(context.Context, store.Tx) error) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	p := &pipe{conn: c}
	p.queue("BEGIN", nil)
	if store.IsResendable(ctx) {
		// The commit does not wait for its WAL to be flushed
		// (store.Resendable).
		p.queue("SET LOCAL synchronous_commit = off", nil)
	}
	p.opening = len(p.queued)
	t := &txn{tx: p, rows: rows, noHeld: noHeld}
	err = fn(ctx, t)
	if err == nil {
		err = p.commit(ctx)
	} else {
		t.failedOnHeld(ctx)
		p.rollback(ctx)
	}
	if err != nil && t.track.guardFailed {
		err = errHeldStale // fn may have taken its read's error for another
	} else if err != nil && t.heads.failed {
		err = store.ErrLongerSession // the same
	}
	switch {
	case err == nil:
		t.committed()
	case errors.Is(err, errHeldStale) && t.track.heldStale:
		rows.stale(t.track.key) // another writer's: not offered as a guess (HeldSession)
	case errors.Is(err, errHeldStale):
		rows.forget(t.track.key)
	}
	return err
}

// write runs a statement that returns nothing the caller reads: queued
// when the transaction is store.Pipelined, else now; check makes its
// result an error (nil: the error as it is).
func (t *txn) write(ctx context.Context, check func(pgconn.CommandTag, error) error, sql string, args ...any) error {
	t.tx.ahead = nil
	return t.writeAside(ctx, check, sql, args...)
}

// writeAside is write for a table no store.ReadAhead read reads (the
// ledger, an idempotency key, the calibration, the quota's check, a
// notification): what was read ahead stays.
func (t *txn) writeAside(ctx context.Context, check func(pgconn.CommandTag, error) error, sql string, args ...any) error {
	if store.IsPipelined(ctx) {
		t.tx.queueAside(sql, check, args...)
		return nil
	}
	ahead := t.tx.ahead
	tag, err := t.tx.Exec(ctx, sql, args...)
	t.tx.ahead = ahead
	if check != nil {
		err = check(tag, err)
	}
	return err
}

// writeBatch runs b's statements, which return nothing the caller reads,
// as write does: queued when the transaction is store.Pipelined, else in
// one round trip now; check makes the first error the caller's.
func (t *txn) writeBatch(ctx context.Context, b *pgx.Batch, check func(error) error) error {
	if store.IsPipelined(ctx) {
		c := func(_ pgconn.CommandTag, err error) error { return check(err) }
		for _, q := range b.QueuedQueries {
			t.tx.queue(q.SQL, c, q.Arguments...)
		}
		return nil
	}
	return check(runBatch(t.tx.SendBatch(ctx, b), b.Len()))
}

// batchRow is the row of a pipeline's last statement: the pipeline is
// closed once it is read.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil || (errors.Is(err, pgx.ErrNoRows) && cerr != nil) {
		err = cerr
	}
	return err
}

// batchRows are the rows of a pipeline's last statement: the pipeline is
// closed with them.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r batchRows) Close() {
	r.Rows.Close()
	r.br.Close() //nolint:errcheck // the statements before were read in send; the rows' error is Err's
}

// errRow is a row whose statement was not run: an error before it.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
