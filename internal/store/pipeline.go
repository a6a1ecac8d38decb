package store

import "context"

type pipelinedKey struct{}

// Pipelined marks the transactions run with ctx as ones whose writes may
// be sent late: a store that pipelines (PostgreSQL) queues a write that
// returns nothing the caller reads (UpdateSession, InsertMessages,
// AppendView, StageView, FlipView's flip (its count is a read),
// InsertCompaction, PutToolCalls, PutIdempotency, AddLedger,
// PutPreparedView, PutCalibration, CheckLogBytes (its refusal is the
// server's), a notification) and sends it with the transaction's next statement that
// must be answered (a read) or with its COMMIT, in one round trip. Every
// read still sees every write before it; what changes is when a write's
// error is known: from the next read, or from InTx at the commit, never
// from the write's own call. So a transaction is marked only where the
// caller returns a write's error as it is and never goes on after one
// (PrepareContext and RecordExchange); others are left as they are.
func Pipelined(ctx context.Context) context.Context {
	return context.WithValue(ctx, pipelinedKey{}, true)
}

// IsPipelined reports whether ctx was marked Pipelined.
func IsPipelined(ctx context.Context) bool {
	v, _ := ctx.Value(pipelinedKey{}).(bool)
	return v
}
