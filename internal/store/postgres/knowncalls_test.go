package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

var errAnswered, errUnknown = errors.New("answered before"), errors.New("never made")

// TestToolCallsGuessed: a pipelined transaction that knows the session's
// open calls (held, or read with the lock) answers ToolCalls from them,
// taking any other id for unknown, and writes and commits in the round
// trip of its lock; an id that has a row (c1, answered) fails the guess on
// the server before any write after it runs, and fn runs again on the ids
// as read — also when fn refused on the guess (its refusal is not
// answered). Fails with the guard always passing: the write on the guess
// lands (c1 made again) and the guessed refusal is answered.
func TestToolCallsGuessed(t *testing.T) {
	url, count := pgtest.RoundTrips(t, pgtest.URL(t))
	s, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	heldSession(t, s) // c1 answered, c2 open
	// run looks ids up, records what it saw, and makes the ids not seen
	// as new calls (refusing instead when refuse says so).
	run := func(ctx context.Context, ids []string, refuse bool) ([]map[string]store.ToolCall, error) {
		var seen []map[string]store.ToolCall
		err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			row, err := tx.GetSession(ctx, "t", "s")
			if err != nil {
				return err
			}
			known, err := tx.ToolCalls(ctx, "t", "s", ids)
			if err != nil {
				return err
			}
			seen = append(seen, known)
			var calls []store.ToolCall
			for _, id := range ids {
				c, ok := known[id]
				switch {
				case ok && c.ResultPosition != 0:
					return errAnswered
				case !ok && refuse:
					return errUnknown
				case !ok:
					calls = append(calls, store.ToolCall{CallID: id, Position: row.LogCount + 1})
				}
			}
			if err := tx.PutToolCalls(ctx, "t", "s", calls); err != nil {
				return err
			}
			row.Version++
			row.LogCount++
			return tx.UpdateSession(ctx, &row)
		})
		return seen, err
	}
	if _, err := run(heldCtx(t.Context()), []string{"c2", "c3"}, false); err != nil { // the statements prepared
		t.Fatal(err)
	}
	before := count()
	seen, err := run(heldCtx(t.Context()), []string{"c2", "c6"}, false)
	if err != nil || len(seen) != 1 || !reflect.DeepEqual(seen[0], map[string]store.ToolCall{"c2": {CallID: "c2", Position: 2}}) {
		t.Fatalf("open and new ids: saw %v, answered %v; want c2 open alone, in one run", seen, err)
	}
	if n := count() - before; n != 1 {
		t.Errorf("open and new ids: %d round trips, want 1 (the lock, the guess and the writes with COMMIT)", n)
	}
	// c1 was answered: the guess takes it for unknown, the server says no.
	seen, err = run(heldCtx(t.Context()), []string{"c1", "c4"}, false)
	if !errors.Is(err, errAnswered) || len(seen) != 2 || len(seen[0]) != 0 || seen[1]["c1"].ResultPosition == 0 {
		t.Errorf("an answered id: saw %v, answered %v; want the guess, then c1 answered, and errAnswered", seen, err)
	}
	seen, err = run(heldCtx(t.Context()), []string{"c1"}, true)
	if !errors.Is(err, errAnswered) || len(seen) != 2 {
		t.Errorf("a refusal on the guess: saw %v, answered %v; want errAnswered from the second run", seen, err)
	}
	// Read with the lock (another replica, nothing held): guessed too.
	other, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	s = other
	ctx := store.WithReadAhead(store.Pipelined(t.Context()), store.ReadAhead{OpenToolCalls: true})
	if _, err := run(ctx, []string{"c5"}, false); err != nil {
		t.Fatal(err)
	}
	before = count()
	if seen, err := run(ctx, []string{"c7"}, false); err != nil || len(seen) != 1 {
		t.Fatalf("read with the lock: saw %v, answered %v; want one run", seen, err)
	}
	if n := count() - before; n != 2 {
		t.Errorf("read with the lock: %d round trips, want 2 (the lock, the writes with COMMIT)", n)
	}
	if seen, err := run(ctx, []string{"c1", "c8"}, false); !errors.Is(err, errAnswered) || len(seen) != 2 {
		t.Errorf("read with the lock, an answered id: saw %v, answered %v; want the guess, then errAnswered", seen, err)
	}
	_, open := lockedRow(t, s, "t", "s")
	var ids []string
	for _, c := range open {
		ids = append(ids, c.CallID)
	}
	if !reflect.DeepEqual(ids, []string{"c2", "c3", "c6", "c5", "c7"}) {
		t.Errorf("open calls %v, want c2 c3 c6 c5 c7 (nothing written on a wrong guess)", ids)
	}
}
