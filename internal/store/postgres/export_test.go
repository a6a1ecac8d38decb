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

// HintTools makes text this replica's guess of the session's tools, under
// the digest of digestOf (a guess that lies, to see whether a read used it).
func HintTools(tenant, id, text, digestOf string) {
	d := toolsDigest(digestOf)
	toolsHints.mu.Lock()
	defer toolsHints.mu.Unlock()
	if toolsHints.byDigest == nil {
		toolsHints.byDigest, toolsHints.bySession = map[string]string{}, map[string]string{}
	}
	toolsHints.byDigest[d], toolsHints.bySession[hintKey(tenant, id)] = text, d
}

// ForgetToolsHints empties this process's memory of sessions' tools.
func ForgetToolsHints() {
	toolsHints.mu.Lock()
	defer toolsHints.mu.Unlock()
	toolsHints.byDigest, toolsHints.bySession, toolsHints.bytes, toolsHints.keyBytes = nil, nil, 0, 0
}
