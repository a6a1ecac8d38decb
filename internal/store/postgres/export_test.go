package postgres

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// MarkUnavailable is unavailable, for the external tests.
var MarkUnavailable = unavailable

// SyncCommit returns the synchronous_commit of the transaction tx.
func SyncCommit(ctx context.Context, tx store.Tx) (string, error) {
	var v string
	err := tx.(*txn).tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v)
	return v, err
}
