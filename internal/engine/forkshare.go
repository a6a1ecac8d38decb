package engine

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// insert stores the append's messages: a fork's appends of the prefix it
// shares (its first, or the pieces of a long replay) through store.ForkTx,
// so that what it shares with the log it forked from is stored once
// (docs/storage.md), any other as it is.
func (a stagedAppend) insert(ctx context.Context, tx store.Tx, s *store.Session) error {
	if a.shared.SessionID != "" && s.LogCount < a.shared.Length {
		return tx.InsertForkMessages(ctx, s.Tenant, s.ID, a.msgs, a.shared)
	}
	return tx.InsertMessages(ctx, s.Tenant, s.ID, a.msgs)
}
