package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/contextd/contextd/internal/store"
)

// A pipelined transaction that knows its session's open tool calls (read
// with the lock, or held: heldrow.go) answers ToolCalls — the lookup by
// id of a request's tool results and a reply's tool calls, pairToolCalls —
// without a round trip of its own: an open call is known, and any other id
// is taken for one the session never used, a guess the server checks
// (unknownCallsGuard) in the pipeline that carries the transaction's
// writes and COMMIT, before any write that follows it runs. When one of
// those ids has a row (a call answered before, a client reusing an id:
// refused either way, or a compacted history making a call again), the
// guard fails the transaction, which runs again without the guess
// (errHeldStale, inTx: t.noHeld), reading the ids as before. A refusal fn
// computed on the guess (an id taken for unknown) has the guard answered
// first, with whatever was queued before it (failedOnHeld: a read since
// the lock, or writes queued after it, leave it still queued), so the
// refusal answered is the stored rows' (TestToolCallsGuessRefusalChecked).
// docs/performance.md, the ninth pass.
const unknownCallsGuard = `SELECT 1 / (NOT EXISTS (SELECT 1 FROM tool_calls
	WHERE tenant = $1 AND session_id = $2 AND call_id = ANY($3::text[])))::int`

// guessToolCalls answers ToolCalls from the open calls the transaction
// knows, the guard queued; ok false when it knows none (then read).
func (t *txn) guessToolCalls(ctx context.Context, tenant, id string, ids []string) (map[string]store.ToolCall, bool) {
	h := &t.track
	if t.noHeld || !store.IsPipelined(ctx) || !h.locked || h.key != (heldKey{tenant, id}) || !h.callsKnown {
		return nil, false
	}
	out := make(map[string]store.ToolCall, len(ids))
	var rest []string
	for _, callID := range ids {
		found := false
		for _, c := range h.calls {
			if c.CallID == callID {
				out[callID], found = store.ToolCall{CallID: c.CallID, Position: c.Position}, true
				break
			}
		}
		if !found {
			rest = append(rest, callID)
		}
	}
	if len(rest) == 0 {
		return out, true
	}
	// Answered before fn's error is, when fn fails with it still queued
	// (failedOnHeld), whatever was queued before it.
	t.tx.queueAside(unknownCallsGuard, t.callsGuess, tenant, id, rest)
	h.unknownAt, h.unknownSends, h.unknownQueued = len(t.tx.queued)-1, t.tx.sends, true
	return out, true
}

// callsGuess is the guard's check: a known id among those taken for
// unknown makes the transaction run again without the guess.
func (t *txn) callsGuess(_ pgconn.CommandTag, err error) error {
	if isDivisionByZero(err) {
		t.track.guardFailed = true
		return errHeldStale
	}
	return err
}
