package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestToolCallsGuessRefusalChecked: a refusal fn computed on the guess
// of ToolCalls (an answered id taken for unknown) is never the call's
// answer, whatever the transaction did between its lock and the lookup —
// a read that answered the lock's guards (engine.prepareOnce's
// idempotency key) or a write queued after them (its edits, a recording's
// usage reports): the guess's guard is answered before the error is, and
// fn runs again on the ids as read (errAnswered, not errUnknown). Fails
// with the guard answered only when it was queued right after the lock's
// guards: errUnknown, the guess's refusal, is the answer.
func TestToolCallsGuessRefusalChecked(t *testing.T) {
	s, err := postgres.Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	heldSession(t, s) // c1 answered, c2 open
	for _, between := range []string{"a read", "a write"} {
		for _, ra := range []store.ReadAhead{{OpenToolCalls: true, Held: true}, {OpenToolCalls: true}} {
			ctx := store.WithReadAhead(store.Pipelined(t.Context()), ra)
			runs := 0
			err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
				runs++
				if _, err := tx.GetSession(ctx, "t", "s"); err != nil {
					return err
				}
				switch between {
				case "a read":
					if _, err := tx.GetIdempotency(ctx, "t", "s", "k"); !errors.Is(err, store.ErrNotFound) {
						return err
					}
				default:
					if err := tx.AddLedger(ctx, "t", "s", store.LedgerCalls, store.LedgerTotals{Calls: 1}); err != nil {
						return err
					}
				}
				known, err := tx.ToolCalls(ctx, "t", "s", []string{"c1"})
				if err != nil {
					return err
				}
				c, ok := known["c1"]
				switch {
				case !ok:
					return errUnknown
				case c.ResultPosition != 0:
					return errAnswered
				}
				return nil
			})
			if !errors.Is(err, errAnswered) {
				t.Errorf("%s between the lock and the lookup (held %v): answered %v after %d runs, want errAnswered (the stored rows')",
					between, ra.Held, err, runs)
			}
		}
	}
}
