package store

import "context"

// TxNotifier is a Tx that can send a notification delivered when it
// commits, and never if it rolls back (PostgreSQL's NOTIFY): a change is
// announced by the transaction that makes it, without a round trip of its
// own after the commit.
type TxNotifier interface {
	Notify(ctx context.Context, channel, payload string) error
}
