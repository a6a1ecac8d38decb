package engine

import (
	"context"
	"fmt"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// Quotas: what a tenant may keep stored and how long one view may grow.
// Both are checked in the transaction of the append, with the session (and
// for the log, the tenant's count) held, so concurrent appends cannot pass
// them together; a refused append stores nothing.

// checkViewMessages refuses an append that would make s's active view
// longer than MaxViewMessages messages: InvalidArgument when the batch
// alone is, ResourceExhausted (compact or clear first) otherwise.
func (e *Engine) checkViewMessages(s *store.Session, msgs []chat.Message) error {
	max := int64(e.limits.MaxViewMessages)
	if max <= 0 || s.ActiveCount+int64(len(msgs)) <= max {
		return nil
	}
	if int64(len(msgs)) > max {
		return chat.Invalid("messages", "has %d messages; %s allows %d in a session's active view", len(msgs), limitViewMessages, max)
	}
	return fmt.Errorf("the append would make session %q's active view %d messages; %s allows %d; compact or clear it first: %w",
		s.ID, s.ActiveCount+int64(len(msgs)), limitViewMessages, max, ErrResourceExhausted)
}

// chargeLog refuses an append that leaves the tenant storing more than
// quota bytes of log (0: no quota). It is called after the insert, when
// the store's count includes the batch (the count is the store's own
// measure of stored rows, kept by the database on every insert and
// delete; see store.Tx.LogBytes); the refusal rolls the transaction back,
// so nothing of the append is stored. A tenant already at its quota is
// refused too: a batch of messages adds bytes. (It was also called before
// the insert, for that case: a read, on PostgreSQL a round trip, in every
// write transaction that the check after the insert already covers.)
//
// The check is the store's (store.Tx.CheckLogBytes), so that PostgreSQL
// sends it with the transaction's commit in a store.Pipelined transaction
// instead of reading the count in a round trip of its own; its refusal is
// then the commit's error, and the transaction is rolled back all the
// same.
func chargeLog(ctx context.Context, tx store.Tx, tenant string, quota int64) error {
	if quota <= 0 {
		return nil
	}
	return tx.CheckLogBytes(ctx, tenant, quota, &logQuotaError{tenant: tenant, quota: quota})
}

// logQuotaError is chargeLog's refusal: ErrResourceExhausted (errors.Is),
// its message written only when it is read, not in every transaction that
// stays within the quota.
type logQuotaError struct {
	tenant string
	quota  int64
}

func (e *logQuotaError) Error() string {
	return fmt.Sprintf("tenant %q would store more than the %d bytes of messages %s allows; delete sessions or wait for retention: %v",
		e.tenant, e.quota, limitLogBytes, ErrResourceExhausted)
}

func (e *logQuotaError) Unwrap() error { return ErrResourceExhausted }
