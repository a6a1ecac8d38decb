package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/contextd/contextd/internal/store"
)

// The tenant's log quota was a read of its count after each append's
// insert, in both transactions of a gateway request (docs/performance.md,
// "SQLite statements per gateway request"). In a store.Pipelined
// transaction, whose caller takes a write's error from a later statement
// or the commit, CheckLogBytes only notes the check: the session row's
// UPDATE that such a transaction makes after its append reads the count
// in its RETURNING clause, and a call that never writes the row after the
// check reads it at its end (txn.finish), before its savepoint is
// released. Either way the count includes every insert before the check
// (and, as a later read would, anything written after it), and past the
// quota the call fails with the caller's error and is rolled back:
// storetest's CheckLogBytes, TestHostileLogQuota.

// logCheck is a noted CheckLogBytes.
type logCheck struct {
	tenant string
	quota  int64
	over   error
}

// tenantLogBytes is the tenant's count as a scalar subquery.
const tenantLogBytes = `coalesce((SELECT log_bytes FROM tenant_usage WHERE tenant = ?), 0)`

// CheckLogBytes implements store.Tx.
func (t *txn) CheckLogBytes(ctx context.Context, tenant string, quota int64, over error) error {
	if store.IsPipelined(ctx) {
		if t.logCheck != nil && t.logCheck.tenant != tenant {
			if err := t.finish(ctx); err != nil {
				return err
			}
		}
		t.logCheck = &logCheck{tenant: tenant, quota: quota, over: over}
		return nil
	}
	n, err := t.LogBytes(ctx, tenant)
	if err == nil && n > quota {
		err = over
	}
	return err
}

// LogBytes reads the tenant's count (migration 00012's triggers keep it).
func (t *txn) LogBytes(ctx context.Context, tenant string) (int64, error) {
	var n int64
	err := t.tx.QueryRowContext(ctx, `SELECT log_bytes FROM tenant_usage WHERE tenant = ?`, tenant).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// checked answers the noted check with the tenant's count n, read by a
// statement that carried it.
func (t *txn) checked(n int64) error {
	c := t.logCheck
	t.logCheck = nil
	if n > c.quota {
		return c.over
	}
	return nil
}

// finish makes the noted check, if any, by a read of its own: the call's
// last statement.
func (t *txn) finish(ctx context.Context) error {
	if t.logCheck == nil {
		return nil
	}
	n, err := t.LogBytes(ctx, t.logCheck.tenant)
	if err != nil {
		return fmt.Errorf("log quota: %w", err)
	}
	return t.checked(n)
}

// updateSessionChecked runs the session row's UPDATE (query, args) with
// the noted check's count in its RETURNING clause.
func (t *txn) updateSessionChecked(ctx context.Context, query string, args []any, id string) error {
	var n int64
	err := t.tx.QueryRowContext(ctx, query+` RETURNING `+tenantLogBytes, append(args, t.logCheck.tenant)...).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return err
	}
	return t.checked(n)
}
