package store

import "context"

// Durability. InTx returns once a transaction is durable (SQLite: an fsync
// of the WAL after the commit, as synchronous=FULL does; PostgreSQL: the commit's WAL
// flushed), which every API call needs: a client told its write succeeded
// does not send it again. The gateway's writes are different: its client
// resends the whole conversation with every call, so what the gateway
// stores (the request's new messages, the reply, a session made for a
// history) is recovered from the next call after a crash. Such a write is
// marked Resendable and does not wait for the disk: on SQLite (WAL) its
// transaction commits with synchronous=NORMAL and no sync after, which
// loses nothing when the process dies and at most the commits since the
// last sync (the next durable commit or checkpoint) when the operating system does; on PostgreSQL with
// synchronous_commit=off, which loses at most the last few hundred
// milliseconds of such commits (wal_writer_delay, three times) when the
// server crashes, never a consistent state. A transaction that groups
// several calls (SQLite's group commit) syncs when any of them is not
// resendable. The gateway's recording of a call (the ledger) is Durable
// again: only contextd holds the provider's usage.

type resendableKey struct{}

// Resendable marks the writes made with ctx as recoverable from the
// client's next request: their transactions need not be durable when
// InTx returns.
func Resendable(ctx context.Context) context.Context {
	return context.WithValue(ctx, resendableKey{}, true)
}

// IsResendable reports whether ctx was marked Resendable.
func IsResendable(ctx context.Context) bool {
	v, _ := ctx.Value(resendableKey{}).(bool)
	return v
}

// Durable undoes Resendable for the writes made with ctx: the gateway's
// recording of a call holds the provider's usage (the ledger, the
// calibration), which no client can send again, so it waits for the disk
// like an API call.
func Durable(ctx context.Context) context.Context {
	return context.WithValue(ctx, resendableKey{}, false)
}

// MarkedDurability reports whether ctx was marked Resendable or Durable:
// a gateway request's, its writes made Durable since or not (the SQLite
// store runs such a context's reads where its writes go).
func MarkedDurability(ctx context.Context) bool {
	_, ok := ctx.Value(resendableKey{}).(bool)
	return ok
}
